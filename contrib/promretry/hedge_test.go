package promretry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
)

// slowFirstServer answers every operation's first request (by the X-Op
// header) only after slow, or when its caller gives up, and every later
// one at once. It counts requests and the ones canceled before their
// answer.
type slowFirstServer struct {
	*httptest.Server
	slow     time.Duration
	mu       sync.Mutex
	seen     map[string]int
	requests atomic.Int64
	canceled atomic.Int64
}

func newSlowFirstServer(t *testing.T, slow time.Duration) *slowFirstServer {
	t.Helper()
	s := &slowFirstServer{slow: slow, seen: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.mu.Lock()
		s.seen[r.Header.Get("X-Op")]++
		first := s.seen[r.Header.Get("X-Op")] == 1
		s.mu.Unlock()
		if first {
			select {
			case <-time.After(s.slow):
			case <-r.Context().Done():
				s.canceled.Add(1)
				return
			}
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

// runOps sends n GETs through c, one after another, each read to the end.
func runOps(t *testing.T, c *http.Client, url string, n int) {
	t.Helper()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("X-Op", strconv.Itoa(i))
		resp, err := c.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("operation %d: %v", i, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if err != nil || string(b) != "ok" {
			t.Fatalf("operation %d: body %q, %v", i, b, err)
		}
	}
}

// refuseAll is a Budget that refuses every hedge and retry.
type refuseAll struct{}

func (refuseAll) Deposit()                      {}
func (refuseAll) Withdraw(context.Context) bool { return false }
func (refuseAll) Refund()                       {}

// TestHedgeMetricsFromARealHedgedRun sends operations whose first attempt
// the server holds for seconds through a Transport hedging after 20ms,
// and checks the scraped hedge counters against the server's own counts
// and the Outcomes, and the delay gauge against the fixed delay.
func TestHedgeMetricsFromARealHedgedRun(t *testing.T) {
	t.Parallel()
	const ops = 5
	srv := newSlowFirstServer(t, 10*time.Second)
	c, reg := newCollector(t, Options{})
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	var hedges, won, losers, refused atomic.Int64
	tr := &httpretry.Transport{Base: base, Hedging: &httpretry.Hedging{Delay: 20 * time.Millisecond},
		OnDone: func(_ *http.Request, o httpretry.Outcome) {
			hedges.Add(int64(o.Hedges))
			losers.Add(int64(o.LosersCanceled))
			refused.Add(int64(o.HedgesRefused))
			if o.HedgeWon {
				won.Add(1)
			}
		}}
	c.Instrument(tr)
	runOps(t, &http.Client{Transport: tr}, srv.URL+"/item", ops)
	base.CloseIdleConnections()
	srv.Close() // waits for the losers' handlers: the server's counts are final

	// Every first attempt was held, so every operation sent a hedge,
	// which won, and its first attempt was canceled. A busy machine may
	// keep a hedge from answering within the delay too, and a second
	// hedge then goes out, to be canceled, perhaps before it reached the
	// server: the server sees at most the hedges and losers the Outcomes
	// report, and the metrics count exactly those.
	sent, canceled := hedges.Load(), losers.Load()
	if got := srv.requests.Load() - ops; got < ops || got > sent {
		t.Errorf("server saw %d hedges; want from %d to the %d the Outcomes report", got, ops, sent)
	}
	if got := srv.canceled.Load(); got < ops || got > canceled {
		t.Errorf("server saw %d requests canceled; want from %d to the %d the Outcomes report", got, ops, canceled)
	}
	if won.Load() != ops || refused.Load() != 0 || canceled != sent {
		t.Errorf("Outcomes: %d hedges, %d won, %d losers canceled, %d refused; want %d won, 0 refused, a loser per hedge",
			sent, won.Load(), canceled, refused.Load(), ops)
	}
	host := srv.Listener.Addr().String()
	all := samples(scrape(t, reg))
	series := fmt.Sprintf(`{method="GET",route=%q}`, host)
	checkFamily(t, all, "httpretry_hedges_total", map[string]float64{"httpretry_hedges_total" + series: float64(sent)})
	checkFamily(t, all, "httpretry_hedges_won_total", map[string]float64{"httpretry_hedges_won_total" + series: ops})
	checkFamily(t, all, "httpretry_hedge_losers_canceled_total", map[string]float64{"httpretry_hedge_losers_canceled_total" + series: float64(canceled)})
	checkFamily(t, all, "httpretry_hedges_refused_total", map[string]float64{})
	checkFamily(t, all, "httpretry_hedge_delay_seconds", map[string]float64{
		fmt.Sprintf(`httpretry_hedge_delay_seconds{route=%q}`, host): 0.02,
	})
}

// TestHedgeMetricsRefused sends the same operations through a Transport
// whose budget refuses every hedge: each operation refuses one and then
// waits for its first attempt.
func TestHedgeMetricsRefused(t *testing.T) {
	t.Parallel()
	const ops = 3
	srv := newSlowFirstServer(t, 100*time.Millisecond)
	c, reg := newCollector(t, Options{})
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	tr := &httpretry.Transport{Base: base, Budget: refuseAll{}, Hedging: &httpretry.Hedging{Delay: 20 * time.Millisecond}}
	c.Instrument(tr)
	runOps(t, &http.Client{Transport: tr}, srv.URL+"/item", ops)
	base.CloseIdleConnections()
	srv.Close()

	if got := srv.requests.Load(); got != ops {
		t.Errorf("server saw %d requests, want %d: no hedge sent", got, ops)
	}
	all := samples(scrape(t, reg))
	series := fmt.Sprintf(`{method="GET",route=%q}`, srv.Listener.Addr().String())
	checkFamily(t, all, "httpretry_hedges_refused_total", map[string]float64{"httpretry_hedges_refused_total" + series: ops})
	checkFamily(t, all, "httpretry_hedges_total", map[string]float64{})
	checkFamily(t, all, "httpretry_hedges_won_total", map[string]float64{})
	checkFamily(t, all, "httpretry_hedge_losers_canceled_total", map[string]float64{})
}

// TestHedgeDelayGaugeAdaptive checks that the gauge of an adaptive delay
// is absent until the Transport knows enough latencies, then reports the
// delay the Transport would use, no less than its floor.
func TestHedgeDelayGaugeAdaptive(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	c, reg := newCollector(t, Options{})
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	tr := &httpretry.Transport{Base: base, Hedging: &httpretry.Hedging{MinSamples: 20, MinDelay: 5 * time.Millisecond}}
	c.Instrument(tr)
	client := &http.Client{Transport: tr}
	host := srv.Listener.Addr().String()

	runOps(t, client, srv.URL, 5)
	checkFamily(t, samples(scrape(t, reg)), "httpretry_hedge_delay_seconds", map[string]float64{})

	runOps(t, client, srv.URL, 30)
	want, ok := tr.HedgeDelay(host)
	if !ok || want < 5*time.Millisecond {
		t.Fatalf("HedgeDelay(%q) = %v, %v; want at least the 5ms floor, true", host, want, ok)
	}
	checkFamily(t, samples(scrape(t, reg)), "httpretry_hedge_delay_seconds", map[string]float64{
		fmt.Sprintf(`httpretry_hedge_delay_seconds{route=%q}`, host): want.Seconds(),
	})
}
