package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The throttle scenarios measure what a client-side throttle, per-host
// budgets and quota pacing do where a retry budget alone cannot help:
//
//   - throttle-outage: every request 503 for 10 s, between healthy phases;
//   - throttle-brownout: capacity half of the offered load;
//   - metastable: a server whose queue keeps abandoned work, tipped over
//     by a 5 s capacity drop (metastable.go);
//   - two-hosts: one client, two hosts, one of them down (hosts.go);
//   - quota: a server that states its quota in headers (quota.go);
//   - throttle-fleet: the outage over P processes, a throttle each, each
//     process calling at fleetRate; and, for comparison, the outage's own
//     arrivals dealt to the same P processes (a few a second each); and a
//     thousand processes at one a second sharing their throttle's counts
//     through Redis (throttleshared.go);
//   - throttle-proxy and throttle-lowrate (throttleproxy.go);
//   - shed: the server sheds retries first (shed.go).
//
// Every policy of a scenario gets the same arrivals.
var throttleScenarios = []string{"throttle-outage", "throttle-brownout", "metastable", "two-hosts", "quota", "throttle-fleet",
	"throttle-proxy", "throttle-lowrate", "shed"}

// addScenario adds the scenario named s to c: a scenario of the storm,
// one of the throttle's, or "throttle" for all of these. It returns
// false for an unknown name.
func (c *config) addScenario(s string) bool {
	switch {
	case slices.Contains(allScenarios, s):
		c.scenarios = append(c.scenarios, s)
	case s == "throttle":
		c.throttle = append(c.throttle, throttleScenarios...)
	case slices.Contains(throttleScenarios, s):
		c.throttle = append(c.throttle, s)
	default:
		return false
	}
	return true
}

// tconfig is the throttle scenarios' settings.
type tconfig struct {
	rate     float64       // λ, operations per second
	capacity int           // C of the shedding server
	service  time.Duration // S of the shedding server
	deadline time.Duration // per operation
	seed     uint64

	healthy    time.Duration // before and after the outage and brownout
	outage     time.Duration // the outage's length
	brownout   time.Duration // the brownout's length; capacity is half the offered load
	fleet      int           // processes in throttle-fleet
	fleetRate  float64       // operations per second of each process in throttle-fleet
	hostFail   int           // two-hosts: 1 in hostFail operations to the healthy host fail their first attempt
	lowRateDur time.Duration // throttle-lowrate's length
	shedOver   time.Duration // the shed scenario's overload
	meta       metaConfig
	quota      quotaConfig

	scenarios []string
	log       io.Writer
}

// defaultTConfig returns the settings of make throttle, from the storm
// command's shared ones.
func defaultTConfig(c config) tconfig {
	return tconfig{
		rate: c.rate, capacity: c.capacity, service: c.service, deadline: c.deadline, seed: c.seed,
		healthy: 4 * time.Second, outage: 10 * time.Second, brownout: 4 * time.Second,
		fleet: 100, fleetRate: 50, hostFail: 20, lowRateDur: 20 * time.Second, shedOver: 6 * time.Second,
		meta:  defaultMetaConfig(),
		quota: quotaConfig{limit: 100, window: time.Second, rate: 300, dur: 6 * time.Second, service: 2 * time.Millisecond},
		log:   c.log,
	}
}

// tresults is everything the throttle scenarios measured.
type tresults struct {
	cfg       tconfig
	outage    []*trun
	brownout  []*trun
	fleet     []*trun // P processes at fleetRate each
	fleetLow  []*trun // P processes sharing the outage's arrivals
	proxy     []*trun // the outage behind a proxy
	proxyName string  // which proxy
	lowrate   []*trun
	shed      []*shedRun
	meta      []*metaRun
	hosts     []*hostsRun
	quota     []*quotaRun
	shared    *sharedRun // P processes at 1/s each, sharing their counts through Redis
	started   time.Time
	wall      time.Duration
	command   string
}

// trun is one policy's pass through a scenario on the shedding server,
// with which operations a throttle refused without sending them.
type trun struct {
	*run
	local []bool // by operation
}

// top is one operation of the throttle scenarios.
type top struct {
	opResult
	host  int  // index of the destination
	local bool // refused by a throttle: never reached a server
}

// dest is where one operation goes.
type dest struct {
	client *http.Client
	url    string
	host   int
}

// driveTo runs the open-loop load from start: every arrival starts one
// GET at its time, to the destination pick names, with its own deadline.
// It returns when every operation has ended.
func driveTo(ctx context.Context, start time.Time, arr []arrival, deadline time.Duration, pick func(i int) dest) []top {
	out := make([]top, len(arr))
	var wg sync.WaitGroup
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	n := 0
	for i, a := range arr {
		if d := time.Until(start.Add(a.at)); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		n++
		d := pick(i)
		wg.Go(func() { out[i] = send(ctx, d, start, i, a.phase, deadline) })
	}
	wg.Wait()
	return out[:n]
}

