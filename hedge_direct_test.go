package httpretry

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
)

// TestDirectHedgedAnswersAreWholeUnderConcurrentTightHedges: many
// goroutines share one hedged Transport, with a Throttle and a Logger,
// whose delay is about as long as the server takes, over HTTP/1.1 and
// HTTP/2 with TLS: the hedge fires before, during and after the first
// attempt's answer, and the pooled hedging states go from one operation
// to the next. Some first attempts answer 503 (retried or hedged), some
// are slow (a hedge wins), some answers have no body (204, HEAD). Every
// operation returns its own request's answer, whole, and nothing is left
// running (the package's TestMain checks for leaks); run it with -race.
func TestDirectHedgedAnswersAreWholeUnderConcurrentTightHedges(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			srv := httptest.NewUnstartedServer(tightHedgeServer())
			srv.EnableHTTP2 = h2
			srv.StartTLS()
			defer srv.Close()
			base := srv.Client().Transport.(*http.Transport)
			defer base.CloseIdleConnections()
			tr := &Transport{Base: base, MaxAttempts: 3, Budget: Unlimited,
				BaseDelay: time.Microsecond, MaxDelay: time.Microsecond,
				Hedging:  &Hedging{Delay: 30 * time.Microsecond, MaxExtraLoad: 1},
				Throttle: &throttle.Throttle{}, Logger: slog.New(slog.DiscardHandler)}
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range 40 {
						id, method := fmt.Sprintf("%d-%d", g, i), http.MethodGet
						if i%4 == 1 {
							method = http.MethodHead
						}
						req, _ := http.NewRequest(method, srv.URL+"/?op="+id, nil)
						resp, err := tr.RoundTrip(req)
						if err != nil {
							t.Errorf("op %s: %v", id, err)
							continue
						}
						b, err := io.ReadAll(resp.Body)
						resp.Body.Close()
						status, body := tightHedgeAnswer(id, method)
						if err != nil || resp.StatusCode != status || string(b) != body {
							t.Errorf("op %s: %d, %d bytes, %v; want %d and its own body", id, resp.StatusCode, len(b), err, status)
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// tightHedgeServer answers the operation named by the "op" query
// parameter: its first copy with a 503 when the name ends in 3, slowly
// (20ms, or until canceled) when it ends in 7; then as tightHedgeAnswer
// says.
func tightHedgeServer() http.Handler {
	var mu sync.Mutex
	seen := map[string]int{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("op")
		mu.Lock()
		seen[id]++
		n := seen[id]
		mu.Unlock()
		switch {
		case n == 1 && strings.HasSuffix(id, "3"):
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case n == 1 && strings.HasSuffix(id, "7"):
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		status, body := tightHedgeAnswer(id, http.MethodGet)
		w.WriteHeader(status)
		io.WriteString(w, body)
	})
}

// tightHedgeAnswer is the answer an operation named id gets in the end:
// a 204 when the name ends in 5, else a 200 with a body of its own (none
// for a HEAD).
func tightHedgeAnswer(id, method string) (int, string) {
	if strings.HasSuffix(id, "5") {
		return http.StatusNoContent, ""
	}
	if method == http.MethodHead {
		return http.StatusOK, ""
	}
	return http.StatusOK, strings.Repeat(id+";", 512)
}

// TestHedgeFinishLosersSendsTheFirstAttemptOnAGoroutineOfItsOwn: with
// FinishLosers and nothing else set, over an *http.Transport, the first
// attempt may outlive RoundTrip, so it is not sent on the caller's
// goroutine: when it hangs and the hedge answers 200, RoundTrip returns
// the hedge's answer while the first attempt is still in Base; once that
// one answers, its response is drained and closed.
func TestHedgeFinishLosersSendsTheFirstAttemptOnAGoroutineOfItsOwn(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	firstBody := &closeCountingBody{r: strings.NewReader("late")}
	var calls atomic.Int64
	base := &http.Transport{}
	base.RegisterProtocol("mem", roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if calls.Add(1) == 1 {
			<-release
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: firstBody, Request: req}, nil
		}
		return memAnswer(req, 200, "fast"), nil
	}))
	tr := &Transport{Base: base, MaxAttempts: 2, Hedging: &Hedging{Delay: time.Millisecond, FinishLosers: time.Minute}}
	req, _ := http.NewRequest(http.MethodGet, "mem://api.test/", nil)
	done := make(chan result, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		done <- result{resp, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(hangGuardBody):
		close(release)
		t.Fatalf("RoundTrip still waiting %v for a first attempt left to finish", hangGuardBody)
	}
	if r.err != nil {
		close(release)
		t.Fatal(r.err)
	}
	if got := readBody(t, r.resp); got != "fast" {
		t.Errorf("body %q; want the hedge's", got)
	}
	close(release)
	pollUntil(t, "the first attempt's answer, after the operation, to be closed", func() bool { return firstBody.closes.Load() > 0 })
}
