package main

import (
	"fmt"
	"math"
	"strings"
)

// target is one of the targets, checked against a run.
type target struct {
	name     string
	measured string
	met      bool
}

// targets checks the targets whose runs are in res; a target whose runs
// were not made (by -scenarios or -policies) is left out.
func targets(res *results) []target {
	var out []target
	if h := find(res.outage, "httpretry"); h != nil {
		amp := h.phaseStats()[1].amp
		out = append(out, target{
			name:     "outage: httpretry defaults amplification ≤ 1.15×",
			measured: fmt.Sprintf("%.3f×", amp),
			met:      amp <= 1.15,
		})
	}
	h, s := find(res.brownout, "httpretry"), find(res.brownout, "single")
	if h != nil && s != nil {
		hs, ss := h.phaseStats()[1], s.phaseStats()[1]
		out = append(out, target{
			name:     "brownout: httpretry goodput ≥ single attempt's",
			measured: fmt.Sprintf("%.1f/s vs %.1f/s", hs.goodput, ss.goodput),
			met:      hs.goodput >= ss.goodput,
		}, target{
			name:     "brownout: httpretry hits ≤ 1.3× single attempt's",
			measured: fmt.Sprintf("%d vs %d (%.3f×)", hs.hits, ss.hits, ratio(hs.hits, ss.hits)),
			met:      ratio(hs.hits, ss.hits) <= 1.3,
		})
	}
	for _, sc := range []struct {
		name string
		runs []*run
	}{{"outage", res.outage}, {"brownout", res.brownout}} {
		h, s := find(sc.runs, "httpretry"), find(sc.runs, "single")
		if h == nil || s == nil {
			continue
		}
		hs, ss := h.phaseStats(), s.phaseStats()
		var parts []string
		worst := 0.0
		for _, i := range []int{0, 2} {
			d := (hs[i].goodput - ss[i].goodput) / ss[i].goodput
			worst = max(worst, math.Abs(d))
			parts = append(parts, fmt.Sprintf("%s %.1f vs %.1f/s (%+.2f%%)", hs[i].phase.name, hs[i].goodput, ss[i].goodput, 100*d))
		}
		out = append(out, target{
			name:     sc.name + ": healthy and recovery goodput within 2% of single attempt's",
			measured: strings.Join(parts, "; "),
			met:      worst <= 0.02,
		})
	}
	for _, sc := range []struct {
		name string
		runs []*run
	}{{"outage", res.outage}, {"brownout", res.brownout}} {
		h := find(sc.runs, "httpretry")
		if h == nil {
			continue
		}
		hd, hok := h.recovery()
		met := hok
		var peers []string
		for _, r := range sc.runs {
			if r.policy.ours {
				continue
			}
			d, ok := r.recovery()
			peers = append(peers, fmt.Sprintf("%s %s", r.policy.name, recovery(r)))
			if ok && (!hok || hd > d) {
				met = false
			}
		}
		if len(peers) == 0 {
			continue
		}
		out = append(out, target{
			name:     sc.name + ": httpretry recovers no slower than any peer",
			measured: fmt.Sprintf("httpretry %s; %s", recovery(h), strings.Join(peers, ", ")),
			met:      met,
		})
	}
	if t, ok := contentionTarget(res.contention); ok {
		out = append(out, t)
	}
	return append(out, fleetTargets(res)...)
}

// fleetTargets checks the budget in Redis: amplification at the largest
// fleet, and healthy goodput against a single attempt's at every size.
func fleetTargets(res *results) []target {
	var rs []*run
	for _, r := range res.fleet {
		if r.redis != nil {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return nil
	}
	largest := rs[len(rs)-1]
	var out []target
	for _, r := range []*run{largest, res.cluster} {
		if r == nil {
			continue
		}
		where := "one server"
		if r.redisOn == "cluster" {
			where = "a Redis Cluster"
		}
		amp, cost := r.phaseStats()[1].amp, r.redis.summary(r).perFailing
		out = append(out, target{
			name:     fmt.Sprintf("fleet: httpretry + redisretry on %s amplification ≤ 1.15× at P = %d", where, r.processes),
			measured: fmt.Sprintf("%.3f×", amp),
			met:      amp <= 1.15,
		}, target{
			name:     fmt.Sprintf("fleet: httpretry + redisretry on %s ≤ 0.1 Redis commands per failing operation at P = %d", where, r.processes),
			measured: fmt.Sprintf("%.3f", cost),
			met:      cost <= 0.1,
		})
	}
	// A single attempt's healthy goodput: measured in the outage scenario
	// when it ran, else every healthy arrival (which a single attempt
	// serves at this load).
	ref, refName := 0.0, "every arrival succeeding"
	if s := find(res.outage, "single"); s != nil {
		ref, refName = s.phaseStats()[0].goodput, "a single attempt's"
	} else {
		h := rs[0].phaseStats()[0]
		ref = float64(h.ops) / h.phase.dur.Seconds()
	}
	worst := 0.0
	var parts []string
	for _, r := range rs {
		g := r.phaseStats()[0].goodput
		d := (g - ref) / ref
		worst = max(worst, math.Abs(d))
		parts = append(parts, fmt.Sprintf("P=%d %.1f/s (%+.2f%%)", r.processes, g, 100*d))
	}
	return append(out, target{
		name:     fmt.Sprintf("fleet: httpretry + redisretry healthy goodput within 2%% of %s", refName),
		measured: fmt.Sprintf("%s; %s %.1f/s", strings.Join(parts, ", "), refName, ref),
		met:      worst <= 0.02,
	})
}

// contentionTarget checks Brooker's shape: at every size full jitter
// needs fewer calls than no jitter, and at the largest at most 3/4 of them.
func contentionTarget(cs []contention) (target, bool) {
	calls := map[int]map[string]int64{}
	var sizes []int
	for _, c := range cs {
		if calls[c.clients] == nil {
			calls[c.clients] = map[string]int64{}
			sizes = append(sizes, c.clients)
		}
		calls[c.clients][c.jitter] = c.calls
	}
	var parts []string
	met, any := true, false
	largest := 0
	for _, n := range sizes {
		none, full := calls[n]["no jitter"], calls[n]["full jitter"]
		if none == 0 || full == 0 {
			continue
		}
		any = true
		parts = append(parts, fmt.Sprintf("%d clients: %d vs %d (%.2f×)", n, full, none, ratio(full, none)))
		if full >= none {
			met = false
		}
		largest = max(largest, n)
	}
	if !any {
		return target{}, false
	}
	if ratio(calls[largest]["full jitter"], calls[largest]["no jitter"]) > 0.75 {
		met = false
	}
	return target{
		name:     "contention: full jitter needs clearly fewer calls than no jitter (≤ 0.75× at the largest size)",
		measured: strings.Join(parts, "; "),
		met:      met,
	}, true
}

// find returns the run of the policy with key, or nil.
func find(runs []*run, key string) *run {
	for _, r := range runs {
		if r.policy.key == key {
			return r
		}
	}
	return nil
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return math.Inf(1)
	}
	return float64(a) / float64(b)
}
