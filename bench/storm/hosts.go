package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
)

// flakyServer is the healthy host of the two-hosts scenario: it serves
// every request for service, except the first attempt of one operation in
// every, which it answers 503, so that its callers need a few retries
// and a budget that lets them through.
type flakyServer struct {
	ts      *httptest.Server
	service time.Duration
	every   int
	seen    []atomic.Int32 // attempts by operation index
	byPhase []atomic.Int64 // hits by the phase the operation arrived in
}

func newFlakyServer(ops, phases, every int, service time.Duration) *flakyServer {
	s := &flakyServer{service: service, every: every, seen: make([]atomic.Int32, ops), byPhase: make([]atomic.Int64, phases)}
	s.ts = httptest.NewServer(s)
	return s
}

// failsFirst reports whether operation op's first attempt is answered
// 503: one in every.
func failsFirst(op, every int) bool { return every > 0 && op%every == every/2 }

func (s *flakyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op, err := strconv.Atoi(r.Header.Get(opHeader))
	ph, perr := strconv.Atoi(r.Header.Get(phaseHeader))
	if err != nil || perr != nil || op < 0 || op >= len(s.seen) || ph < 0 || ph >= len(s.byPhase) {
		http.Error(w, "no operation", http.StatusBadRequest)
		return
	}
	s.byPhase[ph].Add(1)
	if s.seen[op].Add(1) == 1 && failsFirst(op, s.every) {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	t := time.NewTimer(s.service)
	defer t.Stop()
	select {
	case <-t.C:
		w.Write([]byte("ok\n"))
	case <-r.Context().Done():
	}
}

// hostsRun is one policy's pass through the two-hosts scenario, with the
// other host down in the middle phase or (the reference) never.
type hostsRun struct {
	policy policy
	down   bool
	phases []phase
	ops    []top
	hitsA  []int64 // the healthy host's hits by phase
}

// healthyHost returns the healthy host's operations, successes and
// retries (hits beyond one per operation) of phase i.
func (r *hostsRun) healthyHost(i int) (ops, ok int, retries int64) {
	for _, o := range r.ops {
		if o.host == 0 && o.phase == i {
			ops++
			if o.ok {
				ok++
			}
		}
	}
	return ops, ok, r.hitsA[i] - int64(ops)
}

// runHosts passes p through the two-hosts scenario: one client, its
// operations dealt in turn to a flaky but healthy host and to a host that
// is down in the middle phase when down is set.
func runHosts(ctx context.Context, c tconfig, p policy, down bool) *hostsRun {
	runtime.GC()
	phases := []phase{
		{name: "healthy", dur: c.healthy},
		{name: "other host down", dur: c.healthy, mode: outage},
		{name: "recovery", dur: c.healthy},
	}
	bPhases := phases
	if !down {
		bPhases = []phase{{name: "healthy", dur: total(phases)}}
	}
	arr := arrivals(c.seed, c.rate, phases)
	a := newFlakyServer(len(arr), len(phases), c.hostFail, c.service)
	b := newServer(bPhases, c.capacity, c.service, total(phases)+c.deadline+time.Second)
	f := newFleet(p, 1)
	ops := driveTo(ctx, b.start, arr, c.deadline, func(i int) dest {
		if i%2 == 0 {
			return dest{client: f.client(0), url: a.ts.URL, host: 0}
		}
		return dest{client: f.client(0), url: b.url(), host: 1}
	})
	f.closeIdle()
	a.ts.Close()
	b.close()
	return &hostsRun{policy: p, down: down, phases: phases, ops: ops, hitsA: timeline(a.byPhase)}
}
