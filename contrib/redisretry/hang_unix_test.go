//go:build unix

package redisretry

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
)

// A request whose time runs out (a server-side deadline, such as
// http.TimeoutHandler's) while Redis is slow to answer its Reserve leaves
// no lock behind for nobody: Redis runs the Reserve once it answers
// again, and the client's retry must not meet "in progress" for a whole
// LockTTL about an operation that no one runs.
func TestRequestTimedOutDuringReserveLeavesNoOrphanLock(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	var charges atomic.Int32
	op := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Err() != nil {
			return // the client has gone: nothing to do
		}
		n := charges.Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "charge %d", n)
	})
	h := idempotency.Handler(op, s, idempotency.Options{})
	post := func(ctx context.Context, key string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/charge", strings.NewReader(`{"amount":5}`))
		req.Header.Set("Idempotency-Key", key)
		h.ServeHTTP(rec, req)
		return rec
	}
	// The policy checked and the scripts loaded: the next Reserve is one
	// command.
	if got := post(context.Background(), "warm-up"); got.Code != http.StatusCreated {
		t.Fatalf("warm-up: %d %q", got.Code, got.Body.String())
	}

	srv.Freeze()
	thawed := false
	defer func() {
		if !thawed {
			srv.Thaw()
		}
	}()
	attempt, giveUp := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer giveUp()
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- post(attempt, "order-1") }() // its Reserve reaches the frozen Redis
	<-attempt.Done()
	time.Sleep(100 * time.Millisecond)
	srv.Thaw()
	thawed = true
	if first := <-done; first.Code == http.StatusCreated {
		t.Fatalf("first: %d %q; want no charge for a request whose time ran out", first.Code, first.Body.String())
	}
	// Redis has run the Reserve once this PING is answered.
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}

	got := post(context.Background(), "order-1")
	if got.Code != http.StatusCreated || got.Body.String() != "charge 2" {
		t.Fatalf("retry: %d %q; want 201 \"charge 2\" (the abandoned attempt ran nothing and left the key free)", got.Code, got.Body.String())
	}
	if n := charges.Load(); n != 2 {
		t.Fatalf("charges = %d; want 2 (warm-up and order-1)", n)
	}
}

// A Redis stalled past CallTimeout runs a Reserve after the store gave
// up on it and the client was answered 503: the store abandoned the call
// under its nonce before answering, so whichever of the two scripts runs
// first when Redis wakes, the key is left free, and the client's retry
// runs the operation (once) instead of meeting "in progress" for a whole
// LockTTL.
func TestReserveGivenUpOnAStalledRedisLeavesNoLock(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: 300 * time.Millisecond})
	var charges atomic.Int32
	h := idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges.Add(1)
		w.WriteHeader(http.StatusCreated)
	}), s, idempotency.Options{})
	post := func() int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/charge", strings.NewReader(`{"amount":5}`))
		req.Header.Set("Idempotency-Key", "order-1")
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if _, err := s.Reserve(ctx, "warm-up", "fp", time.Minute); err != nil {
		t.Fatal(err)
	}
	// Connections ready at hand (four at once, each past its handshake),
	// so that the abandon is written at once to the stalled Redis rather
	// than waiting for a new connection's HELLO: whatever the machine's
	// speed, both scripts are in Redis's sockets before it wakes.
	var ready sync.WaitGroup
	for range 4 {
		ready.Go(func() { rdb.BLPop(ctx, 100*time.Millisecond, prefix+"none") })
	}
	ready.Wait()

	srv.Freeze()
	first := post()
	srv.Thaw()
	if first != http.StatusServiceUnavailable || charges.Load() != 0 {
		t.Fatalf("during the stall: %d, %d charges; want 503 and none", first, charges.Load())
	}
	if err := rdb.Ping(ctx).Err(); err != nil { // Redis has run both scripts
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, lockKey(prefix, "order-1")).Val(); n != 0 {
		t.Fatal("the Reserve that ran after the store gave up left its lock")
	}
	if got := post(); got != http.StatusCreated || charges.Load() != 1 {
		t.Fatalf("retry: %d, %d charges; want 201 and one", got, charges.Load())
	}
}
