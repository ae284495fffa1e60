// Package storetest checks an [idempotency.Store] implementation against
// the Store contract: atomic reservation, replay, fingerprint mismatches,
// fencing tokens, lock takeover and expiry, with keys in the forms the
// Handler hands to stores (scoped keys hold a NUL byte) and responses as
// it records them (trailers under keys prefixed "Trailer:").
//
// A store whose clock the test controls runs every case without waiting:
//
//	func TestMemoryStore(t *testing.T) {
//		storetest.RunWithClock(t, func(t *testing.T) (idempotency.Store, func(time.Duration)) {
//			fc := clockwork.NewFakeClock()
//			return idempotency.NewMemoryStore(idempotency.MemoryOptions{Clock: fc}), fc.Advance
//		})
//	}
//
// A store on a server with its own clock (Redis, Postgres, DynamoDB) runs
// in real time: the time-dependent cases use TTLs of [ShortTTL] and poll
// until the store reports the record expired, for up to [ExpiryWait]:
//
//	storetest.Run(t, func(t *testing.T) idempotency.Store { return newRedisStore(t) })
//
// newStore is called once per case and should return an empty store, or
// one whose keys cannot collide with other cases' (the suite also makes
// its keys unique per run).
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/idempotency"
)

// ShortTTL is the lock and response TTL of the time-dependent cases in
// real time.
const ShortTTL = 50 * time.Millisecond

// ExpiryWait is how long a real-time case polls for a record to expire
// before it fails.
const ExpiryWait = 10 * time.Second

// longTTL is a TTL no case outlives.
const longTTL = time.Hour

// Run runs the conformance suite in real time against the stores newStore
// returns, one per case.
func Run(t *testing.T, newStore func(t *testing.T) idempotency.Store) {
	t.Helper()
	run(t, func(t *testing.T) *harness {
		return &harness{store: newStore(t)}
	})
}

// RunWithClock runs the conformance suite against stores whose clock the
// test controls: newStore returns a store and a function that moves that
// store's clock forward. No case waits in real time, and expiry boundaries
// are checked exactly: a record is live until its TTL has passed and
// expired from then on.
func RunWithClock(t *testing.T, newStore func(t *testing.T) (idempotency.Store, func(time.Duration))) {
	t.Helper()
	run(t, func(t *testing.T) *harness {
		s, advance := newStore(t)
		return &harness{store: s, advance: advance}
	})
}

// harness is one case's store and, when the test controls its clock, the
// function that advances it.
type harness struct {
	store   idempotency.Store
	advance func(time.Duration)
	prefix  string
}

func run(t *testing.T, newHarness func(t *testing.T) *harness) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"reserve_new_key", testReserveNew},
		{"in_progress", testInProgress},
		{"mismatch", testMismatch},
		{"complete_then_replay", testCompleteReplay},
		{"responses_are_copies", testCopies},
		{"stale_tokens", testStaleTokens},
		{"release_then_reserve", testRelease},
		{"tokens_increase", testTokensIncrease},
		{"keys_are_independent", testIndependentKeys},
		{"concurrent_reserve", testConcurrentReserve},
		{"lock_takeover_fences_old_owner", testTakeover},
		{"expired_lock_keeps_fingerprint", testExpiredLockMismatch},
		{"response_expires", testResponseExpires},
		{"scoped_keys", testScopedKeys},
		{"recorded_trailers", testRecordedTrailers},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.prefix = fmt.Sprintf("storetest-%s-%016x-", c.name, rand.Uint64())
			c.fn(t, h)
		})
	}
}

// key returns a key unique to this case and run.
func (h *harness) key(name string) string { return h.prefix + name }

func (h *harness) reserve(t *testing.T, key, fp string, lockTTL time.Duration) idempotency.Reservation {
	t.Helper()
	r, err := h.store.Reserve(context.Background(), key, fp, lockTTL)
	if err != nil {
		t.Fatalf("Reserve(%q): %v", key, err)
	}
	return r
}

