package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry"
)

// The shed scenario: P processes, each with httpretry's defaults and
// Propagate (each attempt says which it is in Retry-Attempt), no Redis,
// call a server that serves at most shedLimit requests at once. In the
// overload phase its service time triples, so the same arrivals offer
// about 1.8 times what it can serve. Its concurrency limit is enforced
// either by httpretry.Shedder (retries refused first, every refusal
// "X-Should-Retry: false") or, for comparison, by a plain limit that
// answers a bare 503. Amplification is the server's hits per operation
// that arrived in the overload.

// Settings of the shed scenario.
const (
	shedProcesses = 100
	shedLimit     = 20
	shedRate      = 600 // operations a second, all processes
	shedService   = 20 * time.Millisecond
	shedSlowdown  = 3 // the overload's service time, in shedService
	maxShedAmp    = 1.15
)

// shedRun is one pass of the shed scenario.
type shedRun struct {
	shedder bool // httpretry.Shedder, else a plain limit
	*run
}

// shedSchedule is healthy, overloaded, healthy.
func (c tconfig) shedSchedule() []phase {
	return []phase{
		{name: "healthy", dur: c.healthy},
		{name: "overload", dur: c.shedOver},
		{name: "recovery", dur: c.healthy},
	}
}

// shedServer serves with a service time that triples in the overload
// phase, behind a concurrency limit of shedLimit, and counts hits by the
// phase an operation arrived in.
type shedServer struct {
	start   time.Time
	phases  []phase
	hits    atomic.Int64
	byPhase []atomic.Int64
	limited atomic.Int64 // in flight under the plain limit
}

func (s *shedServer) count(r *http.Request) {
	s.hits.Add(1)
	tag := len(s.phases)
	if p, err := strconv.Atoi(r.Header.Get(phaseHeader)); err == nil && p >= 0 && p < len(s.phases) {
		tag = p
	}
	s.byPhase[tag].Add(1)
}

// serve does the work: shedService, shedSlowdown times longer in the
// overload phase.
func (s *shedServer) serve(w http.ResponseWriter, r *http.Request) {
	d := shedService
	if el := time.Since(s.start); el >= s.phases[0].dur && el < s.phases[0].dur+s.phases[1].dur {
		d *= shedSlowdown
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		w.Write([]byte("ok\n"))
	case <-r.Context().Done():
	}
}

// plain is the comparison's limit: a bare 503 beyond shedLimit.
func (s *shedServer) plain(w http.ResponseWriter, r *http.Request) {
	if s.limited.Add(1) > shedLimit {
		s.limited.Add(-1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	defer s.limited.Add(-1)
	s.serve(w, r)
}

// runShed passes httpretry with Propagate over shedProcesses through the
// shed schedule, behind the Shedder or the plain limit.
func runShed(ctx context.Context, c tconfig, shedder bool) *shedRun {
	runtime.GC()
	phases := c.shedSchedule()
	s := &shedServer{phases: phases, byPhase: make([]atomic.Int64, len(phases)+1)}
	var limit http.Handler = http.HandlerFunc(s.plain)
	if shedder {
		limit = &httpretry.Shedder{Limit: shedLimit, Next: http.HandlerFunc(s.serve)}
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.count(r)
		limit.ServeHTTP(w, r)
	}))
	s.start = time.Now()
	ts.Start()
	p := shedPolicy()
	f := newFleet(p, shedProcesses)
	arr := arrivals(c.seed, shedRate, phases)
	ops := driveTo(ctx, s.start, arr, c.deadline, func(i int) dest {
		return dest{client: f.client(i), url: ts.URL}
	})
	f.closeIdle()
	ts.Close()
	r := &run{scenario: "shed", policy: p, processes: shedProcesses, phases: phases, deadline: c.deadline,
		hits: s.hits.Load(), hitsByPhase: timeline(s.byPhase)}
	for _, o := range ops {
		r.ops = append(r.ops, o.opResult)
	}
	return &shedRun{shedder: shedder, run: r}
}

// shedPolicy is httpretry's defaults with Propagate.
func shedPolicy() policy {
	return policy{key: "httpretry-propagate", name: "httpretry, Propagate", ours: true,
		desc: "httpretry defaults (a NewTokenBucket(20, 0.1) per process) with Propagate: true, so each attempt carries Retry-Attempt",
		new: func() (*http.Client, func()) {
			t := &httpretry.Transport{Propagate: true}
			return &http.Client{Transport: t}, t.CloseIdleConnections
		}}
}

// shedAmp is a run's server hits per operation of the overload phase.
func shedAmp(r *shedRun) float64 {
	st := r.phaseStats()[1]
	return st.amp
}

// shedLine reports the shed scenario.
func shedLine(res *tresults) (string, []target, bool) {
	var with, without *shedRun
	for _, r := range res.shed {
		if r.shedder {
			with = r
		} else {
			without = r
		}
	}
	if with == nil {
		return "", nil, false
	}
	a := shedAmp(with)
	l := fmt.Sprintf("shed: P=%d overload, amplification %.2fx without Redis", with.processes, a)
	st := with.phaseStats()[1]
	l += fmt.Sprintf(", goodput %.0f/s", st.goodput)
	if without != nil {
		ws := without.phaseStats()[1]
		l += fmt.Sprintf(" (a plain 503 limit: amplification %.2fx, goodput %.0f/s)", shedAmp(without), ws.goodput)
	}
	return l, []target{{name: fmt.Sprintf("shed: P=%d overload amplification with the Shedder, no Redis ≤ %.2f×", with.processes, maxShedAmp),
		measured: fmt.Sprintf("%.3f×", a), met: a <= maxShedAmp}}, true
}
