// Command observability runs a deliberately flaky service and a client
// that calls it through an httpretry.Transport instrumented with
// promretry, serves the client's metrics on loopback, and prints the key
// series when it is done:
//
//	go run ./examples/observability -duration 10s
//
// While it runs, http://127.0.0.1:<port>/metrics (the address is printed)
// can be scraped by a local Prometheus, and contrib/promretry/dashboard.json
// imported into Grafana.
//
// With -brownout, the service fails 2% of requests, then 30% for the
// middle 40% of the run, then 2% again; -csv and -svg write the
// first-attempt and final success rates over time, measured from the
// metrics every -interval, as a CSV file and a chart:
//
//	go run ./examples/observability -brownout -duration 30s -svg brownout.svg
//
// The service and the client share one registry here for brevity; in a
// real deployment the idempotency events come from the server's process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/contrib/promretry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// config holds the command's flags.
type config struct {
	duration time.Duration
	rps      int
	interval time.Duration
	brownout bool
	listen   string // the /metrics address; loopback only
	csvPath  string
	svgPath  string
}

func main() {
	var cfg config
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long to send requests")
	flag.IntVar(&cfg.rps, "rps", 200, "operations per second")
	flag.DurationVar(&cfg.interval, "interval", time.Second, "sampling interval of the time series")
	flag.BoolVar(&cfg.brownout, "brownout", false, "run a healthy, a brownout and a recovery phase")
	flag.StringVar(&cfg.listen, "listen", "127.0.0.1:0", "loopback address to serve /metrics on")
	flag.StringVar(&cfg.csvPath, "csv", "", "write the time series to this CSV file")
	flag.StringVar(&cfg.svgPath, "svg", "", "write a chart of the time series to this SVG file")
	flag.Parse()
	if err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "observability:", err)
		os.Exit(1)
	}
}

// phasesFor returns the service's failure schedule.
func phasesFor(cfg config) []phase {
	if !cfg.brownout {
		return []phase{{name: "flaky", dur: cfg.duration, failRate: 0.10}}
	}
	healthy := cfg.duration * 3 / 10
	return []phase{
		{name: "healthy", dur: healthy, failRate: 0.02},
		{name: "brownout", dur: cfg.duration - 2*healthy, failRate: 0.30},
		{name: "recovery", dur: healthy, failRate: 0.02},
	}
}

// routeOf names the demo's routes by their templates, never by the raw
// path.
func routeOf(r *http.Request) string {
	if strings.HasPrefix(r.URL.Path, "/books/") {
		return "/books/{id}"
	}
	return r.URL.Path
}

// run runs the service, the client and the metrics endpoint for
// cfg.duration, then prints the key series to out and writes the files
// asked for.
func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.duration <= 0 || cfg.rps <= 0 || cfg.interval <= 0 {
		return errors.New("-duration, -rps and -interval must be positive")
	}
	reg := prometheus.NewRegistry()
	budget := httpretry.NewTokenBucket(20, 0.1) // the Transport's default, shared so that it can be reported
	metrics, err := promretry.New(reg, promretry.Options{Route: routeOf, Budget: budget, MaxAttempts: 3})
	if err != nil {
		return err
	}

	phases := phasesFor(cfg)
	start := time.Now()
	flaky := newFlakyServer(phases, start, 400*time.Millisecond, metrics.IdempotencyEvent)
	svc := httptest.NewServer(flaky.handler())
	defer svc.Close()

	metricsURL, stopMetrics, err := serveMetrics(cfg.listen, reg)
	if err != nil {
		return err
	}
	defer stopMetrics()

	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = 64
	defer base.CloseIdleConnections()
	t := &httpretry.Transport{
		Base: base, Timeout: 2 * time.Second, AttemptTimeout: 250 * time.Millisecond,
		BaseDelay: 25 * time.Millisecond, MaxDelay: 250 * time.Millisecond,
		Budget: budget, NewIdempotencyKey: httpretry.RandomKey,
	}
	client := &http.Client{Transport: metrics.Instrumented(t)}

	fmt.Fprintf(out, "service at %s, metrics at %s\n", svc.URL, metricsURL)
	for _, p := range phases {
		fmt.Fprintf(out, "phase %-9s %5s, %2.0f%% of requests fail\n", p.name, p.dur, p.failRate*100)
	}
	samples, sent, err := drive(ctx, cfg, reg, phases, start, func(ctx context.Context) int {
		return load(ctx, client, svc.URL, cfg.rps)
	})
	if err != nil {
		return err
	}

	// Read the result back the way Prometheus would: over HTTP.
	fams, err := scrape(metricsURL)
	if err != nil {
		return err
	}
	printSummary(out, readTotals(fams), sent)
	return writeFiles(cfg, samples, phases)
}