func (h *harness) mustReserve(t *testing.T, key, fp string, lockTTL time.Duration) idempotency.Token {
	t.Helper()
	r := h.reserve(t, key, fp, lockTTL)
	if r.State != idempotency.StateReserved || r.Token == 0 {
		t.Fatalf("Reserve(%q) = %v with token %d, want reserved with a token", key, r.State, r.Token)
	}
	return r.Token
}

func (h *harness) expectState(t *testing.T, key, fp string, want idempotency.State) idempotency.Reservation {
	t.Helper()
	r := h.reserve(t, key, fp, longTTL)
	if r.State != want {
		t.Fatalf("Reserve(%q) = %v, want %v", key, r.State, want)
	}
	return r
}

func (h *harness) complete(t *testing.T, key string, token idempotency.Token, resp *idempotency.Response, ttl time.Duration) {
	t.Helper()
	if err := h.store.Complete(context.Background(), key, token, resp, ttl); err != nil {
		t.Fatalf("Complete(%q, %d): %v", key, token, err)
	}
}

// reserveAfter lets ttl pass and then reserves key for fp, expecting the
// store to see the earlier record expired. With a controlled clock it
// first checks that the record is still in state live 1ms before ttl; in
// real time it waits ttl and then polls, for up to ExpiryWait, while
// Reserve still reports live (which changes nothing in the store).
func (h *harness) reserveAfter(t *testing.T, key, fp string, ttl time.Duration, live idempotency.State) idempotency.Reservation {
	t.Helper()
	if h.advance != nil {
		h.advance(ttl - time.Millisecond)
		h.expectState(t, key, fp, live)
		h.advance(time.Millisecond)
		return h.reserve(t, key, fp, longTTL)
	}
	deadline := time.Now().Add(ExpiryWait)
	time.Sleep(ttl)
	for {
		r := h.reserve(t, key, fp, longTTL)
		if r.State != live || time.Now().After(deadline) {
			return r
		}
		time.Sleep(ShortTTL / 5)
	}
}

// pass lets d pass on the store's clock.
func (h *harness) pass(d time.Duration) {
	if h.advance != nil {
		h.advance(d)
		return
	}
	time.Sleep(d)
}

func (h *harness) ttl() time.Duration {
	if h.advance != nil {
		return time.Minute
	}
	return ShortTTL
}

func response(status int, body string) *idempotency.Response {
	return &idempotency.Response{
		Status: status,
		Header: http.Header{"Content-Type": {"application/json"}, "X-Order": {"a", "b"}},
		Body:   []byte(body),
	}
}

// sameResponse reports whether got and want hold the same status, header
// and body; a nil and an empty header are the same.
func sameResponse(got, want *idempotency.Response) bool {
	if got == nil || want == nil {
		return got == want
	}
	if got.Status != want.Status || !bytes.Equal(got.Body, want.Body) || len(got.Header) != len(want.Header) {
		return false
	}
	for k, vs := range want.Header {
		gs := got.Header[k]
		if len(gs) != len(vs) {
			return false
		}
		for i := range vs {
			if gs[i] != vs[i] {
				return false
			}
		}
	}
	return true
}

func expectResponse(t *testing.T, r idempotency.Reservation, want *idempotency.Response) {
	t.Helper()
	if !sameResponse(r.Response, want) {
		t.Fatalf("replayed response = %+v, want %+v", r.Response, want)
	}
}

func expectStale(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, idempotency.ErrStaleToken) {
		t.Fatalf("%s: err = %v, want ErrStaleToken", what, err)
	}
}

func testReserveNew(t *testing.T, h *harness) {
	r := h.reserve(t, h.key("k"), "fp", longTTL)
	if r.State != idempotency.StateReserved || r.Token == 0 || r.TookOver || r.Response != nil {
		t.Fatalf("Reserve of a new key = %+v, want reserved with a token, no takeover, no response", r)
	}
}

