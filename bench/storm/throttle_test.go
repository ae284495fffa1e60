package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestSettledFrom(t *testing.T) {
	t.Parallel()
	ones := func(n int) []int64 {
		v := make([]int64, n)
		for i := range v {
			v[i] = 10
		}
		return v
	}
	for _, tc := range []struct {
		name   string
		good   []int64
		from   int
		w      int
		want   float64
		wantI  int
		wantOK bool
	}{
		{"all good from the start", ones(6), 2, 2, 0.95, 2, true},
		{"bad then good", []int64{10, 0, 0, 10, 10, 10}, 1, 2, 0.95, 3, true},
		{"a relapse resets", []int64{10, 10, 0, 10, 10, 10}, 0, 2, 0.95, 3, true},
		{"bad at the end: never settled", []int64{10, 10, 10, 10, 10, 0}, 0, 2, 0.95, 0, false},
		{"just at the bar", []int64{10, 10, 9, 10}, 0, 1, 0.9, 0, true},
		{"just below the bar", []int64{10, 10, 8, 10}, 0, 1, 0.9, 3, true},
		{"window longer than what is left", ones(3), 2, 2, 0.95, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, ok := settledFrom(tc.good, ones(len(tc.good)), tc.from, tc.w, tc.want)
			if i != tc.wantI || ok != tc.wantOK {
				t.Errorf("settledFrom = %d, %v; want %d, %v", i, ok, tc.wantI, tc.wantOK)
			}
		})
	}
}

func TestRecoveredBy(t *testing.T) {
	t.Parallel()
	ref := []int64{20, 20, 20, 20, 20, 20, 20, 20}
	for _, tc := range []struct {
		name   string
		good   []int64
		wantI  int
		wantOK bool
	}{
		{"at once", []int64{20, 20, 20, 20, 20, 20, 20, 20}, 2, true},
		{"a bucket later", []int64{0, 0, 0, 20, 20, 20, 20, 20}, 3, true},
		{"95% of the window is enough", []int64{0, 0, 0, 18, 20, 20, 20, 20}, 3, true},
		{"94% is not", []int64{0, 0, 0, 17, 20, 20, 20, 20}, 4, true},
		{"never", []int64{0, 0, 0, 0, 0, 0, 0, 19}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i, ok := recoveredBy(tc.good, ref, 2, 2, 0.95)
			if i != tc.wantI || ok != tc.wantOK {
				t.Errorf("recoveredBy = %d, %v; want %d, %v", i, ok, tc.wantI, tc.wantOK)
			}
		})
	}
}

func TestNextEndCatchesUp(t *testing.T) {
	t.Parallel()
	s := 10 * time.Millisecond
	t0 := time.Unix(100, 0)
	for _, tc := range []struct {
		name      string
		prev, now time.Time
		want      time.Time
	}{
		{"first request", time.Time{}, t0, t0.Add(s)},
		{"idle worker starts now", t0, t0.Add(time.Second), t0.Add(time.Second + s)},
		{"overslept by 3ms: keeps the schedule", t0, t0.Add(3 * time.Millisecond), t0.Add(s)},
		{"on time", t0, t0, t0.Add(s)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextEnd(tc.prev, tc.now, s); !got.Equal(tc.want) {
				t.Errorf("nextEnd = %v, want %v", got.Sub(t0), tc.want.Sub(t0))
			}
		})
	}
}

func TestCapacityFractions(t *testing.T) {
	t.Parallel()
	if got := activeWorkers(10, 0.2); got != 2 {
		t.Errorf("activeWorkers(10, 0.2) = %d, want 2", got)
	}
	if got := activeWorkers(10, 0.01); got != 1 {
		t.Errorf("activeWorkers(10, 0.01) = %d, want 1", got)
	}
	c := defaultTConfig(config{rate: 200, capacity: 20, service: 20 * time.Millisecond, deadline: time.Second})
	if b := c.brownoutSchedule()[1]; b.mode != paced || b.rate != 100 {
		t.Errorf("brownout %v at %v/s, want paced at 100/s, half of 200/s", b.mode, b.rate)
	}
	m := defaultMetaConfig()
	if u := m.rate / m.capacity(); u < 0.9 || u > 0.95 {
		t.Errorf("metastable utilisation %.3f, want in [0.9, 0.95]: above 1/1.1 so that a 10%% retry budget overloads it", u)
	}
}