// send makes operation i and reads its response.
func send(ctx context.Context, d dest, start time.Time, i, phase int, deadline time.Duration) top {
	t0 := time.Now()
	o := top{opResult: opResult{phase: phase, start: t0.Sub(start)}, host: d.host}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"/item", nil)
	if err != nil {
		panic(err) // a URL of a server of this command: cannot happen
	}
	req.Header.Set(phaseHeader, strconv.Itoa(phase))
	req.Header.Set(opHeader, strconv.Itoa(i))
	resp, err := d.client.Do(req)
	if err != nil {
		o.err = true
		o.local = refusedLocally(err)
	} else {
		_, rerr := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		o.status = resp.StatusCode
		o.ok = rerr == nil && resp.StatusCode == http.StatusOK
	}
	o.latency = time.Since(t0)
	o.ok = o.ok && o.latency <= deadline
	return o
}

// runShedding passes policy p, over n processes, through phases on a
// fresh shedding server (server.go) that serves capacity requests at once.
func runShedding(ctx context.Context, c tconfig, scenario string, phases []phase, arr []arrival, p policy, n, capacity int) *trun {
	return runSheddingVia(ctx, c, scenario, phases, arr, p, n, capacity, nil)
}

// runSheddingVia is runShedding with the clients calling the server
// through front, when not nil: front returns the URL to call for the
// server's URL, and a function that stops it.
func runSheddingVia(ctx context.Context, c tconfig, scenario string, phases []phase, arr []arrival, p policy, n, capacity int,
	front func(backend string) (string, func())) *trun {
	runtime.GC()
	srv := newServer(phases, capacity, c.service, total(phases)+c.deadline+time.Second)
	url, stop := srv.url(), func() {}
	if front != nil {
		url, stop = front(srv.url())
	}
	f := newFleet(p, n)
	ops := driveTo(ctx, srv.start, arr, c.deadline, func(i int) dest {
		return dest{client: f.client(i), url: url}
	})
	wall := time.Since(srv.start)
	f.closeIdle()
	stop()
	srv.close()
	r := &trun{run: &run{
		scenario: scenario, policy: p, processes: n, phases: phases, deadline: c.deadline,
		hits: srv.hits.Load(), hitsByPhase: timeline(srv.byPhase), hitsAt: timeline(srv.hitsAt),
		connsAt: timeline(srv.connsAt), conns: srv.conns.Load(), shed: srv.shed.Load(), down: srv.down.Load(), wall: wall,
	}}
	for _, o := range ops {
		r.ops = append(r.ops, o.opResult)
		r.local = append(r.local, o.local)
	}
	return r
}

// runThrottle runs the throttle scenarios of c, one run after another.
func runThrottle(ctx context.Context, c tconfig) *tresults {
	res := &tresults{cfg: c, started: time.Now()}
	progress := func(format string, a ...any) {
		fmt.Fprintf(c.log, "[%6.1fs] ", time.Since(res.started).Seconds())
		fmt.Fprintf(c.log, format+"\n", a...)
	}
	has := func(s string) bool { return slices.Contains(c.scenarios, s) }
	fleetRate, fleetCap := c.fleetRate*float64(c.fleet), fleetCapacity(c)
	shedding := []struct {
		name string
		keys []string
		n    int
		rate float64
		cap  int
		ph   []phase
		dst  *[]*trun
	}{
		{"throttle-outage", []string{keySingle, keyBudget, keyThrottle, keyFailsafe}, 1, c.rate, c.capacity, c.outageSchedule(), &res.outage},
		{"throttle-brownout", []string{keySingle, keyBudget, keyThrottle, keyFailsafe}, 1, c.rate, c.capacity, c.brownoutSchedule(), &res.brownout},
		{"throttle-fleet", []string{keySingle, keyBudget, keyThrottle, keyNoMin}, c.fleet, fleetRate, fleetCap, c.outageSchedule(), &res.fleet},
		{"throttle-fleet", []string{keyThrottle}, c.fleet, c.rate, c.capacity, c.outageSchedule(), &res.fleetLow},
	}
	// The scenarios that send little run first: the fleet's tens of
	// thousands of operations leave the process busy for a while after.
	runProxyAndLowRate(ctx, c, res, has, progress)
	for _, sc := range shedding {
		if !has(sc.name) {
			continue
		}
		arr := arrivals(c.seed, sc.rate, sc.ph)
		for _, p := range throttlePolicies(0, sc.keys...) {
			if ctx.Err() != nil {
				return res
			}
			progress("%s: %s in %s, %d operations", sc.name, p.name, plural(sc.n, "process", "processes"), len(arr))
			*sc.dst = append(*sc.dst, runShedding(ctx, c, sc.name, sc.ph, arr, p, sc.n, sc.cap))
		}
	}
	if has("throttle-fleet") && ctx.Err() == nil {
		res.shared = runSharedFleet(ctx, c, progress)
	}
	runOthers(ctx, c, res, has, progress)
	res.wall = time.Since(res.started)
	progress("done")
	return res
}

