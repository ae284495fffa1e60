package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// metaConfig is the metastable scenario's settings. The server runs just
// above the offered load (rate/(workers/service) ≈ 0.93), so that work
// which callers abandoned, kept in the queue and done anyway, holds it
// overloaded once retries add a tenth to the load.
type metaConfig struct {
	rate           float64       // λ
	workers        int           // at most this many requests served at once
	service        time.Duration // each takes this long: capacity workers/service per second
	queue          int           // requests waiting beyond this are shed with 503
	attemptTimeout time.Duration // every policy's, so that an attempt stuck in the queue ends
	deadline       time.Duration // of each operation
	healthy        time.Duration // before the trigger
	trigger        time.Duration // the capacity drop
	dropTo         float64       // fraction of the workers left during the trigger
	after          time.Duration // after the trigger, for recovery
	window         time.Duration // recovery is judged over windows this long
	recoverFrac    float64       // of the healthy phase's success ratio
}

func defaultMetaConfig() metaConfig {
	return metaConfig{
		rate: 200, workers: 10, service: 10 * time.Second / 215, queue: 20000,
		attemptTimeout: 500 * time.Millisecond, deadline: 2 * time.Second,
		healthy: 5 * time.Second, trigger: 5 * time.Second, dropTo: 0.2, after: 15 * time.Second,
		window: time.Second, recoverFrac: 0.95,
	}
}

// schedule is healthy, the capacity drop, and the time after it.
func (m metaConfig) schedule() []phase {
	return []phase{
		{name: "healthy", dur: m.healthy},
		{name: "trigger", dur: m.trigger, mode: brownout, capacity: m.dropTo},
		{name: "after", dur: m.after},
	}
}

// capacity returns the requests per second the server serves at full
// strength.
func (m metaConfig) capacity() float64 { return float64(m.workers) / m.service.Seconds() }

// queueServer models a server that keeps work its callers abandoned: a
// FIFO queue in front of workers, each serving one request for service.
// A request whose caller has gone (the attempt timed out, the connection
// closed) stays in the queue and costs a worker its full service time
// when its turn comes, as most servers' queues do: nothing tells the
// worker that nobody waits for the answer. Only a full queue sheds (503).
//
// Workers keep to their schedule: one that overslept starts its next
// request at once, so the capacity holds on a busy machine.
type queueServer struct {
	ts      *httptest.Server
	start   time.Time
	phases  []phase
	workers int
	service time.Duration
	jobs    chan *job
	stop    context.CancelFunc
	wg      sync.WaitGroup

	hitsAt   []atomic.Int64 // requests by 100ms bucket
	wastedAt []atomic.Int64 // work done for callers already gone, by bucket of its end
	queueAt  []atomic.Int64 // queue length sampled at each bucket's start
	shed     atomic.Int64
}

// job is one request waiting for a worker.
type job struct {
	ctx  context.Context // the request's: done once its caller is gone
	done chan struct{}
}

// newQueueServer starts a queue server on 127.0.0.1 with the schedule;
// its timelines hold horizon worth of buckets. Close it with close.
func newQueueServer(phases []phase, workers int, service time.Duration, queue int, horizon time.Duration) *queueServer {
	n := int(horizon/bucket) + 1
	s := &queueServer{
		phases: phases, workers: workers, service: service,
		jobs:   make(chan *job, queue),
		hitsAt: make([]atomic.Int64, n), wastedAt: make([]atomic.Int64, n), queueAt: make([]atomic.Int64, n),
	}
	s.ts = httptest.NewUnstartedServer(s)
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.start = time.Now()
	for i := range workers {
		s.wg.Go(func() { s.work(ctx, i) })
	}
	s.wg.Go(func() { s.sample(ctx) })
	s.ts.Start()
	return s
}

func (s *queueServer) url() string { return s.ts.URL }

// close closes every connection, then stops the workers.
func (s *queueServer) close() {
	s.ts.Close()
	s.stop()
	s.wg.Wait()
}

func (s *queueServer) index(t time.Time) int {
	return min(max(int(t.Sub(s.start)/bucket), 0), len(s.hitsAt)-1)
}

// active returns how many workers serve at t.
func (s *queueServer) active(t time.Time) int {
	p := phaseOf(s.phases, t.Sub(s.start))
	if p.mode != brownout {
		return s.workers
	}
	return activeWorkers(s.workers, p.capacity)
}

// activeWorkers is the number of w workers a capacity fraction leaves:
// at least one.
func activeWorkers(w int, frac float64) int {
	return max(1, int(float64(w)*frac+0.5))
}

// phaseOf returns the phase in force el into a schedule, the last one
// after it.
func phaseOf(phases []phase, el time.Duration) phase {
	for _, p := range phases {
		if el < p.dur {
			return p
		}
		el -= p.dur
	}
	return phases[len(phases)-1]
}

// work is worker i: it takes a job when it is active and serves it for
// the service time, whether or not its caller still waits.
func (s *queueServer) work(ctx context.Context, i int) {
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	var next time.Time // when this worker's current request ends
	for {
		now := time.Now()
		if i >= s.active(now) {
			next = time.Time{}
			if !sleep(ctx, t, bucket/10) {
				return
			}
			continue
		}
		var j *job
		select {
		case j = <-s.jobs:
		case <-ctx.Done():
			return
		}
		now = time.Now()
		next = nextEnd(next, now, s.service)
		if !sleep(ctx, t, next.Sub(now)) {
			return
		}
		if j.ctx.Err() != nil {
			s.wastedAt[s.index(time.Now())].Add(1)
		}
		close(j.done)
	}
}

