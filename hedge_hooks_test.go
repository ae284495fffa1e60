package httpretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHedgeConcurrentHooksNoRace: hedged operations with hooks, losers canceled or left to finish, run concurrently over HTTP/1.1 and HTTP/2 without a data race, and every attempt is reported once.
func TestHedgeConcurrentHooksNoRace(t *testing.T) {
	realTime(t)
	for _, h2 := range []bool{false, true} {
		for _, finish := range []time.Duration{0, time.Millisecond} {
			var n atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1)%3 != 0 {
					select {
					case <-r.Context().Done():
						return
					case <-time.After(60 * time.Millisecond):
					}
				}
				io.WriteString(w, "ok")
			}))
			srv.EnableHTTP2 = h2
			srv.StartTLS()
			var reported, started atomic.Int64
			tr := &Transport{Base: srv.Client().Transport, MaxAttempts: 3, Budget: Unlimited, IdleTimeout: time.Second,
				Hedging:        &Hedging{Delay: 5 * time.Millisecond, FinishLosers: finish, MaxExtraLoad: 0.9},
				OnAttemptStart: func(*http.Request, int) { started.Add(1) },
				OnAttempt:      func(*http.Request, Attempt) { reported.Add(1) },
			}
			var wg sync.WaitGroup
			var attempts atomic.Int64
			for range 20 {
				wg.Go(func() {
					var o Outcome
					resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", srv.URL, nil))
					attempts.Add(int64(o.Attempts))
					if err != nil {
						// A machine loaded enough to leave a server silent
						// for IdleTimeout on every attempt fails the
						// operation that way, as the rules allow; its
						// attempts are counted all the same.
						if !errors.Is(err, ErrIdleTimeout) {
							t.Errorf("RoundTrip: %v", err)
						}
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				})
			}
			wg.Wait()
			if reported.Load() != attempts.Load() || started.Load() != attempts.Load() {
				t.Errorf("h2=%v finish=%v: %d started, %d reported, outcomes count %d attempts", h2, finish, started.Load(), reported.Load(), attempts.Load())
			}
			time.Sleep(50 * time.Millisecond) // losers left to finish are canceled after FinishLosers
			srv.Client().Transport.(*http.Transport).CloseIdleConnections()
			srv.Close()
		}
	}
}
