package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"
)

// results is everything one invocation measured.
type results struct {
	cfg        config
	outage     []*run // one per policy
	brownout   []*run // one per policy
	fleet      []*run // httpretry defaults, a budget each then one in Redis, per fleet size
	cluster    *run   // the largest fleet with its budget in a Redis Cluster
	contention []contention
	started    time.Time
	wall       time.Duration
	command    string
	err        error // a run that could not be made
}

// runAll runs the scenarios of cfg, one run after another, and reports
// progress to cfg.log. It stops early, with partial results, when ctx ends.
func runAll(ctx context.Context, cfg config) *results {
	res := &results{cfg: cfg, started: time.Now()}
	progress := func(format string, a ...any) {
		fmt.Fprintf(cfg.log, "[%6.1fs] ", time.Since(res.started).Seconds())
		fmt.Fprintf(cfg.log, format+"\n", a...)
	}
	for _, sc := range []struct {
		name string
		mode mode
		dst  *[]*run
	}{{"outage", outage, &res.outage}, {"brownout", brownout, &res.brownout}} {
		if !cfg.has(sc.name) {
			continue
		}
		phases := cfg.schedule(sc.mode)
		arr := arrivals(cfg.seed, cfg.rate, phases)
		for i, p := range cfg.policies {
			if ctx.Err() != nil {
				return res
			}
			progress("%s %d/%d: %s, %d operations over %v", sc.name, i+1, len(cfg.policies), p.name, len(arr), total(phases))
			r := runOne(ctx, cfg, sc.name, phases, arr, p, 1)
			*sc.dst = append(*sc.dst, r)
			progress("%s %d/%d: %s", sc.name, i+1, len(cfg.policies), brief(r))
		}
	}
	if cfg.has("contention") {
		for _, n := range cfg.clients {
			for _, j := range jitters() {
				if ctx.Err() != nil {
					return res
				}
				c := runContention(ctx, n, cfg.window, cfg.capWindow, j)
				res.contention = append(res.contention, c)
				progress("contention: %d clients, %s: %d calls, last success after %v", n, j.name, c.calls, c.completion.Round(time.Millisecond))
			}
		}
	}
	if cfg.has("fleet") {
		if res.err = runFleet(ctx, cfg, res, progress); res.err != nil {
			return res
		}
	}
	res.wall = time.Since(res.started)
	progress("done")
	return res
}

// runFleet runs the fleet scenario: for every fleet size, httpretry's
// defaults with a budget per process, then with one budget in Redis; then
// the largest fleet once more with its budget in a Redis Cluster.
func runFleet(ctx context.Context, cfg config, res *results, progress func(string, ...any)) error {
	phases := cfg.schedule(outage)
	arr := arrivals(cfg.seed, cfg.rate, phases)
	var rs *redisTarget
	if !cfg.noRedis {
		var err error
		if rs, err = startRedis(); err != nil {
			return err
		}
		defer rs.close()
	}
	for i, n := range cfg.fleet {
		pols := []policy{policyByKey("httpretry")}
		var st *redisStats
		if rs != nil {
			st = &redisStats{}
			pols = append(pols, redisPolicy(rs, fmt.Sprintf("storm:fleet:%d", n), n, st, 0))
		}
		for _, p := range pols {
			if ctx.Err() != nil {
				return nil
			}
			progress("fleet %d/%d: %s in %s", i+1, len(cfg.fleet), p.name, plural(n, "process", "processes"))
			r := runOne(ctx, cfg, "fleet", phases, arr, p, n)
			if p.key == redisPolicyKey {
				r.redis = st
			}
			res.fleet = append(res.fleet, r)
			progress("fleet %d/%d: %s", i+1, len(cfg.fleet), brief(r))
		}
	}
	if rs == nil || len(cfg.fleet) == 0 || ctx.Err() != nil {
		return nil
	}
	return runCluster(ctx, cfg, res, phases, arr, progress)
}

// runCluster runs the largest fleet with its budget in a Redis Cluster of
// three masters that it starts.
func runCluster(ctx context.Context, cfg config, res *results, phases []phase, arr []arrival, progress func(string, ...any)) error {
	n := slices.Max(cfg.fleet)
	progress("fleet on a Redis Cluster: starting three masters")
	c, err := startCluster()
	if err != nil {
		return err
	}
	defer c.close()
	st := &redisStats{}
	p := redisPolicy(c, fmt.Sprintf("storm:fleet:cluster:%d", n), n, st, 0)
	progress("fleet on a Redis Cluster: %s in %s", p.name, plural(n, "process", "processes"))
	r := runOne(ctx, cfg, "fleet", phases, arr, p, n)
	r.redis, r.redisOn = st, c.name
	res.cluster = r
	progress("fleet on a Redis Cluster: %s", brief(r))
	return nil
}

// runOne passes one policy, in n simulated processes, through one
// scenario on a fresh server, then closes every connection.
func runOne(ctx context.Context, cfg config, scenario string, phases []phase, arr []arrival, p policy, n int) *run {
	// Settle the previous run's garbage before this one starts.
	runtime.GC()
	srv := newServer(phases, cfg.capacity, cfg.service, total(phases)+cfg.deadline+time.Second)
	f := newFleet(p, n)
	ops := drive(ctx, srv, arr, f, cfg.deadline)
	wall := time.Since(srv.start)
	f.closeIdle()
	srv.close()
	return &run{
		scenario:    scenario,
		policy:      p,
		processes:   n,
		phases:      phases,
		deadline:    cfg.deadline,
		ops:         ops,
		hits:        srv.hits.Load(),
		hitsByPhase: timeline(srv.byPhase),
		hitsAt:      timeline(srv.hitsAt),
		connsAt:     timeline(srv.connsAt),
		conns:       srv.conns.Load(),
		shed:        srv.shed.Load(),
		down:        srv.down.Load(),
		wall:        wall,
		start:       srv.start,
	}
}

// total returns the length of a schedule.
func total(phases []phase) time.Duration {
	var d time.Duration
	for _, p := range phases {
		d += p.dur
	}
	return d
}

// brief is a run's progress line.
func brief(r *run) string {
	st := r.phaseStats()
	rec := "never"
	if d, ok := r.recovery(); ok {
		rec = d.String()
	}
	return fmt.Sprintf("%d ops, %d hits, %s amplification %.2f×, goodput %.0f/s, recovery %s, %d connections, %.1fs",
		len(r.ops), r.hits, st[1].phase.name, st[1].amp, st[1].goodput, rec, r.conns, r.wall.Seconds())
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