// nextEnd returns when a request taken at now ends: service after the
// previous one's end, or after now if the worker was idle. A worker that
// overslept thus catches up.
func nextEnd(prev, now time.Time, service time.Duration) time.Time {
	if prev.Before(now) && now.Sub(prev) > service {
		return now.Add(service)
	}
	return prev.Add(service)
}

// sleep waits d on t, or until ctx ends; false if ctx ended.
func sleep(ctx context.Context, t *time.Timer, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t.Reset(d)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// sample records the queue length every bucket.
func (s *queueServer) sample(ctx context.Context) {
	tk := time.NewTicker(bucket)
	defer tk.Stop()
	for {
		s.queueAt[s.index(time.Now())].Store(int64(len(s.jobs)))
		select {
		case <-tk.C:
		case <-ctx.Done():
			return
		}
	}
}

func (s *queueServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hitsAt[s.index(time.Now())].Add(1)
	j := &job{ctx: r.Context(), done: make(chan struct{})}
	select {
	case s.jobs <- j:
	default:
		s.shed.Add(1)
		http.Error(w, "queue full", http.StatusServiceUnavailable)
		return
	}
	select {
	case <-j.done:
		w.Write([]byte("ok\n"))
	case <-r.Context().Done():
		// The caller is gone; the job stays queued and will be served.
	}
}

// metaRun is one policy's pass through the metastable scenario.
type metaRun struct {
	policy    policy
	phases    []phase
	ops       []top
	hitsAt    []int64
	wastedAt  []int64
	queueAt   []int64
	shed      int64
	recovered time.Duration // since the trigger's end
	ok        bool          // recovered at all
}

// runMetastable passes p through the metastable scenario on a fresh
// queue server.
func runMetastable(ctx context.Context, c tconfig, p policy) *metaRun {
	m := c.meta
	runtime.GC()
	phases := m.schedule()
	arr := arrivals(c.seed, m.rate, phases)
	srv := newQueueServer(phases, m.workers, m.service, m.queue, total(phases)+m.deadline+time.Second)
	f := newFleet(p, 1)
	ops := driveTo(ctx, srv.start, arr, m.deadline, func(i int) dest { return dest{client: f.client(i), url: srv.url()} })
	f.closeIdle()
	srv.close()
	r := &metaRun{policy: p, phases: phases, ops: ops, hitsAt: timeline(srv.hitsAt), wastedAt: timeline(srv.wastedAt),
		queueAt: timeline(srv.queueAt), shed: srv.shed.Load()}
	r.recovered, r.ok = r.recovery(m.window, m.recoverFrac)
	return r
}

// recovery returns how long after the trigger's end the operations
// went back to the healthy phase's success ratio (times frac) for good:
// the start of the first window from which every window through the end
// of the schedule holds it.
func (r *metaRun) recovery(window time.Duration, frac float64) (time.Duration, bool) {
	n := int(total(r.phases) / bucket)
	good, arrived := make([]int64, n), make([]int64, n)
	for _, o := range r.ops {
		i := int(o.start / bucket)
		if i >= n {
			continue
		}
		arrived[i]++
		if o.ok {
			good[i]++
		}
	}
	h := int(r.phases[0].dur / bucket)
	ratio := float64(addUp(good[:h])) / float64(max(1, addUp(arrived[:h])))
	from := int((r.phases[0].dur + r.phases[1].dur) / bucket)
	i, ok := settledFrom(good, arrived, from, int(window/bucket), frac*ratio)
	return time.Duration(i-from) * bucket, ok
}

// settledFrom returns the first bucket i ≥ from such that every window of
// w buckets starting at i or later (and ending by the end) has
// successes ≥ want·arrivals; false if none does.
func settledFrom(good, arrived []int64, from, w int, want float64) (int, bool) {
	last := len(good) - w
	if w <= 0 || from > last {
		return 0, false
	}
	first := -1
	for i := last; i >= from; i-- {
		g, a := addUp(good[i:i+w]), addUp(arrived[i:i+w])
		if float64(g) < want*float64(a) {
			break
		}
		first = i
	}
	if first < 0 {
		return 0, false
	}
	return first, true
}

// goodputAt returns successes per second by the 100ms bucket of their
// end.
func (r *metaRun) goodputAt() []int64 {
	out := make([]int64, len(r.hitsAt))
	for _, o := range r.ops {
		if o.ok {
			out[min(int(o.end()/bucket), len(out)-1)]++
		}
	}
	return out
}

// label names a run in the table and chart.
func (r *metaRun) label() string { return r.policy.name }

// recoveryText is "6.5s" or "not recovered".
func recoveryText(d time.Duration, ok bool) string {
	if !ok {
		return "not recovered"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
}

// addUp returns the sum of v.
func addUp(v []int64) int64 {
	var n int64
	for _, x := range v {
		n += x
	}
	return n
}
