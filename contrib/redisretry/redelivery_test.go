package redisretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/redis/go-redis/v9"
)

// lossyClient returns a go-redis client with its default retries
// (MaxRetries 3) that reaches srv through a proxy losing the replies it is
// told to lose, and the proxy.
func lossyClient(t *testing.T, srv *redistest.Server) (*redis.Client, *redistest.Proxy) {
	t.Helper()
	p := redistest.StartProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	return rdb, p
}

// expectLost fails t unless the proxy lost want replies: each lost reply
// is a script the server ran and go-redis sent again.
func expectLost(t *testing.T, p *redistest.Proxy, want int64) {
	t.Helper()
	if got := p.Lost(); got != want {
		t.Fatalf("replies lost = %d; want %d", got, want)
	}
}

// Five flushes of one deposit of one token each into an empty bucket,
// each reply lost after Redis added the token and each flush sent again
// by go-redis: five tokens, not ten, and every Flush reports success.
func TestLostReplyNeverDepositsTwice(t *testing.T) {
	srv := redistest.Start(t)
	rdb, p := lossyClient(t, srv)
	b := newBudget(t, rdb, "redelivery-deposit", 10, 1, perCall(Options{CallTimeout: patient, FlushInterval: time.Hour}))
	if n := drain(t, b); n != 10 {
		t.Fatalf("drained %d tokens; want 10", n)
	}
	for i := range 5 {
		b.Deposit()
		p.LoseNext("eval", 1)
		if err := b.Flush(context.Background()); err != nil {
			t.Fatalf("Flush %d: %v; want nil (the re-sent call answered the first one's result)", i, err)
		}
	}
	expectLost(t, p, 5)
	if got := tokens(t, b); got != 5 {
		t.Fatalf("tokens = %v; want 5: each deposit applied once", got)
	}
	if s := b.State(); s != Shared {
		t.Fatalf("state = %v; want shared", s)
	}
}

// A Withdraw whose reply is lost after Redis took the last token: the
// re-sent call answers "granted", as the first run did, and takes nothing
// more.
func TestLostReplyNeverWithdrawsTwice(t *testing.T) {
	srv := redistest.Start(t)
	rdb, p := lossyClient(t, srv)
	b := newBudget(t, rdb, "redelivery-withdraw", 2, 0, perCall(Options{CallTimeout: patient, FlushInterval: time.Hour}))
	if !b.Withdraw(context.Background()) {
		t.Fatal("first Withdraw refused")
	}
	p.LoseNext("eval", 1)
	if !b.Withdraw(context.Background()) {
		t.Fatal("Withdraw of the last token refused; want granted: the first delivery took it for this call")
	}
	expectLost(t, p, 1)
	if got := tokens(t, b); got != 0 {
		t.Fatalf("tokens = %v; want 0", got)
	}
}

