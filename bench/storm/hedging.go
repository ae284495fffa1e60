package main

// The hedging scenarios: `go run ./storm -scenarios hedging` measures what
// hedged requests do to the tail and to the server, every policy through
// the same seeded open-loop arrivals against a loopback server:
//
//   - independent: every request answers in 5 ms except 1% that take 1 s,
//     drawn independently for every attempt;
//   - correlated: healthy, then every request 300 ms, then the server near
//     saturation (bounded slots, a queue behind them), where every hedge
//     lengthens every other request's wait;
//   - zero-config: fixed hedge delays swept over the independent server,
//     against the adaptive delay; then the adaptive delay's time to follow
//     the server's latency from 5 ms to 50 ms.
//
// It prints a markdown table per scenario and one line per target on
// stdout, and writes hedging.svg to -out.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/httpretry/httpretry"
)

// hedgeConfig is one invocation's settings of the hedging scenarios.
type hedgeConfig struct {
	duration time.Duration   // of every run
	rate     float64         // arrivals per second
	seed     uint64          // of the arrivals and of the server's draws
	deadline time.Duration   // per operation
	fixed    time.Duration   // the fixed delay of httpretry and hedgedhttp
	sweep    []time.Duration // fixed delays of the zero-config sweep
	slots    int             // correlated: requests served at once near saturation
	busyMean time.Duration   // correlated: mean service time near saturation
	out      string          // output directory; "" writes no files
	log      io.Writer       // progress
}

// hedgingRequested reports whether the command line selects the hedging
// scenarios, which have flags of their own.
func hedgingRequested(args []string) bool {
	for i, a := range args {
		a = strings.TrimLeft(a, "-")
		if a == "scenarios=hedging" || (a == "scenarios" && i+1 < len(args) && args[i+1] == "hedging") {
			return true
		}
	}
	return false
}

// hedgingMain runs the hedging scenarios and returns the exit code.
func hedgingMain(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseHedgeFlags(args, stderr)
	if err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res := runHedging(ctx, cfg)
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "storm: interrupted; no files written")
		return 1
	}
	res.command = strings.Join(append([]string{"go run ./storm"}, args...), " ")
	fmt.Fprint(stdout, hedgeReport(res))
	if cfg.out != "" {
		path := filepath.Join(cfg.out, "hedging.svg")
		if err := os.MkdirAll(cfg.out, 0o755); err != nil {
			fmt.Fprintln(stderr, "storm:", err)
			return 1
		}
		if err := tailChart(path, fmt.Sprintf("Independent slowness: 5 ms, 1%% take 1 s, %.0f ops/s for %v", cfg.rate, cfg.duration), res.independent); err != nil {
			fmt.Fprintln(stderr, "storm:", err)
			return 1
		}
		fmt.Fprintf(stderr, "storm: wrote %s\n", path)
	}
	return 0
}

// parseHedgeFlags reads the hedging scenarios' command line.
func parseHedgeFlags(args []string, errOut io.Writer) (hedgeConfig, error) {
	cfg := hedgeConfig{log: errOut}
	fs := flag.NewFlagSet("storm -scenarios hedging", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.String("scenarios", "hedging", "hedging: these scenarios")
	fs.DurationVar(&cfg.duration, "duration", 20*time.Second, "length of every run")
	short := fs.Bool("short", false, "runs of 4 s, for a quick look (the targets are judged on full runs)")
	fs.Float64Var(&cfg.rate, "rate", 200, "arrival rate, operations per second (Poisson)")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the arrivals and of the server's latencies, the same for every policy")
	fs.DurationVar(&cfg.deadline, "deadline", 3*time.Second, "deadline of each operation")
	fs.DurationVar(&cfg.fixed, "hedge-delay", 10*time.Millisecond, "the fixed hedge delay of httpretry fixed and hedgedhttp")
	sweep := fs.String("sweep", "6ms,8ms,10ms,15ms,20ms,50ms", "fixed hedge delays of the zero-config sweep")
	fs.IntVar(&cfg.slots, "slots", 8, "correlated: requests served at once near saturation")
	fs.DurationVar(&cfg.busyMean, "busy-mean", 36*time.Millisecond, "correlated: mean service time near saturation (slots/busy-mean is the capacity)")
	fs.StringVar(&cfg.out, "out", "../docs/storm", `output directory for hedging.svg ("" for none)`)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if *short {
		cfg.duration = 4 * time.Second
	}
	for f := range strings.SplitSeq(*sweep, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			fmt.Fprintf(errOut, "storm: -sweep: %q is not a positive duration\n", f)
			return cfg, fmt.Errorf("-sweep: %q", f)
		}
		cfg.sweep = append(cfg.sweep, d)
	}
	if cfg.duration < 2*time.Second || cfg.rate <= 0 || cfg.deadline <= 0 || cfg.fixed <= 0 || cfg.slots <= 0 || cfg.busyMean <= 0 {
		fmt.Fprintln(errOut, "storm: -duration must be at least 2s; -rate, -deadline, -hedge-delay, -slots and -busy-mean positive")
		return cfg, fmt.Errorf("bad flags")
	}
	return cfg, nil
}

// hedgeResults are every run of the hedging scenarios.
type hedgeResults struct {
	cfg                     hedgeConfig
	command                 string
	independent, correlated []*hedgeRun
	sweep                   []*hedgeRun // fixed delays over the independent server
	sweepDelays             []time.Duration
	shift                   *hedgeRun // the adaptive delay across the 5 ms -> 50 ms shift
	shiftAt                 time.Duration
}

