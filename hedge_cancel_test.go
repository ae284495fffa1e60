package httpretry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestHedgeCanceledByTheCallerHasNoLosers: over HTTP/1.1 and HTTP/2 (TLS,
// loopback), with and without FinishLosers, the first attempt and its
// hedge (sent when the delay passed on a fake clock) are both on the
// server when the caller cancels. No attempt won, so none lost: the
// operation stops with canceled, Outcome counts 2 attempts, 1 hedge, no
// loser and no winner, and OnAttempt reports each attempt once, with the
// caller's cancellation as its error (class "canceled"), never as one
// that lost to another; OnAttemptStart and OnAttempt run twice, OnDone
// once, and the hedge's token, spent on a hedge that was sent, is kept.
// The server answers once it sees its client go: over HTTP/1.1 net/http
// may return that answer for a request canceled a moment before (the
// TLS close alert reaches the server before the connection closes), and
// the attempt then reports the answer it got, still not as a loss.
func TestHedgeCanceledByTheCallerHasNoLosers(t *testing.T) {
	t.Parallel()
	for _, h2 := range []bool{false, true} {
		for _, finish := range []time.Duration{0, time.Second} {
			name := "http1"
			if h2 {
				name = "http2"
			}
			if finish > 0 {
				name += "/FinishLosers"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				in := make(chan struct{}, 2)
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					in <- struct{}{}
					<-r.Context().Done()
				}))
				srv.EnableHTTP2 = h2
				srv.StartTLS()
				defer srv.Close()
				fc := clockwork.NewFakeClock()
				b := &countingBudget{}
				var mu sync.Mutex
				var reported []Attempt
				var starts, dones atomic.Int32
				tr := &Transport{Base: srv.Client().Transport, Clock: fc, Budget: b, MaxAttempts: 2,
					Hedging:        &Hedging{Delay: 5 * time.Millisecond, FinishLosers: finish},
					OnAttemptStart: func(*http.Request, int) { starts.Add(1) },
					OnAttempt: func(_ *http.Request, a Attempt) {
						mu.Lock()
						defer mu.Unlock()
						reported = append(reported, a)
					},
					OnDone: func(*http.Request, Outcome) { dones.Add(1) }}
				var o Outcome
				ctx, cancel := context.WithCancel(WithOutcome(context.Background(), &o))
				ch := start(tr, newRequest(t, ctx, http.MethodGet, srv.URL, nil))
				<-in
				advance(t, fc, 1, 5*time.Millisecond)
				<-in
				cancel()
				if r := await(t, ch); !errors.Is(r.err, context.Canceled) {
					t.Fatalf("error %v; want context.Canceled", r.err)
				}
				if o.Reason != Canceled || o.Attempts != 2 || o.Hedges != 1 || o.LosersCanceled != 0 || o.Winner != 0 {
					t.Errorf("outcome %+v; want canceled, 2 attempts, 1 hedge, no loser, no winner", o)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(reported) != 2 || starts.Load() != 2 || dones.Load() != 1 {
					t.Fatalf("OnAttemptStart %d, OnAttempt %d, OnDone %d times; want 2, 2, 1", starts.Load(), len(reported), dones.Load())
				}
				for _, a := range reported {
					answered := !h2 && a.Err == nil && a.Status == http.StatusOK
					if a.Canceled || (ErrorClass(a.Err) != "canceled" && !answered) {
						t.Errorf("attempt %d reported %+v (class %q); want the caller's cancellation, not a loss", a.Number, a, ErrorClass(a.Err))
					}
				}
				if w, r := b.withdrawn.Load(), b.refunded.Load(); w != 1 || r != 0 {
					t.Errorf("budget: %d withdrawn, %d refunded; want the sent hedge's token kept", w, r)
				}
			})
		}
	}
}