// Reserve, Complete and Release, each with its reply lost after Redis
// ran it and sent again by go-redis: Reserve answers the caller's own
// reservation (not "in progress"), Complete and Release succeed (not
// ErrStaleToken), and the records are what one delivery leaves.
func TestLostReplyNeverAppliesAStoreScriptTwice(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb, p := lossyClient(t, srv)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	// Loaded, so that each lost reply is the one of a script that ran,
	// not a NOSCRIPT answer to EVALSHA.
	for _, script := range []*redis.Script{reserveScript, completeScript, releaseScript} {
		if err := script.Load(ctx, rdb).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD: %v", err)
		}
	}

	p.LoseNext("eval", 1)
	r, err := s.Reserve(ctx, "order-1", "fp", time.Minute)
	if err != nil || r.State != idempotency.StateReserved || r.Token == 0 || r.TookOver {
		t.Fatalf("Reserve = %+v, %v; want reserved with a token, not taken over", r, err)
	}
	// One delivery's token: the second delivery answered it, and issued
	// none of its own.
	if got := rdb.HGet(ctx, recordKey(prefix, "order-1"), "tok").Val(); got != fmt.Sprint(r.Token) {
		t.Fatalf("record token = %s; want %d, the token Reserve returned", got, r.Token)
	}
	resp := &idempotency.Response{Status: 201, Body: []byte("charged")}
	p.LoseNext("eval", 1)
	if err := s.Complete(ctx, "order-1", r.Token, resp, time.Hour); err != nil {
		t.Fatalf("Complete = %v; want nil: the response was recorded", err)
	}
	got, err := s.Reserve(ctx, "order-1", "fp", time.Minute)
	if err != nil || got.State != idempotency.StateCompleted || string(got.Response.Body) != "charged" {
		t.Fatalf("Reserve after Complete = %+v, %v; want the recorded response", got, err)
	}

	p.LoseNext("eval", 1)
	r2, err := s.Reserve(ctx, "order-2", "fp", time.Minute)
	if err != nil || r2.State != idempotency.StateReserved || r2.Token == 0 {
		t.Fatalf("Reserve order-2 = %+v, %v; want reserved with a token", r2, err)
	}
	if got := rdb.Get(ctx, lockKey(prefix, "order-2")).Val(); got != fmt.Sprint(r2.Token) {
		t.Fatalf("lock holds %s; want %d, the token Reserve returned", got, r2.Token)
	}
	p.LoseNext("eval", 1)
	if err := s.Release(ctx, "order-2", r2.Token); err != nil {
		t.Fatalf("Release = %v; want nil", err)
	}
	expectLost(t, p, 4)
	if n := rdb.Exists(ctx, recordKey(prefix, "order-2"), lockKey(prefix, "order-2")).Val(); n != 0 {
		t.Fatalf("order-2's record or lock still exists after Release")
	}
	// A second caller still meets the store as one delivery left it.
	r3, err := s.Reserve(ctx, "order-2", "fp", time.Minute)
	if err != nil || r3.State != idempotency.StateReserved || r3.Token <= r2.Token {
		t.Fatalf("Reserve order-2 again = %+v, %v; want reserved with a token above %d", r3, err, r2.Token)
	}
	if err := s.Complete(ctx, "order-2", r2.Token, resp, time.Hour); !errors.Is(err, idempotency.ErrStaleToken) {
		t.Fatalf("Complete with the released token = %v; want ErrStaleToken", err)
	}
}

// A Complete that never reached Redis (every delivery lost on the way, the
// network failing while the charge ran) leaves the reservation held until
// its lock expires, as the Store contract says: a Release that does get
// through would free the key, and the client's retry would charge again.
func TestFailedCompleteNeverFreesTheKey(t *testing.T) {
	srv := redistest.Start(t)
	rdb, p := lossyClient(t, srv)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	var charges atomic.Int32
	op := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := charges.Add(1)
		// Complete's first delivery and go-redis's 3 retries are lost.
		p.DropNext("evalsha", 4)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "charge %d", n)
	})
	var storeErrors atomic.Int32
	h := idempotency.Handler(op, s, idempotency.Options{OnEvent: func(e idempotency.Event) {
		if e.Kind == idempotency.KindStoreError {
			storeErrors.Add(1)
		}
	}})
	post := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/charge", strings.NewReader(`{"amount":5}`))
		req.Header.Set("Idempotency-Key", "order-1")
		h.ServeHTTP(rec, req)
		return rec
	}
	if got := post(); got.Code != http.StatusCreated || got.Body.String() != "charge 1" {
		t.Fatalf("first: %d %q; want 201 \"charge 1\" (sent unrecorded)", got.Code, got.Body.String())
	}
	if got := p.Dropped(); got != 4 || storeErrors.Load() != 1 {
		t.Fatalf("commands dropped = %d, store errors = %d; want 4, 1", got, storeErrors.Load())
	}
	got := post()
	if n := charges.Load(); n != 1 {
		t.Fatalf("charges = %d; want 1 (the retry answered %d %q)", n, got.Code, got.Body.String())
	}
	if got.Code != http.StatusConflict {
		t.Fatalf("retry within the lock: %d %q; want 409 (the key is held until its lock expires)", got.Code, got.Body.String())
	}
}
