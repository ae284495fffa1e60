package main

import (
	"context"
	"encoding/csv"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/httpretry/httpretry"
)

// tiny is a configuration small enough for tests: 150ms phases at 100
// operations per second.
func tiny() config {
	return config{
		phase:     150 * time.Millisecond,
		rate:      100,
		capacity:  20,
		service:   5 * time.Millisecond,
		deadline:  time.Second,
		brownout:  0.2,
		window:    5 * time.Millisecond,
		capWindow: 10,
		seed:      1,
		fleet:     []int{1, 3},
		clients:   []int{4},
		scenarios: allScenarios,
		policies:  []policy{policyByKey("single"), policyByKey("httpretry")},
		log:       io.Discard,
	}
}

// counting counts the attempts that reach it.
type counting struct {
	base http.RoundTripper
	n    *atomic.Int64
}

func (c *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(req)
}

func sum(v []int64) int64 {
	var n int64
	for _, x := range v {
		n += x
	}
	return n
}

// TestAccounting passes every policy, and two that count their attempts on
// the client side, through one phase of outage, and checks the server's
// counts against each other, against the client's, and against what each
// policy must send. It also checks that nothing is left running.
func TestAccounting(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	cfg := tiny()
	// A deadline long enough that a starved test machine does not end
	// operations before their attempts: the counts below must be exact.
	// go-retryablehttp's default waits, 1s then 2s, make exactly two
	// attempts inside it.
	cfg.deadline = 2500 * time.Millisecond
	phases := []phase{{name: "outage", dur: 300 * time.Millisecond, mode: outage}}
	arr := arrivals(cfg.seed, cfg.rate, phases)
	if len(arr) < 20 {
		t.Fatalf("only %d arrivals; the budget check needs more than 20", len(arr))
	}

	// countingPolicy returns a policy whose attempts are counted in sent
	// before they reach the pooled transport.
	countingPolicy := func(key string, sent *atomic.Int64, wrap func(http.RoundTripper) http.RoundTripper) policy {
		return policy{key: key, name: key, new: func() (*http.Client, func()) {
			base := cleanhttp.DefaultPooledTransport()
			return &http.Client{Transport: wrap(&counting{base: base, n: sent})}, base.CloseIdleConnections
		}}
	}
	var naiveSent, retrySent atomic.Int64
	pols := append(policies(),
		countingPolicy("counted-naive", &naiveSent, func(b http.RoundTripper) http.RoundTripper { return &naive{base: b, attempts: 3} }),
		countingPolicy("counted-httpretry", &retrySent, func(b http.RoundTripper) http.RoundTripper {
			return &httpretry.Transport{Base: b, Budget: httpretry.NewTokenBucket(5, 0.1)}
		}),
	)
	sent := map[string]*atomic.Int64{"counted-naive": &naiveSent, "counted-httpretry": &retrySent}

	// The policies run side by side, each on its own server (parallel
	// subtests would run only GOMAXPROCS at a time).
	runs := make([]*run, len(pols))
	var wg sync.WaitGroup
	for i, p := range pols {
		wg.Go(func() { runs[i] = runOne(context.Background(), cfg, "outage", phases, arr, p, 1) })
	}
	wg.Wait()
	checkGoroutines(t, goroutines)

	for i, p := range pols {
		t.Run(p.key, func(t *testing.T) {
			r := runs[i]
			ops := int64(len(r.ops))
			if ops != int64(len(arr)) {
				t.Fatalf("%d operations, want %d", ops, len(arr))
			}
			if got := sum(r.hitsByPhase); got != r.hits {
				t.Errorf("hits by phase add up to %d, want the server's %d", got, r.hits)
			}
			if got := sum(r.hitsAt); got != r.hits {
				t.Errorf("hits in the timeline add up to %d, want %d", got, r.hits)
			}
			if r.down != r.hits {
				t.Errorf("%d outage 503s, want one per hit (%d)", r.down, r.hits)
			}
			st := r.phaseStats()[0]
			if st.ok != 0 || st.failed != int(ops) {
				t.Errorf("%d succeeded and %d failed in an outage, want 0 and %d", st.ok, st.failed, ops)
			}
			if float64(st.hits)/float64(st.ops) != st.amp {
				t.Errorf("amp = %v, want hits/ops = %d/%d", st.amp, st.hits, st.ops)
			}
			var lo, hi int64 // bounds on hits
			switch p.key {
			case "single":
				lo, hi = ops, ops
			case "naive", "retryablehttp-tuned", "failsafe", "httpretry-unlimited", "counted-naive":
				// Three attempts each, all inside the deadline.
				lo, hi = 3*ops, 3*ops
			case "retryablehttp":
				lo, hi = 2*ops, 2*ops
			case "httpretry":
				// The budget: 20 tokens, 0.1 per operation.
				lo, hi = ops+20, ops+20+(ops+9)/10
			case "counted-httpretry":
				lo, hi = ops+5, ops+5+(ops+9)/10
			}
			// An operation that ran out of time before its attempts did
			// means a machine too busy to run the load on time: then
			// only the upper bounds hold. (go-retryablehttp's defaults
			// run out of time by design; only a late end betrays them.)
			starved := false
			for _, o := range r.ops {
				late := o.err && o.latency >= cfg.deadline
				if p.key == "retryablehttp" {
					late = o.latency >= cfg.deadline+250*time.Millisecond
				}
				starved = starved || late
			}
			if starved {
				t.Logf("operations reached their %v deadline: the machine is too busy for exact counts; checking upper bounds only", cfg.deadline)
				lo = min(lo, ops)
			}
			if r.hits < lo || r.hits > hi {
				t.Errorf("%d hits for %d operations, want %d to %d", r.hits, ops, lo, hi)
			}
			if c := sent[p.key]; c != nil && (c.Load() < r.hits || !starved && c.Load() != r.hits) {
				t.Errorf("the client sent %d attempts, the server counted %d", c.Load(), r.hits)
			}
		})
	}
}

