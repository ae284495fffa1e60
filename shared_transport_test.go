package httpretry

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
)

// tallyBudget is a TokenBucket that counts its calls.
type tallyBudget struct {
	b                             *TokenBucket
	deposits, withdrawn, refunded atomic.Int64
}

func (b *tallyBudget) Deposit() { b.deposits.Add(1); b.b.Deposit() }
func (b *tallyBudget) Withdraw(ctx context.Context) bool {
	if !b.b.Withdraw(ctx) {
		return false
	}
	b.withdrawn.Add(1)
	return true
}
func (b *tallyBudget) Refund() { b.refunded.Add(1); b.b.Refund() }

// attemptTally counts the attempts sent through rt.
type attemptTally struct {
	rt    http.RoundTripper
	calls atomic.Int64
}

func (c *attemptTally) RoundTrip(req *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	return c.rt.RoundTrip(req)
}

// TestSharedTransportSpendsATokenForEveryAttemptButTheFirst: 32
// goroutines share one Transport with Hedging (a 2ms delay), a Throttle
// and a Budget, against a loopback server (HTTP/1.1, and HTTP/2 over
// TLS) that answers fast or slowly, 200 or 503, and streams some bodies;
// some callers cancel during the operation or while reading the body.
// Every answer's body is whole when read to its end without a cancel
// (or a Timeout, which bounds the read);
// nothing is left running (goleak); and the budget's tally holds: every
// attempt sent through Base but each operation's first took a token
// (withdrawn and not refunded), and every token withdrawn and not
// refunded was spent on an attempt sent.
func TestSharedTransportSpendsATokenForEveryAttemptButTheFirst(t *testing.T) {
	secondsOfRealTime(t)
	t.Parallel()
	settings := map[string]func(tr *Transport){
		"direct":        func(*Transport) {},
		"loop":          func(tr *Transport) { tr.OnAttempt = func(*http.Request, Attempt) {} },
		"finish losers": func(tr *Transport) { tr.Hedging.FinishLosers = 5 * time.Millisecond },
		"timeout":       func(tr *Transport) { tr.Timeout = 20 * time.Millisecond },
	}
	for _, h2 := range []bool{false, true} {
		for name, set := range settings {
			t.Run(map[bool]string{false: "HTTP/1.1/", true: "HTTP/2/"}[h2]+name, func(t *testing.T) {
				t.Parallel()
				const payload = "0123456789abcdef"
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					switch rand.IntN(6) {
					case 0:
						w.WriteHeader(http.StatusServiceUnavailable)
						return
					case 1:
						select {
						case <-time.After(5 * time.Millisecond):
						case <-r.Context().Done():
							return
						}
					case 2:
						w.Write([]byte(payload[:8]))
						w.(http.Flusher).Flush()
						select {
						case <-time.After(3 * time.Millisecond):
						case <-r.Context().Done():
							return
						}
						w.Write([]byte(payload[8:]))
						return
					}
					io.WriteString(w, payload)
				}))
				srv.EnableHTTP2 = h2
				srv.StartTLS()
				defer srv.Close()
				inner := srv.Client().Transport.(*http.Transport)
				defer inner.CloseIdleConnections()
				base := &attemptTally{rt: inner}
				budget := &tallyBudget{b: NewTokenBucket(1000, 1)}
				tr := &Transport{Base: base, MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond,
					Budget: budget, Hedging: &Hedging{Delay: 2 * time.Millisecond, MaxExtraLoad: 1},
					Throttle: &throttle.Throttle{MinRate: -1}}
				set(tr)
				var wg sync.WaitGroup
				for g := range 32 {
					wg.Go(func() {
						for i := range 15 {
							ctx, cancel := context.WithCancel(context.Background())
							mode := (g + i) % 4
							if mode == 1 {
								time.AfterFunc(time.Duration(rand.IntN(4000))*time.Microsecond, cancel)
							}
							req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/", nil)
							resp, err := tr.RoundTrip(req)
							if err != nil {
								cancel()
								continue
							}
							if mode == 2 {
								buf := make([]byte, 4)
								io.ReadFull(resp.Body, buf)
								cancel()
								io.Copy(io.Discard, resp.Body)
								resp.Body.Close()
								continue
							}
							b, rerr := io.ReadAll(resp.Body)
							resp.Body.Close()
							// A Timeout ends the body's read too.
							whole := mode != 1 && tr.Timeout == 0
							if whole && resp.StatusCode == 200 && (rerr != nil || string(b) != payload) {
								t.Errorf("body %q, %v; want %q whole", b, rerr, payload)
							}
							if whole && resp.StatusCode == 503 && rerr != nil {
								t.Errorf("503's body: %v", rerr)
							}
							cancel()
						}
					})
				}
				wg.Wait()
				calls, ops := base.calls.Load(), budget.deposits.Load()
				spent := budget.withdrawn.Load() - budget.refunded.Load()
				if calls != ops+spent {
					t.Errorf("%d attempts sent for %d operations with %d tokens spent (%d withdrawn, %d refunded); want attempts = operations + tokens spent",
						calls, ops, spent, budget.withdrawn.Load(), budget.refunded.Load())
				}
			})
		}
	}
}
