package httpretry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestHedgeHookPanicClosesTheWinnersResponse: over HTTP/1.1 and HTTP/2
// (TLS, loopback), the first attempt reaches the server and hangs until
// it is canceled, and the hedge sent after it (the delay passed on a fake
// clock; MaxAttempts 2, so one hedge at most) is answered 200. A hook
// panics on the caller's goroutine after that answer arrived and before
// RoundTrip returns it: OnAttempt of the winner, OnAttempt of the loser,
// Transient of the winner's answer, or OnDone. RoundTrip raises the hook's
// panic once both attempts have ended, the winner's response, which
// nobody will read, is closed exactly once, so that no connection and
// none of its goroutines is left behind (goleak), and the hedge's token,
// spent on a hedge that was sent, is kept.
func TestHedgeHookPanicClosesTheWinnersResponse(t *testing.T) {
	t.Parallel()
	boom := func() { panic("hook broke") }
	for _, h2 := range []bool{false, true} {
		for _, c := range []struct {
			name string
			set  func(tr *Transport)
		}{
			{"OnAttempt of the winner", func(tr *Transport) {
				tr.OnAttempt = func(_ *http.Request, a Attempt) {
					if a.Status == 200 {
						boom()
					}
				}
			}},
			{"OnAttempt of the loser", func(tr *Transport) {
				tr.OnAttempt = func(_ *http.Request, a Attempt) {
					if a.Canceled {
						boom()
					}
				}
			}},
			{"Transient", func(tr *Transport) {
				tr.Transient = func(resp *http.Response, err error) bool {
					if resp != nil {
						boom()
					}
					return IsTransient(resp, err)
				}
			}},
			{"OnDone", func(tr *Transport) { tr.OnDone = func(*http.Request, Outcome) { boom() } }},
		} {
			name := c.name + "/http1"
			if h2 {
				name = c.name + "/http2"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var hits atomic.Int32
				first := make(chan struct{})
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if hits.Add(1) == 1 {
						close(first)
						<-r.Context().Done()
						return
					}
					io.WriteString(w, "hedge")
				}))
				srv.EnableHTTP2 = h2
				srv.StartTLS()
				defer srv.Close()
				inner := srv.Client().Transport.(*http.Transport)
				defer inner.CloseIdleConnections()
				var closes atomic.Int32
				b := &countingBudget{}
				fc := clockwork.NewFakeClock()
				tr := &Transport{Base: countingCloses(inner, &closes), Budget: b, MaxAttempts: 2, Clock: fc,
					Hedging: &Hedging{Delay: 5 * time.Millisecond}}
				c.set(tr)
				go func() {
					<-first
					advance(t, fc, 1, 5*time.Millisecond)
				}()
				req := newRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
				if p := roundTripPanics(t, tr, req); p != "hook broke" {
					t.Fatalf("recovered %v; want the hook's panic", p)
				}
				if n := hits.Load(); n != 2 {
					t.Fatalf("%d requests reached the server; want the first and its hedge", n)
				}
				if n := closes.Load(); n != 1 {
					t.Errorf("%d closes of the winner's response; want exactly 1", n)
				}
				if w, r := b.withdrawn.Load(), b.refunded.Load(); w != 1 || r != 0 {
					t.Errorf("budget: %d withdrawn, %d refunded; want the hedge's token, sent, kept", w, r)
				}
			})
		}
	}
}

// TestHedgeHookPanicGivesBackTheTokenOfAnUnsentHedge: the first attempt
// hangs until it is canceled, the first attempt reaches the server, the hedge delay passes on a fake clock, the budget grants
// the hedge its token, and OnAttemptStart panics for the hedge before it
// is sent. RoundTrip raises the panic once the first attempt has ended;
// the hedge was never sent, so its budget token and its extra-load token
// are given back: the cap is as full as before.
func TestHedgeHookPanicGivesBackTheTokenOfAnUnsentHedge(t *testing.T) {
	t.Parallel()
	srv, inner, hits, first := hangingTLSServer(t, true)
	b := &countingBudget{}
	fc := clockwork.NewFakeClock()
	tr := &Transport{Base: inner, Budget: b, MaxAttempts: 3, Clock: fc, Hedging: &Hedging{Delay: 5 * time.Millisecond},
		OnAttemptStart: func(_ *http.Request, n int) {
			if n == 2 {
				panic("hook broke")
			}
		}}
	go func() {
		<-first
		advance(t, fc, 1, 5*time.Millisecond)
	}()
	req := newRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
	if p := roundTripPanics(t, tr, req); p != "hook broke" {
		t.Fatalf("recovered %v; want the hook's panic", p)
	}
	if w, r := b.withdrawn.Load(), b.refunded.Load(); w != 1 || r != 1 {
		t.Errorf("budget: %d withdrawn, %d refunded; want the unsent hedge's token given back", w, r)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d requests reached the server; want the first only", n)
	}
	if got := tr.latencies().LookupHost(req).ExtraTokens(); got != hedgeBurst {
		t.Errorf("%v extra-load tokens after the unsent hedge; want the cap full again (%d)", got, hedgeBurst)
	}
}

// TestHedgeHookPanicClosesTheAnswerOfAnAttemptStillRunning: the first
// attempt of a hedged operation is still running when OnAttempt panics on
// the hedge's 503; canceled, it answers anyway (as net/http may, for an
// answer that came as the cancel did). RoundTrip raises the panic only
// once that answer is drained and closed: nothing is left for nobody to
// close.
func TestHedgeHookPanicClosesTheAnswerOfAnAttemptStillRunning(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	var closed atomic.Bool
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if hits.Add(1) == 1 {
			<-req.Context().Done()
			resp := response(req, 200, "late")
			resp.Body = &closeFlag{ReadCloser: resp.Body, closed: &closed}
			return resp, nil
		}
		return response(req, 503, "busy"), nil
	})
	tr := &Transport{Base: base, MaxAttempts: 3, Hedging: &Hedging{Delay: 10 * time.Millisecond},
		OnAttempt: func(_ *http.Request, a Attempt) {
			if a.Status == 503 {
				panic("hook broke")
			}
		}}
	if p := panicOf(t, tr, newRequest(t, context.Background(), "GET", "https://api.example/items", nil)); p != "hook broke" {
		t.Errorf("recovered %v; want the hook's panic", p)
	}
	if !closed.Load() {
		t.Error("the answer of the attempt still running when the hook panicked was not closed")
	}
}

// closeFlag is a response body that records being closed.
type closeFlag struct {
	io.ReadCloser
	closed *atomic.Bool
}

func (b *closeFlag) Close() error {
	b.closed.Store(true)
	return b.ReadCloser.Close()
}

// hangingTLSServer starts a TLS loopback server (HTTP/2 when h2) that
// answers no request until its client leaves, and returns it, a client
// Transport for it, the count of requests it got, and a channel closed
// when the first arrived. Both close when the test ends.
func hangingTLSServer(t *testing.T, h2 bool) (*httptest.Server, *http.Transport, *atomic.Int32, <-chan struct{}) {
	t.Helper()
	hits := new(atomic.Int32)
	first := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			close(first)
		}
		<-r.Context().Done()
	}))
	srv.EnableHTTP2 = h2
	srv.StartTLS()
	inner := srv.Client().Transport.(*http.Transport)
	t.Cleanup(func() {
		inner.CloseIdleConnections()
		srv.Close()
	})
	return srv, inner, hits, first
}