// checkGoroutines waits for the goroutine count to fall back to n.
func checkGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines left running, want %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTinyRunWritesOutputs runs every scenario in a tiny configuration and
// checks the files it writes.
func TestTinyRunWritesOutputs(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	cfg := tiny()
	res := runAll(context.Background(), cfg)
	res.command = "go run ./storm -test"
	if res.err != nil {
		t.Fatal(res.err)
	}
	if len(res.outage) != 2 || len(res.brownout) != 2 || len(res.fleet) != 4 || len(res.contention) != 3 {
		t.Fatalf("runs: %d outage, %d brownout, %d fleet, %d contention; want 2, 2, 4, 3",
			len(res.outage), len(res.brownout), len(res.fleet), len(res.contention))
	}
	for _, c := range res.contention {
		if c.succeeded != c.clients || c.calls < int64(c.clients) {
			t.Errorf("contention %s: %d of %d succeeded in %d calls", c.jitter, c.succeeded, c.clients, c.calls)
		}
	}
	for i, want := range []struct {
		processes int
		policy    string
	}{{1, "httpretry"}, {1, redisPolicyKey}, {3, "httpretry"}, {3, redisPolicyKey}} {
		if r := res.fleet[i]; r.processes != want.processes || r.policy.key != want.policy || (r.redis != nil) != (want.policy == redisPolicyKey) {
			t.Errorf("fleet run %d: %d processes of %s; want %d of %s", i, r.processes, r.policy.key, want.processes, want.policy)
		}
	}
	if res.cluster == nil || res.cluster.processes != 3 || res.cluster.redisOn != "cluster" || res.cluster.redis == nil {
		t.Errorf("no fleet run of 3 processes on the Redis Cluster: %+v", res.cluster)
	}
	dir := t.TempDir()
	if err := writeOutputs(res, dir); err != nil {
		t.Fatal(err)
	}
	checkGoroutines(t, goroutines)

	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Targets", "## Outage", "## Brownout", "## Contention", "## Fleet", "go run ./storm -test", "| httpretry defaults |",
		"| 3 | one in Redis |", "per failing operation", "| 3 | Cluster, 3 masters |",
		"fleet: httpretry + redisretry on one server amplification ≤ 1.15× at P = 3",
		"fleet: httpretry + redisretry on a Redis Cluster ≤ 0.1 Redis commands per failing operation at P = 3"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q", want)
		}
	}
	for _, svg := range []string{"outage.svg", "brownout.svg", "fleet.svg", "contention.svg", "contention-time.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, svg))
		if err != nil {
			t.Error(err)
			continue
		}
		if !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "httpretry") && svg != "contention.svg" && svg != "contention-time.svg" && svg != "fleet.svg" {
			t.Errorf("%s does not look like the chart (%d bytes)", svg, len(b))
		}
	}

	f, err := os.Open(filepath.Join(dir, "timeline.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// 450ms of phases and 1s of deadline: 15 buckets for each of 8 runs.
	if got, want := len(rows), 1+8*15; got != want {
		t.Errorf("timeline.csv has %d rows, want %d", got, want)
	}
	if got := strings.Join(rows[0], ","); got != "scenario,policy,processes,t_s,phase,hits,successes,failures,conns" {
		t.Errorf("timeline.csv header = %q", got)
	}
	// The CSV's hits for a run are the server's.
	var hits int64
	for _, row := range rows[1:] {
		if row[0] == "outage" && row[1] == "single" {
			n, _ := parseInt(row[5])
			hits += n
		}
	}
	if want := res.outage[0].hits; hits != want {
		t.Errorf("timeline.csv: %d hits for outage/single, want %d", hits, want)
	}
}

func parseInt(s string) (int64, error) {
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, os.ErrInvalid
		}
		n = n*10 + int64(c-'0')
	}
	return n, nil
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.phase != 4*time.Second || cfg.rate != 200 || cfg.capacity != 20 || cfg.service != 20*time.Millisecond || cfg.deadline != time.Second ||
		len(cfg.policies) != 7 || len(cfg.scenarios) != 4 || len(cfg.fleet) != 3 || cfg.fleet[2] != 100 {
		t.Errorf("defaults = %+v", cfg)
	}
	for _, args := range [][]string{
		{"-phase", "10ms"},
		{"-policies", "single,nope"},
		{"-scenarios", "meltdown"},
		{"-fleet", "1,0"},
		{"-brownout", "1.5"},
		{"-rate", "0"},
		{"-cap", "0"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded, want an error", args)
		}
	}
}