// runHedging runs every scenario, one run at a time.
func runHedging(ctx context.Context, cfg hedgeConfig) *hedgeResults {
	res := &hedgeResults{cfg: cfg, shiftAt: cfg.duration / 2}
	d := cfg.duration
	pols := hedgePolicies(cfg.fixed)
	indep := independentProfile(5*time.Millisecond, time.Second, 0.01)
	for _, p := range pols {
		res.independent = append(res.independent, runHedge(ctx, cfg, "independent", indep, cfg.slots, p))
	}
	corr := correlatedProfile(5*time.Millisecond, 300*time.Millisecond, d/4, d/2, cfg.busyMean)
	for _, p := range pols {
		res.correlated = append(res.correlated, runHedge(ctx, cfg, "correlated", corr, cfg.slots, p))
	}
	for _, delay := range cfg.sweep {
		if r := findHedge(res.independent, "fixed"); delay == cfg.fixed && r != nil {
			res.sweep = append(res.sweep, r) // the same run: same policy, arrivals and server
		} else {
			res.sweep = append(res.sweep, runHedge(ctx, cfg, "independent", indep, cfg.slots, fixedPolicy(delay)))
		}
		res.sweepDelays = append(res.sweepDelays, delay)
	}
	shift := shiftProfile(res.shiftAt, 5*time.Millisecond, 50*time.Millisecond, time.Second, 0.01)
	adaptive := pols[slices.IndexFunc(pols, func(p hedgePolicy) bool { return p.key == "adaptive" })]
	res.shift = runHedge(ctx, cfg, "shift", shift, cfg.slots, adaptive)
	return res
}

// findHedge returns the run of the policy with the given key, or nil.
func findHedge(runs []*hedgeRun, key string) *hedgeRun {
	for _, r := range runs {
		if r.policy.key == key {
			return r
		}
	}
	return nil
}

// runHedge passes one policy through one scenario: a fresh server and
// client, the seeded arrivals, and the adaptive delay sampled as it goes.
func runHedge(ctx context.Context, cfg hedgeConfig, scenario string, p latencyProfile, slots int, pol hedgePolicy) *hedgeRun {
	fmt.Fprintf(cfg.log, "storm: hedging %s, %s\n", scenario, pol.name)
	arr := arrivals(cfg.seed, cfg.rate, []phase{{name: scenario, dur: cfg.duration}})
	srv := newHedgeServer(p, cfg.seed, len(arr), slots)
	hc := pol.new()
	r := &hedgeRun{scenario: scenario, policy: pol, refused: -1}
	stopSampling := func() {}
	if hc.delay != nil {
		stopSampling = sampleDelays(srv.start, func() time.Duration { return hc.delay(srv.url()) }, &r.delays)
	}
	lat, ok := driveHedged(ctx, hc.c, srv, arr, cfg.deadline)
	stopSampling()
	hc.closeIdle()
	if hc.refused != nil {
		r.refused = hc.refused.Load()
	}
	srv.close() // waits for the handlers, so the counts are final
	r.ops, r.lat = len(lat), lat
	for _, good := range ok {
		if !good {
			r.failed++
		}
	}
	r.hits, r.canceled, r.conns = srv.hits.Load(), srv.canceled.Load(), srv.conns.Load()
	fmt.Fprintf(cfg.log, "storm:   %s\n", tailCells(r.summary()))
	return r
}

// sampleDelays records get() every delayEvery into *out, sample i at
// i×delayEvery after start (a late tick repeats the previous value), until
// the returned function is called.
func sampleDelays(start time.Time, get func() time.Duration, out *[]time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(delayEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			v := get()
			for i := int(time.Since(start) / delayEvery); len(*out) <= i; {
				*out = append(*out, v)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// driveHedged starts one GET per arrival at its time, whatever happened to
// the earlier ones, and returns every started operation's latency and
// whether it succeeded.
func driveHedged(ctx context.Context, c *http.Client, srv *hedgeServer, arr []arrival, deadline time.Duration) ([]time.Duration, []bool) {
	lat := make([]time.Duration, len(arr))
	ok := make([]bool, len(arr))
	var wg sync.WaitGroup
	n := 0
	for i, a := range arr {
		if d := time.Until(srv.start.Add(a.at)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		if ctx.Err() != nil {
			break
		}
		n++
		wg.Go(func() { lat[i], ok[i] = hedgedGet(ctx, c, srv.url(), i, deadline) })
	}
	wg.Wait()
	return lat[:n], ok[:n]
}

// hedgedGet sends operation op and reads its response to the end.
func hedgedGet(ctx context.Context, c *http.Client, url string, op int, deadline time.Duration) (time.Duration, bool) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/item", nil)
	if err != nil {
		panic(err) // a constant URL: cannot happen
	}
	req.Header.Set(opHeader, strconv.Itoa(op))
	resp, err := c.Do(req)
	if err != nil {
		return time.Since(start), false
	}
	_, rerr := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(start), rerr == nil && resp.StatusCode == http.StatusOK
}

// hedgeDelay returns t's current hedge delay for the server at rawURL
// (keyed by host, the default), 0 while it would not hedge.
func hedgeDelay(t *httpretry.Transport, rawURL string) time.Duration {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0
	}
	d, ok := t.HedgeDelay(u.Host)
	if !ok {
		return 0
	}
	return d
}