func testInProgress(t *testing.T, h *harness) {
	k := h.key("k")
	h.mustReserve(t, k, "fp", longTTL)
	for range 3 {
		r := h.expectState(t, k, "fp", idempotency.StateInProgress)
		if r.Token != 0 || r.Response != nil {
			t.Fatalf("in-progress reservation = %+v, want no token and no response", r)
		}
	}
}

func testMismatch(t *testing.T, h *harness) {
	k := h.key("k")
	tok := h.mustReserve(t, k, "fp-a", longTTL)
	h.expectState(t, k, "fp-b", idempotency.StateMismatch)
	h.complete(t, k, tok, response(201, "a"), longTTL)
	h.expectState(t, k, "fp-b", idempotency.StateMismatch)
	expectResponse(t, h.expectState(t, k, "fp-a", idempotency.StateCompleted), response(201, "a"))
}

func testCompleteReplay(t *testing.T, h *harness) {
	cases := map[string]*idempotency.Response{
		"created":     response(201, `{"id":"o-1"}`),
		"client_err":  response(404, "no such book"),
		"empty_body":  {Status: 204},
		"binary_body": {Status: 200, Header: http.Header{"Content-Type": {"application/octet-stream"}}, Body: []byte{0, 1, 2, 0xff, '\r', '\n'}},
	}
	for name, want := range cases {
		k := h.key(name)
		tok := h.mustReserve(t, k, "fp", longTTL)
		h.complete(t, k, tok, want, longTTL)
		for range 2 {
			r := h.expectState(t, k, "fp", idempotency.StateCompleted)
			if r.Token != 0 {
				t.Fatalf("%s: completed reservation carries token %d, want 0", name, r.Token)
			}
			expectResponse(t, r, want)
		}
	}
}

func testCopies(t *testing.T, h *harness) {
	k := h.key("k")
	tok := h.mustReserve(t, k, "fp", longTTL)
	resp := response(200, "original")
	h.complete(t, k, tok, resp, longTTL)
	resp.Body[0] = 'X'
	resp.Header.Set("Content-Type", "text/changed")
	got := h.expectState(t, k, "fp", idempotency.StateCompleted)
	expectResponse(t, got, response(200, "original"))
	got.Response.Body[0] = 'Y'
	got.Response.Header.Del("X-Order")
	expectResponse(t, h.expectState(t, k, "fp", idempotency.StateCompleted), response(200, "original"))
}

func testStaleTokens(t *testing.T, h *harness) {
	ctx := context.Background()
	expectStale(t, "Complete of an unknown key", h.store.Complete(ctx, h.key("unknown"), 1, response(200, ""), longTTL))
	expectStale(t, "Release of an unknown key", h.store.Release(ctx, h.key("unknown"), 1))

	k := h.key("k")
	tok := h.mustReserve(t, k, "fp", longTTL)
	expectStale(t, "Complete with another token", h.store.Complete(ctx, k, tok+1, response(500, "wrong"), longTTL))
	expectStale(t, "Release with another token", h.store.Release(ctx, k, tok+1))
	expectStale(t, "Complete with token 0", h.store.Complete(ctx, k, 0, response(500, "wrong"), longTTL))
	h.expectState(t, k, "fp", idempotency.StateInProgress)

	h.complete(t, k, tok, response(201, "first"), longTTL)
	expectStale(t, "second Complete", h.store.Complete(ctx, k, tok, response(500, "second"), longTTL))
	expectStale(t, "Release after Complete", h.store.Release(ctx, k, tok))
	expectResponse(t, h.expectState(t, k, "fp", idempotency.StateCompleted), response(201, "first"))
}

