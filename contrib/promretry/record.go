package promretry

import (
	"net/http"
	"sync/atomic"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/internal/metricsutil/labels"
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
	attempts   [labels.NumMethods][labels.NumAttemptKinds][labels.NumResults]slot[prometheus.Counter]
	started    [labels.NumMethods][labels.NumAttemptKinds]slot[prometheus.Counter]
	successes  [labels.NumMethods][labels.NumAttemptKinds]slot[prometheus.Counter]
	timeouts   [labels.NumMethods][labels.NumTimeouts]slot[prometheus.Counter]

	// Every operation observes these two, and every attempt the gauge,
	// so they are created with the route.
	opAttempts, opWait prometheus.Observer
	inFlight           prometheus.Gauge

	opDuration      [labels.NumOutcomes]slot[prometheus.Observer]
	attemptDuration [labels.NumConns][labels.NumResults]slot[prometheus.Observer]
	retryWait       [labels.NumWaitCauses]slot[prometheus.Observer]
}

func (c *Collector) newRouteMetrics(name string) *routeMetrics {
	return &routeMetrics{
		name:       name,
		operations: make([]slot[prometheus.Counter], labels.NumMethods*labels.NumOutcomes*labels.NumReasons),
		opAttempts: c.opAttempts.WithLabelValues(name),
		opWait:     c.opWait.WithLabelValues(name),
		inFlight:   c.inFlight.WithLabelValues(name),
	}
}

// OnAttemptStart records that an attempt was sent: the started counter
// and the in-flight gauge, which OnAttempt lowers again. It has the
// signature of [httpretry.Transport.OnAttemptStart]; [Collector.Instrumented]
// installs it, chained with any hook already set.
func (c *Collector) OnAttemptStart(req *http.Request, number int) {
	r, _ := c.routeOf(req)
	m := labels.Method(req.Method)
	k := labels.AttemptKind(number)
	c.counter(&r.started[m][k], c.started, r.name, m, labels.AttemptKinds[k]).Inc()
	r.inFlight.Inc()
}

// OnAttempt records one attempt that ended: the attempt counter by
// result, its latency by connection use and result, and the connection
// phases that happened. It lowers
// the in-flight gauge, so install it together with
// [Collector.OnAttemptStart]. It has the signature of
// [httpretry.Transport.OnAttempt]; [Collector.Instrumented] installs it,
// chained with any hook already set.
func (c *Collector) OnAttempt(req *http.Request, a httpretry.Attempt) {
	r, _ := c.routeOf(req)
	m := labels.Method(req.Method)
	k := labels.AttemptKind(a.Number)
	res := labels.Result(a.Status, a.Err)
	s := &r.attempts[m][k][res]
	ctr, ok := s.get()
	if !ok {
		ctr = s.set(c.attempts.WithLabelValues(methodNames[m], r.name, labels.AttemptKinds[k], labels.Results[res]))
	}
	ctr.Inc()
	r.inFlight.Dec()
	if res == labels.ResultSuccess {
		c.counter(&r.successes[m][k], c.successes, r.name, m, labels.AttemptKinds[k]).Inc()
	}
	if t, ok := labels.Timeout(a.Err); ok {
		c.counter(&r.timeouts[m][t], c.timeouts, r.name, m, labels.Timeouts[t]).Inc()
	}
	conn := labels.Conn(a.Conn)
	observer(&r.attemptDuration[conn][res], c.attemptDuration, r.name, labels.Conns[conn], labels.Results[res]).
		Observe(a.Duration.Seconds())
	c.observePhases(a)
}

// OnWait records one wait once it ended, split by cause, for the time
// actually waited: a wait the caller cut short counts for the time it
// lasted, so that httpretry_retry_wait_seconds adds up to
// httpretry_operation_wait_seconds. It has the signature of
// [httpretry.Transport.OnWait]; [Collector.Instrumented] installs it,
// chained with any hook already set.
func (c *Collector) OnWait(req *http.Request, w httpretry.Wait) {
	r, _ := c.routeOf(req)
	for cause, d := range labels.WaitParts(w) {
		if d > 0 {
			observer(&r.retryWait[cause], c.retryWait, r.name, labels.WaitCauses[cause]).Observe(d.Seconds())
		}
	}
}

// observer returns the series of a histogram, creating it on first use.
func observer(s *slot[prometheus.Observer], vec *prometheus.HistogramVec, values ...string) prometheus.Observer {
	if v, ok := s.get(); ok {
		return v
	}
	return s.set(vec.WithLabelValues(values...))
}

// observePhases records the connection phases the attempt went through.
// A phase of zero did not happen (a reused connection has no DNS, connect
// or TLS phase) and is not recorded.
func (c *Collector) observePhases(a httpretry.Attempt) {
	for i, d := range labels.PhaseDurations(a) {
		if d <= 0 {
			continue
		}
		observer(&c.phaseObservers[i], c.phases, labels.Phases[i]).Observe(d.Seconds())
	}
}

// OnDone records one operation: its outcome class and stop reason, its
// attempts, its time spent waiting and its duration. It has the signature
// of [httpretry.Transport.OnDone]; [Collector.Instrumented] installs it,
// chained with any hook already set.
func (c *Collector) OnDone(req *http.Request, o httpretry.Outcome) {
	r, overflowed := c.routeOf(req)
	if overflowed {
		c.routeOverflows.Inc()
	}
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
	observer(&r.opDuration[out], c.opDuration, r.name, labels.Outcomes[out]).Observe(o.Elapsed.Seconds())
	c.hedges.record(req, methodNames[m], r.name, o)
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