// runProxyAndLowRate runs throttle-proxy, throttle-lowrate and shed.
func runProxyAndLowRate(ctx context.Context, c tconfig, res *tresults, has func(string) bool, progress func(string, ...any)) {
	if has("throttle-proxy") {
		front, name, err := proxyFront()
		if err != nil {
			panic(fmt.Sprintf("storm: throttle-proxy: %v", err))
		}
		res.proxyName = name
		ph := c.deadSchedule()
		arr := arrivals(c.seed, c.rate, ph)
		for _, p := range throttlePolicies(0, keySingle, keyThrottle) {
			if ctx.Err() != nil {
				return
			}
			progress("throttle-proxy: %s through %s, %d operations", p.name, name, len(arr))
			res.proxy = append(res.proxy, runSheddingVia(ctx, c, "throttle-proxy", ph, arr, p, 1, c.capacity, front))
		}
	}
	if has("throttle-lowrate") {
		ph := c.lowRateSchedule()
		arr := arrivals(c.seed, lowRatePerProc*lowRateProcesses, ph)
		for _, p := range throttlePolicies(0, keyBudget, keyThrottle) {
			if ctx.Err() != nil {
				return
			}
			progress("throttle-lowrate: %s in %d processes, %d operations", p.name, lowRateProcesses, len(arr))
			res.lowrate = append(res.lowrate, runShedding(ctx, c, "throttle-lowrate", ph, arr, p, lowRateProcesses, c.capacity))
		}
	}
	if has("shed") {
		for _, shedder := range []bool{true, false} {
			if ctx.Err() != nil {
				return
			}
			progress("shed: %d processes, Shedder %v", shedProcesses, shedder)
			res.shed = append(res.shed, runShed(ctx, c, shedder))
		}
	}
}

// runOthers runs the scenarios with servers of their own: metastable,
// two-hosts and quota.
func runOthers(ctx context.Context, c tconfig, res *tresults, has func(string) bool, progress func(string, ...any)) {
	if has("metastable") {
		for _, p := range throttlePolicies(c.meta.attemptTimeout, keySingle, keyNaive, keyBudget, keyThrottle, keyFailsafe) {
			if ctx.Err() != nil {
				return
			}
			progress("metastable: %s", p.name)
			res.meta = append(res.meta, runMetastable(ctx, c, p))
		}
	}
	if has("two-hosts") {
		for _, p := range throttlePolicies(0, keyBudget, keyThrottle) {
			for _, down := range []bool{false, true} {
				if ctx.Err() != nil {
					return
				}
				progress("two-hosts: %s, other host down: %v", p.name, down)
				res.hosts = append(res.hosts, runHosts(ctx, c, p, down))
			}
		}
	}
	if has("quota") {
		for _, hdr := range []quotaHeaders{ietfHeaders, xHeaders} {
			for _, p := range throttlePolicies(0, keyBudget, keyThrottle) {
				if ctx.Err() != nil {
					return
				}
				progress("quota: %s, %s headers", p.name, hdr)
				res.quota = append(res.quota, runQuota(ctx, c, p, hdr))
			}
		}
	}
}

// outageSchedule is healthy, every request 503, healthy again.
func (c tconfig) outageSchedule() []phase {
	return []phase{
		{name: "healthy", dur: c.healthy},
		{name: "outage", dur: c.outage, mode: outage},
		{name: "recovery", dur: c.healthy},
	}
}

// brownoutSchedule is healthy, capacity half the offered load, healthy
// again. The brownout's capacity is a rate, λ/2 served a second: a
// server that serves C' = λ·S/2 requests at once would, under Poisson
// arrivals, lose more than half of them to the moments when more than
// C' arrive together, and a single attempt would see well over two hits
// per accepted request.
func (c tconfig) brownoutSchedule() []phase {
	return []phase{
		{name: "healthy", dur: c.healthy},
		{name: "brownout", dur: c.brownout, mode: paced, rate: c.rate / 2},
		{name: "recovery", dur: c.healthy},
	}
}

// fleetCapacity is the requests the fleet's server serves at once: the
// fleet offers P·fleetRate a second, and its server keeps the single
// process's headroom.
func fleetCapacity(c tconfig) int {
	return int(math.Ceil(float64(c.capacity) * c.fleetRate * float64(c.fleet) / c.rate))
}
