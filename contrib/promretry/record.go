package promretry

import (
	"net/http"
	"sync/atomic"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/internal/labels"
	"github.com/prometheus/client_golang/prometheus"
)

// methodNames are the values of the method label: the methods RFC 9110
// and RFC 5789 define, and "OTHER" for any other, so that a client
// sending made-up methods cannot add series.
var methodNames = labels.MethodNames("OTHER")

// slot holds one series of a vector once it has been used. A series is
// created on first use, never before, so that the exposition lists only
// label combinations that happened; afterwards recording it is one atomic
// load, with none of the hashing and allocation of WithLabelValues.
type slot[T any] struct{ p atomic.Pointer[T] }

// get returns the series, or false when it does not exist yet.
func (s *slot[T]) get() (T, bool) {
	if p := s.p.Load(); p != nil {
		return *p, true
	}
	var zero T
	return zero, false
}

// set stores v and returns the series the slot holds: v, or the one a
// concurrent caller stored first (the same series: a vector returns one
// series per label combination).
func (s *slot[T]) set(v T) T {
	if s.p.CompareAndSwap(nil, &v) {
		return v
	}
	return *s.p.Load()
}

// routeMetrics holds the series of one route value.
type routeMetrics struct {
	name string

	// operations is indexed by operationIndex: one slot per method,
	// outcome and stop reason.
	operations []slot[prometheus.Counter]
	attempts   [labels.NumMethods][labels.NumAttemptKinds]slot[prometheus.Counter]
	successes  [labels.NumMethods][labels.NumAttemptKinds]slot[prometheus.Counter]
	timeouts   [labels.NumMethods][labels.NumTimeouts]slot[prometheus.Counter]

	// Every operation observes these three, so they are created with the
	// route.
	opAttempts, opWait, opDuration prometheus.Observer

	attemptDuration [labels.NumConns]slot[prometheus.Observer]
}

func (c *Collector) newRouteMetrics(name string) *routeMetrics {
	return &routeMetrics{
		name:       name,
		operations: make([]slot[prometheus.Counter], labels.NumMethods*labels.NumOutcomes*labels.NumReasons),
		opAttempts: c.opAttempts.WithLabelValues(name),
		opWait:     c.opWait.WithLabelValues(name),
		opDuration: c.opDuration.WithLabelValues(name),
	}
}

// OnAttempt records one attempt: the attempt counters, its latency by
// connection use, a timeout, and the connection phases that happened. It
// has the signature of [httpretry.Transport.OnAttempt]; [Collector.Instrument]
// installs it, chained with any hook already set.
func (c *Collector) OnAttempt(req *http.Request, a httpretry.Attempt) {
	r := c.routes.get(c.route(req))
	m := labels.Method(req.Method)
	k := labels.AttemptKind(a.Number)
	c.counter(&r.attempts[m][k], c.attempts, r.name, m, labels.AttemptKinds[k]).Inc()
	if a.Err == nil && a.Status > 0 && a.Status < 400 {
		c.counter(&r.successes[m][k], c.successes, r.name, m, labels.AttemptKinds[k]).Inc()
	}
	if t, ok := labels.Timeout(a.Err); ok {
		c.counter(&r.timeouts[m][t], c.timeouts, r.name, m, labels.Timeouts[t]).Inc()
	}
	conn := labels.Conn(a.Conn)
	obs, ok := r.attemptDuration[conn].get()
	if !ok {
		obs = r.attemptDuration[conn].set(c.attemptDuration.WithLabelValues(r.name, labels.Conns[conn]))
	}
	obs.Observe(a.Duration.Seconds())
	c.observePhases(a)
}

// observePhases records the connection phases the attempt went through.
// A phase of zero did not happen (a reused connection has no DNS, connect
// or TLS phase) and is not recorded.
func (c *Collector) observePhases(a httpretry.Attempt) {
	for i, d := range labels.PhaseDurations(a) {
		if d <= 0 {
			continue
		}
		obs, ok := c.phaseObservers[i].get()
		if !ok {
			obs = c.phaseObservers[i].set(c.phases.WithLabelValues(labels.Phases[i]))
		}
		obs.Observe(d.Seconds())
	}
}

// OnDone records one operation: its outcome class and stop reason, its
// attempts, its time spent waiting and its duration. It has the signature
// of [httpretry.Transport.OnDone]; [Collector.Instrument] installs it,
// chained with any hook already set.
func (c *Collector) OnDone(req *http.Request, o httpretry.Outcome) {
	r := c.routes.get(c.route(req))
	m := labels.Method(req.Method)
	out := labels.Outcome(o)
	rs := labels.Reason(o.Reason)
	s := &r.operations[operationIndex(m, out, rs)]
	ops, ok := s.get()
	if !ok {
		ops = s.set(c.operations.WithLabelValues(methodNames[m], r.name, labels.Outcomes[out], labels.Reasons[rs]))
	}
	ops.Inc()
	r.opAttempts.Observe(float64(o.Attempts))
	r.opWait.Observe(o.Waited.Seconds())
	r.opDuration.Observe(o.Elapsed.Seconds())
}

// operationIndex is the index in routeMetrics.operations of the series
// of method m, outcome out and stop reason rs.
func operationIndex(m, out, rs int) int {
	return (m*labels.NumOutcomes+out)*labels.NumReasons + rs
}

// counter returns the series of a counter labelled method, route and one
// more label, creating it on first use.
func (c *Collector) counter(s *slot[prometheus.Counter], vec *prometheus.CounterVec, route string, method int, third string) prometheus.Counter {
	if v, ok := s.get(); ok {
		return v
	}
	return s.set(vec.WithLabelValues(methodNames[method], route, third))
}