func testRelease(t *testing.T, h *harness) {
	ctx := context.Background()
	k := h.key("k")
	first := h.mustReserve(t, k, "fp-a", longTTL)
	if err := h.store.Release(ctx, k, first); err != nil {
		t.Fatalf("Release: %v", err)
	}
	expectStale(t, "second Release", h.store.Release(ctx, k, first))
	expectStale(t, "Complete after Release", h.store.Complete(ctx, k, first, response(200, ""), longTTL))
	// A released key records nothing: any payload may use it again.
	second := h.mustReserve(t, k, "fp-b", longTTL)
	if second <= first {
		t.Fatalf("token after release = %d, want > %d", second, first)
	}
	h.expectState(t, k, "fp-b", idempotency.StateInProgress)
}

func testTokensIncrease(t *testing.T, h *harness) {
	ctx := context.Background()
	k := h.key("k")
	var last idempotency.Token
	for i := range 5 {
		tok := h.mustReserve(t, k, "fp", longTTL)
		if tok <= last {
			t.Fatalf("reservation %d: token %d, want > %d", i, tok, last)
		}
		last = tok
		if err := h.store.Release(ctx, k, tok); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
}

func testIndependentKeys(t *testing.T, h *harness) {
	a, b := h.key("a"), h.key("b")
	ta := h.mustReserve(t, a, "fp", longTTL)
	h.mustReserve(t, b, "other", longTTL)
	h.complete(t, a, ta, response(200, "a"), longTTL)
	h.expectState(t, b, "other", idempotency.StateInProgress)
	h.expectState(t, a, "other", idempotency.StateMismatch)
	expectResponse(t, h.expectState(t, a, "fp", idempotency.StateCompleted), response(200, "a"))
}

func testConcurrentReserve(t *testing.T, h *harness) {
	const keys, callers = 8, 32
	for i := range keys {
		k := h.key(fmt.Sprint(i))
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			count = map[idempotency.State]int{}
			errs  []error
		)
		start := make(chan struct{})
		for range callers {
			wg.Go(func() {
				<-start
				r, err := h.store.Reserve(context.Background(), k, "fp", longTTL)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				count[r.State]++
			})
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("concurrent Reserve: %v", errs[0])
		}
		if count[idempotency.StateReserved] != 1 || count[idempotency.StateInProgress] != callers-1 {
			t.Fatalf("%d concurrent Reserve calls: %v, want exactly 1 reserved and %d in progress", callers, count, callers-1)
		}
	}
}

func testTakeover(t *testing.T, h *harness) {
	ctx := context.Background()
	k := h.key("k")
	lockTTL := h.ttl()
	first := h.mustReserve(t, k, "fp", lockTTL)
	r := h.reserveAfter(t, k, "fp", lockTTL, idempotency.StateInProgress)
	if r.State != idempotency.StateReserved || !r.TookOver || r.Token <= first {
		t.Fatalf("Reserve after the lock expired = %+v, want reserved, took over, token > %d", r, first)
	}
	second := r.Token
	expectStale(t, "Complete by the first owner", h.store.Complete(ctx, k, first, response(200, "first"), longTTL))
	expectStale(t, "Release by the first owner", h.store.Release(ctx, k, first))
	h.expectState(t, k, "fp", idempotency.StateInProgress)
	h.complete(t, k, second, response(201, "second"), longTTL)
	expectStale(t, "Complete by the first owner after the second", h.store.Complete(ctx, k, first, response(200, "first"), longTTL))
	expectResponse(t, h.expectState(t, k, "fp", idempotency.StateCompleted), response(201, "second"))
}

func testExpiredLockMismatch(t *testing.T, h *harness) {
	k := h.key("k")
	lockTTL := h.ttl()
	h.mustReserve(t, k, "fp-a", lockTTL)
	// The first payload may have had its effect: the key stays its own
	// even when its owner is gone.
	h.pass(lockTTL + lockTTL/2)
	h.expectState(t, k, "fp-b", idempotency.StateMismatch)
}

