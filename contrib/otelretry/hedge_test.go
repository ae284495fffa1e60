package otelretry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"go.opentelemetry.io/otel/trace/noop"
)

// slowFirstServer answers every operation's first request (by the X-Op
// header) only after slow, or when its caller gives up, and every later
// one at once. It counts requests and the ones canceled before their
// answer.
type slowFirstServer struct {
	*httptest.Server
	mu       sync.Mutex
	seen     map[string]int
	requests atomic.Int64
	canceled atomic.Int64
}

func newSlowFirstServer(t *testing.T, slow time.Duration) *slowFirstServer {
	t.Helper()
	s := &slowFirstServer{seen: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.mu.Lock()
		s.seen[r.Header.Get("X-Op")]++
		first := s.seen[r.Header.Get("X-Op")] == 1
		s.mu.Unlock()
		if first {
			select {
			case <-time.After(slow):
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
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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

// hedgeLines returns the data points of the hedge instruments.
func hedgeLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "httpretry.client.hedge") {
			out = append(out, l)
		}
	}
	return out
}

// TestHedgeMetricsFromARealHedgedRun sends operations whose first attempt
// the server holds for seconds through an instrumented Transport hedging
// after 20ms, and checks the hedge instruments, read through a
// ManualReader, against the Outcomes and the server's own counts, the
// operations won by a hedge, and the fixed delay.
func TestHedgeMetricsFromARealHedgedRun(t *testing.T) {
	t.Parallel()
	const ops = 5
	srv := newSlowFirstServer(t, 10*time.Second)
	mp, reader := newReader(t)
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	var hedges, losers atomic.Int64
	tr := &httpretry.Transport{Base: base, Hedging: &httpretry.Hedging{Delay: 20 * time.Millisecond},
		OnDone: func(_ *http.Request, o httpretry.Outcome) {
			hedges.Add(int64(o.Hedges))
			losers.Add(int64(o.LosersCanceled))
		}}
	rt, err := Instrument(tr, Options{MeterProvider: mp, TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	runOps(t, &http.Client{Transport: rt}, srv.URL+"/item", ops)
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
	series := "http.request.method=GET,server.address=127.0.0.1"
	diffLines(t, hedgeLines(collect(t, reader)), []string{
		fmt.Sprintf("httpretry.client.hedges{%s} %d", series, sent),
		fmt.Sprintf("httpretry.client.hedges.won{%s} %d", series, ops),
		fmt.Sprintf("httpretry.client.hedges.losers_canceled{%s} %d", series, canceled),
		fmt.Sprintf("httpretry.client.hedge.delay{httpretry.hedge.key=%s} 0.02", srv.Listener.Addr()),
	})
}

// TestHedgeMetricsRefused sends the operations through a Transport whose
// budget refuses every hedge: each operation refuses one and then waits
// for its first attempt.
func TestHedgeMetricsRefused(t *testing.T) {
	t.Parallel()
	const ops = 3
	srv := newSlowFirstServer(t, 100*time.Millisecond)
	m, metrics := newMetrics(t, Options{})
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	tr := hook(&httpretry.Transport{Base: base, Budget: refuseAll{}, Hedging: &httpretry.Hedging{Delay: 20 * time.Millisecond}}, m)
	m.ObserveHedgeDelay(tr)
	runOps(t, &http.Client{Transport: tr}, srv.URL+"/item", ops)
	base.CloseIdleConnections()
	srv.Close()

	if got := srv.requests.Load(); got != ops {
		t.Errorf("server saw %d requests, want %d: no hedge sent", got, ops)
	}
	diffLines(t, hedgeLines(metrics()), []string{
		fmt.Sprintf("httpretry.client.hedges.refused{http.request.method=GET,server.address=127.0.0.1} %d", ops),
		fmt.Sprintf("httpretry.client.hedge.delay{httpretry.hedge.key=%s} 0.02", srv.Listener.Addr()),
	})
}

// TestHedgeDelayGaugeAdaptive checks that the gauge of an adaptive delay
// is absent until the Transport knows enough latencies, then reports the
// delay the Transport would use, no less than its floor.
func TestHedgeDelayGaugeAdaptive(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	m, metrics := newMetrics(t, Options{})
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	tr := hook(&httpretry.Transport{Base: base, Hedging: &httpretry.Hedging{MinSamples: 20, MinDelay: 5 * time.Millisecond}}, m)
	// Once the delay is known, a busy machine may hold an answer past it
	// and a hedge goes out: the hedge counters then report exactly what
	// the Outcomes do.
	var hedges, won, losers atomic.Int64
	done := tr.OnDone
	tr.OnDone = func(r *http.Request, o httpretry.Outcome) {
		done(r, o)
		hedges.Add(int64(o.Hedges))
		losers.Add(int64(o.LosersCanceled))
		if o.HedgeWon {
			won.Add(1)
		}
	}
	m.ObserveHedgeDelay(tr)
	client := &http.Client{Transport: tr}
	host := srv.Listener.Addr().String()

	runOps(t, client, srv.URL, 5)
	diffLines(t, hedgeLines(metrics()), nil)
	if n := hedges.Load(); n != 0 {
		t.Fatalf("%d hedges sent before the delay was known", n)
	}

	runOps(t, client, srv.URL, 30)
	want, ok := tr.HedgeDelay(host)
	if !ok || want < 5*time.Millisecond {
		t.Fatalf("HedgeDelay(%q) = %v, %v; want at least the 5ms floor, true", host, want, ok)
	}
	series := "http.request.method=GET,server.address=127.0.0.1"
	lines := []string{fmt.Sprintf("httpretry.client.hedge.delay{httpretry.hedge.key=%s} %g", host, want.Seconds())}
	for _, c := range []struct {
		name string
		n    int64
	}{{"hedges", hedges.Load()}, {"hedges.won", won.Load()}, {"hedges.losers_canceled", losers.Load()}} {
		if c.n > 0 {
			lines = append(lines, fmt.Sprintf("httpretry.client.%s{%s} %d", c.name, series, c.n))
		}
	}
	diffLines(t, hedgeLines(metrics()), lines)
}
