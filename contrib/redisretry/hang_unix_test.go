//go:build unix

package redisretry

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
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