// drive runs send until cfg.duration has passed, sampling the registry
// every cfg.interval, and returns the samples (the last one taken once
// every operation has ended) and the number of operations sent.
func drive(ctx context.Context, cfg config, reg *prometheus.Registry, phases []phase, start time.Time,
	send func(context.Context) int) ([]sample, int, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	sent := make(chan int, 1)
	go func() { sent <- send(ctx) }()

	var samples []sample
	var prev, beforeLast totals
	tick := time.NewTicker(cfg.interval)
	defer tick.Stop()
	for {
		var n int
		done := false
		select {
		case <-tick.C:
		case n = <-sent:
			done = true
		}
		cur, err := gather(reg)
		if err != nil {
			return nil, 0, err
		}
		at := time.Since(start)
		if done && len(samples) > 0 && at-samples[len(samples)-1].at < cfg.interval/2 {
			// The operations still in flight at the end: too few for a
			// sample of their own, they join the last one.
			samples = samples[:len(samples)-1]
			prev = beforeLast
		}
		beforeLast = prev
		samples = append(samples, between(prev, cur, at, phaseAt(phases, at)))
		prev = cur
		if done {
			return samples, n, nil
		}
	}
}

// phaseAt names the phase at a time since the start.
func phaseAt(phases []phase, at time.Duration) string {
	for _, p := range phases {
		if at < p.dur {
			return p.name
		}
		at -= p.dur
	}
	return phases[len(phases)-1].name
}

func gather(reg *prometheus.Registry) (totals, error) {
	list, err := reg.Gather()
	if err != nil {
		return totals{}, err
	}
	fams := make(map[string]*dto.MetricFamily, len(list))
	for _, f := range list {
		fams[f.GetName()] = f
	}
	return readTotals(fams), nil
}

// serveMetrics serves reg on /metrics at addr, which must be a loopback
// address, and returns the URL and a function that stops the server.
func serveMetrics(addr string, reg *prometheus.Registry) (string, func(), error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("-listen: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", nil, fmt.Errorf("-listen: %s is not a loopback address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}
	return "http://" + ln.Addr().String() + "/metrics", stop, nil
}

// scrape fetches and parses the text exposition at url.
func scrape(url string) (map[string]*dto.MetricFamily, error) {
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// printSummary prints the key series.
func printSummary(w io.Writer, t totals, sent int) {
	pct := func(a, b float64) string {
		if b == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.1f%%", 100*a/b)
	}
	fmt.Fprintf(w, "\noperations sent:          %d\n", sent)
	fmt.Fprintf(w, "operations recorded:      %.0f\n", t.operations)
	fmt.Fprintf(w, "first-attempt success:    %s (%.0f of %.0f initial attempts)\n", pct(t.initialSucceeded, t.initial), t.initialSucceeded, t.initial)
	fmt.Fprintf(w, "final success:            %s (%.0f of %.0f operations)\n", pct(t.succeeded, t.operations), t.succeeded, t.operations)
	retriesPerOp := 0.0
	if t.operations > 0 {
		retriesPerOp = t.retries / t.operations
	}
	fmt.Fprintf(w, "retries per operation:    %.3f (%.0f retries)\n", retriesPerOp, t.retries)
	fmt.Fprintf(w, "retry success:            %s\n", pct(t.retriesSucceeded, t.retries))
	fmt.Fprintf(w, "attempt timeouts:         %.0f\n", t.timeouts)
	fmt.Fprintf(w, "budget tokens left:       %.1f\n", t.budgetTokens)
	fmt.Fprintf(w, "stop reasons:             %s\n", joinCounts(t.reasons))
	fmt.Fprintf(w, "outcomes:                 %s\n", joinCounts(t.outcomes))
	fmt.Fprintf(w, "attempts by result:       %s\n", joinCounts(t.results))
	fmt.Fprintf(w, "waits by cause:           %s\n", joinCounts(t.waits))
	fmt.Fprintf(w, "attempts by connection:   %s\n", joinCounts(t.conns))
	fmt.Fprintf(w, "idempotency events:       %s\n", joinCounts(t.idemKind))
}

// joinCounts renders counts as "a=1 b=2", largest first.
func joinCounts(m map[string]float64) string {
	type kv struct {
		k string
		v float64
	}
	var kvs []kv
	for k, v := range m {
		kvs = append(kvs, kv{k, v})
	}
	// A handful of entries: insertion sort keeps it short.
	for i := 1; i < len(kvs); i++ {
		for j := i; j > 0 && (kvs[j].v > kvs[j-1].v || kvs[j].v == kvs[j-1].v && kvs[j].k < kvs[j-1].k); j-- {
			kvs[j], kvs[j-1] = kvs[j-1], kvs[j]
		}
	}
	parts := make([]string, len(kvs))
	for i, e := range kvs {
		parts[i] = fmt.Sprintf("%s=%.0f", e.k, e.v)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// writeFiles writes the CSV and the chart, if asked for.
func writeFiles(cfg config, samples []sample, phases []phase) error {
	write := func(path string, f func(io.Writer) error) error {
		if path == "" {
			return nil
		}
		file, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := f(file); err != nil {
			file.Close()
			return err
		}
		return file.Close()
	}
	if err := write(cfg.csvPath, func(w io.Writer) error { return writeCSV(w, samples) }); err != nil {
		return err
	}
	title := "First-attempt and final success through a brownout"
	subtitle := fmt.Sprintf("%d operations/s, MaxAttempts 3, retry budget of 20 tokens + 0.1 per operation; measured from promretry's metrics every %s",
		cfg.rps, cfg.interval)
	return write(cfg.svgPath, func(w io.Writer) error { return writeChart(w, title, subtitle, samples, phases) })
}