func testResponseExpires(t *testing.T, h *harness) {
	k := h.key("k")
	ttl := h.ttl()
	first := h.mustReserve(t, k, "fp", longTTL)
	h.complete(t, k, first, response(201, "old"), ttl)
	r := h.reserveAfter(t, k, "fp", ttl, idempotency.StateCompleted)
	if r.State != idempotency.StateReserved || r.TookOver || r.Token <= first {
		t.Fatalf("Reserve after the response expired = %+v, want reserved (no takeover), token > %d", r, first)
	}
}

// scopedKey is the key the Handler hands to a Store for key within scope
// (Options.KeyScope): the scope, a NUL byte, the key.
func scopedKey(scope, key string) string { return scope + "\x00" + key }

func testScopedKeys(t *testing.T, h *harness) {
	// Scopes as KeyScope functions return them: an account ID, a hex
	// digest, text with a Redis hash tag's braces, UTF-8, a scope that
	// itself holds NUL bytes; and a key of the longest length the Handler
	// accepts.
	longKey := strings.Repeat("k", idempotency.DefaultMaxKeyLength)
	scopes := []string{
		"acct:42",
		strings.Repeat("0123456789abcdef", 4),
		"{tenant}:eu",
		"ünïcødé",
		"a\x00b",
	}
	bare := h.key(longKey)
	tBare := h.mustReserve(t, bare, "fp", longTTL)
	tokens := map[string]idempotency.Token{}
	for _, scope := range scopes {
		k := scopedKey(h.key(scope), longKey)
		tokens[k] = h.mustReserve(t, k, "fp", longTTL)
		// Another key in the same scope, for another payload, is free.
		h.mustReserve(t, scopedKey(h.key(scope), "other"), "other fp", longTTL)
	}
	// Each scoped key is its own key: completing one leaves the others,
	// and the bare key, in progress.
	for i, scope := range scopes {
		k := scopedKey(h.key(scope), longKey)
		h.complete(t, k, tokens[k], response(200, fmt.Sprintf("scope %d", i)), longTTL)
		h.expectState(t, bare, "fp", idempotency.StateInProgress)
		for _, other := range scopes[i+1:] {
			h.expectState(t, scopedKey(h.key(other), longKey), "fp", idempotency.StateInProgress)
		}
	}
	for i, scope := range scopes {
		k := scopedKey(h.key(scope), longKey)
		expectResponse(t, h.expectState(t, k, "fp", idempotency.StateCompleted), response(200, fmt.Sprintf("scope %d", i)))
		h.expectState(t, k, "other", idempotency.StateMismatch)
	}
	// The same key split differently around its NUL is another key.
	split := h.key("acct:4") + "\x002\x00" + longKey
	if r := h.reserve(t, split, "fp", longTTL); r.State != idempotency.StateReserved {
		t.Fatalf("Reserve of a key that differs only in where its NUL is = %v, want reserved", r.State)
	}
	if err := h.store.Release(context.Background(), bare, tBare); err != nil {
		t.Fatalf("Release of the bare key beside its scoped forms: %v", err)
	}
	expectResponse(t, h.expectState(t, scopedKey(h.key(scopes[0]), longKey), "fp", idempotency.StateCompleted), response(200, "scope 0"))
}

func testRecordedTrailers(t *testing.T, h *harness) {
	k := h.key("k")
	token := h.mustReserve(t, k, "fp", longTTL)
	want := &idempotency.Response{
		Status: 201,
		Header: http.Header{
			"Content-Type":                    {"application/json"},
			http.TrailerPrefix + "X-Checksum": {"sha-256=abc"},
			http.TrailerPrefix + "X-Items":    {"1", "2"},
		},
		Body: []byte("{}"),
	}
	h.complete(t, k, token, want, longTTL)
	expectResponse(t, h.expectState(t, k, "fp", idempotency.StateCompleted), want)
}
