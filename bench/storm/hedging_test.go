package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// slowFirst returns the operations of a run of n whose first attempt the
// server makes slow, and of those the ones whose second attempt it
// answers fast: a hedge rescues exactly these.
func slowFirst(seed uint64, n int) (slow, rescued []int) {
	s := &hedgeServer{seed: seed}
	for op := range n {
		if s.draw(op, 0) < 0.01 {
			slow = append(slow, op)
			if s.draw(op, 1) >= 0.01 {
				rescued = append(rescued, op)
			}
		}
	}
	return slow, rescued
}

// TestHedgingHarnessRealRun passes a single attempt, hedgedhttp (one
// hedge after a fixed 10 ms) and httpretry's adaptive delay through two
// seconds of the independent scenario on a real loopback server, and
// checks the counts the targets rest on: every operation started once,
// the server's requests and cancellations, the slow operations that a
// hedge rescues, the adaptive delay sampled through the run.
func TestHedgingHarnessRealRun(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: about 9 s")
	}
	cfg := hedgeConfig{duration: 2 * time.Second, rate: 200, seed: 3, deadline: 3 * time.Second, fixed: 10 * time.Millisecond, slots: 8, log: io.Discard}
	arr := arrivals(cfg.seed, cfg.rate, []phase{{dur: cfg.duration}})
	slow, rescued := slowFirst(cfg.seed, len(arr))
	if len(rescued) == 0 {
		t.Fatalf("seed %d makes no first attempt of %d slow: pick another", cfg.seed, len(arr))
	}
	indep := independentProfile(5*time.Millisecond, time.Second, 0.01)
	pols := hedgePolicies(cfg.fixed)
	pick := func(key string) hedgePolicy {
		for _, p := range pols {
			if p.key == key {
				return p
			}
		}
		t.Fatalf("no policy %q", key)
		return hedgePolicy{}
	}

	single := runHedge(context.Background(), cfg, "independent", indep, cfg.slots, pick("single"))
	if single.ops != len(arr) || single.hits != int64(len(arr)) || single.failed != 0 || single.canceled != 0 {
		t.Errorf("single: ops %d, hits %d, failed %d, canceled %d; want %d, %d, 0, 0", single.ops, single.hits, single.failed, single.canceled, len(arr), len(arr))
	}
	if single.conns < 1 {
		t.Errorf("single: %d connections counted, want at least 1", single.conns)
	}
	for _, op := range slow {
		if single.lat[op] < time.Second {
			t.Errorf("single: operation %d took %v; its only attempt is served for 1s", op, single.lat[op])
		}
	}
	if got := single.summary(); got.p999 < time.Second || got.extra != 0 {
		t.Errorf("single: p99.9 %v, extra %v%%; want at least 1s with %d slow of %d, and 0", got.p999, got.extra, len(slow), len(arr))
	}

	hedged := runHedge(context.Background(), cfg, "independent", indep, cfg.slots, pick("hedgedhttp"))
	if hedged.ops != len(arr) || hedged.failed != 0 {
		t.Errorf("hedgedhttp: ops %d, failed %d; want %d, 0", hedged.ops, hedged.failed, len(arr))
	}
	// Every slow first attempt is hedged, and every rescued one's first
	// attempt canceled when the hedge wins; a busy machine may hedge
	// more, never fewer.
	if hedged.hits < int64(len(arr)+len(slow)) || hedged.canceled < int64(len(rescued)) {
		t.Errorf("hedgedhttp: %d requests, %d canceled; want at least %d and %d", hedged.hits, hedged.canceled, len(arr)+len(slow), len(rescued))
	}
	// 10 ms, then 5 ms: far below the slow attempt's second. A busy
	// machine can delay a hedge until the first attempt's connection is
	// the one that answers, or fail it; most are rescued.
	fast := 0
	for _, op := range rescued {
		if hedged.lat[op] < 900*time.Millisecond {
			fast++
		} else {
			t.Logf("hedgedhttp: operation %d took %v, though its hedge is served in 5ms", op, hedged.lat[op])
		}
	}
	if fast == 0 {
		t.Errorf("hedgedhttp: none of the %d operations a hedge rescues took less than 900ms", len(rescued))
	}

	// The adaptive delay is sampled every 100ms through the run: none
	// while fewer than 100 latencies are known (20 operations arrive in
	// the first 100ms), then a delay.
	adaptive := runHedge(context.Background(), cfg, "independent", indep, cfg.slots, pick("adaptive"))
	if n := len(adaptive.delays); n < int(cfg.duration/delayEvery)-2 {
		t.Errorf("adaptive: %d delay samples in %v, want one per %v", n, cfg.duration, delayEvery)
	} else if adaptive.delays[0] != 0 || adaptive.delays[n-1] <= 0 {
		t.Errorf("adaptive: delay %v at the start and %v at the end; want none, then one", adaptive.delays[0], adaptive.delays[n-1])
	}
	if adaptive.ops != len(arr) || adaptive.hits < int64(len(arr)) {
		t.Errorf("adaptive: ops %d, hits %d; want %d, at least as many", adaptive.ops, adaptive.hits, len(arr))
	}

	res := &hedgeResults{cfg: cfg, command: "go run ./storm -scenarios hedging", independent: []*hedgeRun{single, hedged}}
	out := hedgeReport(res)
	for _, want := range []string{"| single attempt | " + strconv.Itoa(len(arr)) + " | 0 | ", "| cristalhq/hedgedhttp | ", "Command: `go run ./storm -scenarios hedging`"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	svg := filepath.Join(t.TempDir(), "hedging.svg")
	if err := tailChart(svg, "test", res.independent); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(svg); err != nil || !strings.Contains(string(b), "cristalhq/hedgedhttp") {
		t.Errorf("hedging.svg: %v, legend missing (%d bytes)", err, len(b))
	}
}