// TestPacerServesItsRate: a token bucket of 100/s starts with its burst
// of 10, then serves one request per 10ms whatever is offered.
func TestPacerServesItsRate(t *testing.T) {
	t.Parallel()
	var b pacer
	t0 := time.Unix(1000, 0)
	served := 0
	for i := range 20 { // a burst of 20 at once
		if b.take(100, t0) {
			served++
		} else if i < 10 {
			t.Fatalf("request %d of the burst refused; want the first 10 served", i+1)
		}
	}
	if served != 10 {
		t.Errorf("burst: %d served, want 10", served)
	}
	// 200 offered a second for 1s: 100 served.
	served = 0
	for i := 1; i <= 200; i++ {
		if b.take(100, t0.Add(time.Duration(i)*5*time.Millisecond)) {
			served++
		}
	}
	if served != 100 {
		t.Errorf("200 offered over 1s: %d served, want 100", served)
	}
}

func TestQuotaFields(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 300*int64(time.Millisecond))
	reset := time.Unix(1001, 0)
	got := quotaFields(ietfHeaders, 100, time.Second, 7, reset, now)
	want := [][2]string{{"RateLimit-Policy", `"default";q=100;w=1`}, {"RateLimit", `"default";r=7;t=1`}}
	if !equalFields(got, want) {
		t.Errorf("IETF fields %q, want %q", got, want)
	}
	got = quotaFields(xHeaders, 100, time.Second, 0, reset, now)
	want = [][2]string{{"X-RateLimit-Limit", "100"}, {"X-RateLimit-Remaining", "0"}, {"X-RateLimit-Reset", "1001"}}
	if !equalFields(got, want) {
		t.Errorf("X- fields %q, want %q", got, want)
	}
	for d, want := range map[time.Duration]int64{0: 0, 1: 1, time.Second: 1, time.Second + 1: 2} {
		if got := ceilSeconds(d); got != want {
			t.Errorf("ceilSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

func equalFields(a, b [][2]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestQuotaServerCountsByWindow(t *testing.T) {
	t.Parallel()
	s := &quotaServer{limit: 3, window: time.Second, rejected: map[int64]int{}, accepted: map[int64]int{}}
	t0 := time.Unix(50, 0)
	var remaining []int
	for i := range 5 {
		ok, r, reset := s.take(t0.Add(time.Duration(i) * time.Millisecond))
		if ok != (i < 3) {
			t.Errorf("request %d: ok %v", i, ok)
		}
		if !reset.Equal(time.Unix(51, 0)) {
			t.Errorf("reset %v, want 51s", reset)
		}
		remaining = append(remaining, r)
	}
	if got := remaining; got[0] != 2 || got[2] != 0 || got[4] != 0 {
		t.Errorf("remaining %v, want 2 1 0 0 0", got)
	}
	if ok, r, _ := s.take(time.Unix(51, 0)); !ok || r != 2 {
		t.Errorf("next window: ok %v remaining %d, want a fresh quota", ok, r)
	}
	rej, acc := completeWindows(s.rejected, s.accepted, time.Unix(49, 500), time.Unix(52, 0), time.Second)
	if len(rej) != 2 || rej[0] != 2 || acc[0] != 3 || rej[1] != 0 || acc[1] != 1 {
		t.Errorf("complete windows: 429s %v, 200s %v; want [2 0], [3 1]", rej, acc)
	}
}

func TestFailsFirstOneInEvery(t *testing.T) {
	t.Parallel()
	n := 0
	for op := range 200 {
		if failsFirst(op, 20) {
			n++
		}
	}
	if n != 10 {
		t.Errorf("%d of 200 operations fail first, want 10", n)
	}
	if failsFirst(10, 0) {
		t.Error("every 0 must fail none")
	}
}

// TestQueueServerKeepsAbandonedWork sends a request that gives up before
// its turn and one behind it: the worker serves the abandoned one first,
// and the second waits for it.
func TestQueueServerKeepsAbandonedWork(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	service := 200 * time.Millisecond
	srv := newQueueServer([]phase{{name: "healthy", dur: time.Minute}}, 1, service, 10, 2*time.Minute)
	c := &http.Client{}
	get := func(ctx context.Context) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.url(), nil)
		return c.Do(req)
	}
	// The first request occupies the worker; the second gives up while
	// queued behind it; the third waits behind both.
	first := make(chan error, 1)
	go func() {
		resp, err := get(context.Background())
		if err == nil {
			resp.Body.Close()
		}
		first <- err
	}()
	for srv.hitsAt[0].Load()+srv.hitsAt[1].Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, err := get(ctx)
	cancel()
	if err == nil {
		t.Fatal("the abandoned request succeeded")
	}
	start := time.Now()
	resp, err := get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	waited := time.Since(start)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	c.CloseIdleConnections()
	srv.close()
	wasted := addUp(timeline(srv.wastedAt))
	if wasted != 1 {
		t.Errorf("%d requests served for nobody, want 1", wasted)
	}
	// Behind the abandoned one: at least its full service time.
	if waited < service {
		t.Errorf("the third request waited %v, want at least the abandoned request's %v", waited, service)
	}
	checkGoroutines(t, goroutines)
}

// fakeTRun builds a run of the outage schedule with one 100ms-spaced
// operation per bucket, ok where ok says, and the given hits.
func fakeTRun(key string, phases []phase, ok func(i int) bool, local func(i int) bool, hits []int64) *trun {
	r := &trun{run: &run{policy: throttlePolicy(key, 0), processes: 1, phases: phases, hitsByPhase: hits}}
	n := int(total(phases) / bucket)
	var at time.Duration
	p, end := 0, phases[0].dur
	for i := range n {
		for at >= end {
			p++
			end += phases[p].dur
		}
		r.ops = append(r.ops, opResult{phase: p, start: at, latency: 50 * time.Microsecond, ok: ok(i), err: local(i)})
		r.local = append(r.local, local(i))
		at += bucket
	}
	return r
}

func TestThrottleLines(t *testing.T) {
	t.Parallel()
	phases := []phase{{name: "healthy", dur: time.Second}, {name: "outage", dur: time.Second, mode: outage}, {name: "recovery", dur: 3 * time.Second}}
	never := func(int) bool { return false }
	single := fakeTRun(keySingle, phases, func(i int) bool { return i < 10 || i >= 20 }, never, []int64{10, 10, 30})
	// Throttled: refuses 8 of the 10 outage operations, recovers 1.2 s
	// after the outage's end.
	th := fakeTRun(keyThrottle, phases, func(i int) bool { return i < 10 || i >= 32 },
		func(i int) bool { return i >= 10 && i < 18 }, []int64{10, 2, 30})
	budget := fakeTRun(keyBudget, phases, func(i int) bool { return i < 10 || i >= 20 }, never, []int64{10, 11, 30})
	meta := []*metaRun{
		{policy: throttlePolicy(keyBudget, 0)},
		{policy: throttlePolicy(keyThrottle, 0), recovered: 6500 * time.Millisecond, ok: true},
	}
	lines, ts := throttleLines(&tresults{outage: []*trun{single, budget, th}, meta: meta})
	want := []string{
		"throttle: outage load 0.20x, recovery 1.2s, refused locally in 0.1 ms (p99 of 8), healthy goodput +0.00% (budget only: load 1.10x, recovery 0.0s)",
		"metastable: recovered in 6.5s (budget only: not recovered)",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	met := map[string]bool{}
	for _, x := range ts {
		met[x.name] = x.met
	}
	for name, want := range map[string]bool{
		"outage: server load during the outage ≤ 0.25× offered":                     true,
		"outage: ≥ 95% of single attempt's goodput within 2 s of healing":           true,
		"metastable: the throttle returns to full goodput within 10 s, no operator": true,
	} {
		if got, ok := met[name]; !ok || got != want {
			t.Errorf("target %q: met %v (present %v), want %v", name, got, ok, want)
		}
	}
}

// TestThrottleScenariosShort runs every throttle scenario in a small
// configuration on loopback and checks the printed lines and the files.
func TestThrottleScenariosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("about 30 s of real time")
	}
	goroutines := runtime.NumGoroutine()
	c := defaultTConfig(config{rate: 100, capacity: 20, service: 5 * time.Millisecond, deadline: time.Second, seed: 1, log: io.Discard})
	c.healthy, c.outage, c.brownout, c.fleet, c.fleetRate = 300*time.Millisecond, 500*time.Millisecond, 300*time.Millisecond, 5, 60
	c.meta.healthy, c.meta.trigger, c.meta.after = 300*time.Millisecond, 300*time.Millisecond, 1200*time.Millisecond
	c.meta.attemptTimeout, c.meta.deadline = 200*time.Millisecond, 600*time.Millisecond
	c.quota.dur = 2100 * time.Millisecond
	c.lowRateDur, c.shedOver = time.Second, 500*time.Millisecond
	c.scenarios = throttleScenarios
	res := runThrottle(context.Background(), c)
	res.command = "go run ./storm -test"
	checkGoroutines(t, goroutines)
	lines, _ := throttleLines(res)
	prefixes := []string{"throttle: outage load ", "brownout: goodput ", "metastable: recovered in ", "two-hosts: healthy host goodput ", "quota: 429s per window at most ", "fleet: P=5 outage load ", "throttle-fleet: P=",
		"throttle-proxy: outage behind a proxy, load ", "throttle-lowrate: healthy at 1.5/s with 2% 503s, refused ", "shed: P=100 overload, amplification "}
	if len(lines) != len(prefixes) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(prefixes), strings.Join(lines, "\n"))
	}
	for i, p := range prefixes {
		if !strings.HasPrefix(lines[i], p) {
			t.Errorf("line %d %q, want it to start %q", i, lines[i], p)
		}
	}
	// Without pacing, a client offered 3× its quota gets 429s in every
	// window.
	for _, q := range res.quota {
		if q.policy.key == keyBudget && worst(q.rejected) < 10 {
			t.Errorf("%s, %s headers: at most %d 429s per window, want many", q.policy.name, q.headers, worst(q.rejected))
		}
	}
	// The outage sent every single attempt to the server and got 503s.
	if s := findT(res.outage, keySingle); s == nil || s.phaseStats()[1].amp != 1 {
		t.Errorf("single attempt's outage load is not 1")
	}
	// The fleet ran at fleetRate a process, its own single attempt the
	// reference, and the throttle again over the outage's arrivals.
	if s := findT(res.fleet, keySingle); s == nil || len(s.ops) < int(0.8*c.fleetRate*float64(c.fleet)*total(c.outageSchedule()).Seconds()) {
		t.Errorf("the fleet's single attempt is missing or ran short")
	}
	if len(res.fleetLow) != 1 || len(res.fleetLow[0].ops) > len(res.fleet[0].ops)/2 {
		t.Errorf("the fleet over the outage's arrivals: %d runs", len(res.fleetLow))
	}
	if l := lines[5]; !strings.Contains(l, ", 60 operations a second each") || !strings.Contains(l, "at 20 a second each: load ") {
		t.Errorf("fleet line %q: no per-process rates", l)
	}
	dir := t.TempDir()
	if err := writeThrottle(res, dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "throttle.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range append(lines, "Generated by `go run ./storm -test`", "## Metastable overload", "metastable.svg", "each calling 60 times a second (300 a second in all", "dealt in turn to the same 5 processes, 20 a second each") {
		if !strings.Contains(string(md), want) {
			t.Errorf("throttle.md lacks %q", want)
		}
	}
	for _, f := range []string{"metastable.svg", "throttle-outage.svg"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() < 1000 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
