package httpretry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestCanceledOperationCarriesTheCallersCause: a caller cancels its
// context with a cause of its own (context.WithCancelCause, as an
// errgroup whose sibling failed does) while its operation waits 2s
// (Retry-After, on a fake clock) before a retry, or while an attempt is
// on the server, over HTTP/1.1 and HTTP/2 (TLS, loopback). The operation
// stops with canceled, its error matches context.Canceled and the
// cause, as net/http's own error carries the cause, and the token of the
// retry never sent is refunded.
func TestCanceledOperationCarriesTheCallersCause(t *testing.T) {
	t.Parallel()
	cause := errors.New("sibling failed")
	check := func(t *testing.T, err error, o Outcome) {
		t.Helper()
		if o.Reason != Canceled {
			t.Errorf("reason %q; want canceled", o.Reason)
		}
		if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
			t.Errorf("error %v; want it to match context.Canceled and the caller's cause", err)
		}
	}
	t.Run("during the wait", func(t *testing.T) {
		t.Parallel()
		var hits atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		defer srv.Close()
		fc := clockwork.NewFakeClock()
		b := &countingBudget{}
		var o Outcome
		tr := &Transport{Base: srv.Client().Transport, Clock: fc, Budget: b, Jitter: noJitter}
		ctx, cancel := context.WithCancelCause(WithOutcome(context.Background(), &o))
		ch := start(tr, newRequest(t, ctx, http.MethodGet, srv.URL, nil))
		advance(t, fc, 1, time.Second)
		cancel(cause)
		r := await(t, ch)
		check(t, r.err, o)
		if o.Attempts != 1 || o.Waited != time.Second || hits.Load() != 1 {
			t.Errorf("%d attempts, waited %v, %d requests; want 1, 1s, 1", o.Attempts, o.Waited, hits.Load())
		}
		if w, rf := b.withdrawn.Load(), b.refunded.Load(); w != 1 || rf != 1 {
			t.Errorf("budget: %d withdrawn, %d refunded; want 1 and 1", w, rf)
		}
	})
	for _, h2 := range []bool{false, true} {
		name := "during the attempt/http1"
		if h2 {
			name = "during the attempt/http2"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := make(chan struct{}, 1)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				in <- struct{}{}
				<-r.Context().Done()
			}))
			srv.EnableHTTP2 = h2
			srv.StartTLS()
			defer srv.Close()
			var o Outcome
			tr := &Transport{Base: srv.Client().Transport}
			ctx, cancel := context.WithCancelCause(WithOutcome(context.Background(), &o))
			ch := start(tr, newRequest(t, ctx, http.MethodGet, srv.URL, nil))
			<-in
			cancel(cause)
			r := await(t, ch)
			check(t, r.err, o)
			if o.Attempts != 1 {
				t.Errorf("%d attempts; want 1", o.Attempts)
			}
		})
	}
}

// TestCanceledQuotaWaitMatchesTheCallersContextAndTheQuota: a destination
// answered 200 with its rate-limit quota spent until 10s later, and the
// next operation waits for the reset (WaitQuota, on a fake clock); its
// caller cancels 3s in, with a cause. The operation stops with canceled
// and no attempt; its error matches context.Canceled, the cause, and
// throttle.ErrQuotaExhausted (the refusal the wait ended in), and OnWait
// and Outcome.Waited report the 3s waited.
func TestCanceledQuotaWaitMatchesTheCallersContextAndTheQuota(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("X-Ratelimit-Limit", "5000")
		w.Header().Set("X-Ratelimit-Remaining", "0")
		w.Header().Set("X-Ratelimit-Reset", "10")
	}))
	defer srv.Close()
	fc := clockwork.NewFakeClock()
	var waits []Wait
	tr := &Transport{Base: srv.Client().Transport, Clock: fc,
		Throttle: drawing(&throttle.Throttle{WaitQuota: true}, func() float64 { return 1 }),
		OnWait:   func(_ *http.Request, w Wait) { waits = append(waits, w) }}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), http.MethodGet, srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cause := errors.New("sibling failed")
	var o Outcome
	ctx, cancel := context.WithCancelCause(WithOutcome(context.Background(), &o))
	ch := start(tr, newRequest(t, ctx, http.MethodGet, srv.URL, nil))
	advance(t, fc, 1, 3*time.Second)
	cancel(cause)
	r := await(t, ch)
	if r.err == nil {
		r.resp.Body.Close()
		t.Fatal("a canceled wait for the quota returned a response")
	}
	if o.Reason != Canceled || o.Attempts != 0 || o.Waited != 3*time.Second || hits.Load() != 1 {
		t.Errorf("reason %q, %d attempts, waited %v, %d requests; want canceled, 0, 3s, 1", o.Reason, o.Attempts, o.Waited, hits.Load())
	}
	for _, target := range []error{context.Canceled, cause, throttle.ErrQuotaExhausted} {
		if !errors.Is(r.err, target) {
			t.Errorf("error %v does not match %v", r.err, target)
		}
	}
	if len(waits) != 1 || waits[0].Waited != 3*time.Second {
		t.Errorf("OnWait %+v; want one wait of 3s", waits)
	}
}
