package promretry

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/internal/metricsutil"
	"github.com/httpretry/httpretry/internal/metricsutil/labels"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configures a [Collector]. The zero value is useful: routes are
// hosts, at most 100 of them, and the attempts histogram has buckets 1, 2
// and 3.
type Options struct {
	// Route names the route of a request for the route label. It must
	// return a bounded set of values, such as the template of the path
	// (`/books/{id}`), never the raw path or query. Values beyond
	// MaxRoutes, empty, longer than 128 bytes or not valid UTF-8 are
	// reported as "other". It is called once per attempt and once per
	// operation, from the Transport's hooks, never concurrently for one
	// operation. If nil, the route is the
	// request's host (with its port, if any).
	Route func(req *http.Request) string

	// MaxRoutes is the number of distinct route values kept; requests of
	// any further route are reported as "other". 0 (or negative) means
	// 100.
	MaxRoutes int

	// MaxAttempts sets the buckets of httpretry_operation_attempts to 1,
	// 2, …, MaxAttempts. 0 (or negative) means DefaultAttemptBuckets
	// (10), which covers any Transport allowing up to 10 attempts: the
	// buckets are fixed when New registers them, before
	// [Collector.Instrumented] sees a Transport. Set it for a Transport
	// allowing more (its operations past the last bucket count only in
	// +Inf), or to the Transport's MaxAttempts for fewer series. At most
	// 100.
	MaxAttempts int

	// Budget, if set, is reported by the gauges httpretry_budget_tokens
	// and, for a budget shared through a store, httpretry_budget_shared.
	// It must have a Tokens method: Tokens() float64, as
	// [*httpretry.TokenBucket] has, or Tokens(context.Context) (float64,
	// error), as contrib/redisretry's Budget has; New fails otherwise. If
	// nil, [Collector.Instrumented] reports the budget of the first
	// Transport it instruments (its Budget, or the default one it
	// creates for itself).
	Budget any

	// NativeHistograms, if set, makes every histogram a Prometheus native
	// histogram too (bucket factor 1.1), beside its classic buckets: a
	// server that scrapes native histograms gets fine-grained quantiles
	// without choosing buckets; one that does not sees the classic ones.
	// If false, classic buckets only.
	NativeHistograms bool

	// DialPhases, if set, makes [Collector.Instrumented] set the
	// Transport's DialTrace, so that the dns, connect and tls phases are
	// recorded. They cost about ten allocations per attempt on a new
	// connection. If false, only the conn_wait and first_byte phases are.
	DialPhases bool

	// ConstLabels are added to every metric, to tell apart the Collectors
	// of several clients in one registry, e.g. {"client": "payments"}.
	// Every Collector of a registry must then have const labels with the
	// same names: Prometheus requires one label set per metric name. If
	// nil, none.
	ConstLabels prometheus.Labels
}

// Collector records the operations and attempts of [httpretry.Transport]s
// as Prometheus metrics, and the events of an idempotency middleware.
//
// Create one per registry with [New] and get an instrumented copy of a
// Transport with [Collector.Instrumented]. Every label
// value comes from a fixed table or from the capped route label, so the
// number of series is bounded however many requests and paths there are
// (the package documentation gives the figures). Recording a success
// allocates nothing once its series exist.
//
// A Collector is safe for concurrent use by multiple goroutines and may
// serve several Transports.
type Collector struct {
	route  func(*http.Request) string
	routes *metricsutil.RouteTable[*routeMetrics]

	dialPhases bool

	operations      *prometheus.CounterVec
	attempts        *prometheus.CounterVec
	started         *prometheus.CounterVec
	inFlight        *prometheus.GaugeVec
	retryWait       *prometheus.HistogramVec
	successes       *prometheus.CounterVec
	timeouts        *prometheus.CounterVec
	opAttempts      *prometheus.HistogramVec
	opWait          *prometheus.HistogramVec
	opDuration      *prometheus.HistogramVec
	attemptDuration *prometheus.HistogramVec
	phases          *prometheus.HistogramVec
	idempotency     *prometheus.CounterVec
	budgetStates    *prometheus.CounterVec
	routeOverflows  prometheus.Counter
	budget          *budgetCollector
	hedges          *hedgeMetrics // hedge.go

	stateChanges      [len(metricsutil.States)]slot[prometheus.Counter]
	phaseObservers    [labels.NumPhases]slot[prometheus.Observer]
	idempotencyEvents []slot[prometheus.Counter] // by index in labels.Events
}

// New creates a Collector and registers its metrics with reg (if nil,
// [prometheus.DefaultRegisterer]). It registers all of them or none: on
// an error, such as metrics already registered with the same names and
// const labels, it unregisters what it registered and returns the error.
func New(reg prometheus.Registerer, opts Options) (*Collector, error) {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	if opts.MaxAttempts > labels.MaxAttemptBuckets {
		return nil, fmt.Errorf("promretry: MaxAttempts %d is above %d", opts.MaxAttempts, labels.MaxAttemptBuckets)
	}
	c := &Collector{route: opts.Route, dialPhases: opts.DialPhases,
		idempotencyEvents: make([]slot[prometheus.Counter], labels.NumEvents)}
	if c.route == nil {
		c.route = metricsutil.HostRoute
	}
	maxRoutes := opts.MaxRoutes
	if maxRoutes <= 0 {
		maxRoutes = DefaultMaxRoutes
	}
	maxAttempts := opts.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = DefaultAttemptBuckets
	}
	c.defineMetrics(opts, maxAttempts)
	c.hedges = newHedgeMetrics(opts.ConstLabels, maxRoutes)
	collectors := []prometheus.Collector{
		c.operations, c.attempts, c.started, c.inFlight, c.retryWait, c.successes, c.timeouts,
		c.opAttempts, c.opWait, c.opDuration, c.attemptDuration,
		c.phases, c.idempotency, c.budgetStates, c.budget, c.routeOverflows,
	}
	collectors = append(collectors, c.hedges.collectors()...)
	if opts.Budget != nil {
		r, ok := metricsutil.ReadBudget(opts.Budget)
		if !ok {
			return nil, fmt.Errorf("promretry: Budget %T has no Tokens method", opts.Budget)
		}
		c.budget.observe(r)
	}
	if err := register(reg, collectors); err != nil {
		return nil, err
	}
	c.routes = metricsutil.NewRouteTable(maxRoutes, c.newRouteMetrics)
	return c, nil
}

// defineMetrics creates the metric vectors.
func (c *Collector) defineMetrics(opts Options, maxAttempts int) {
	constLabels := opts.ConstLabels
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: constLabels}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		o := prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: constLabels}
		if opts.NativeHistograms {
			o.NativeHistogramBucketFactor = nativeBucketFactor
			o.NativeHistogramMaxBucketNumber = nativeMaxBuckets
			o.NativeHistogramMinResetDuration = time.Hour
		}
		return prometheus.NewHistogramVec(o, labels)
	}
	c.operations = counter("httpretry_operations_total",
		"Operations (calls of RoundTrip), by outcome class and stop reason.",
		"method", "route", "outcome", "reason")
	c.attempts = counter("httpretry_attempts_total",
		"Attempts that ended, initial or retry, by result: success, 4xx, 429, 5xx, 529, timeout, idle_timeout, connection_error, canceled, other.",
		"method", "route", "kind", "result")
	c.started = counter("httpretry_attempts_started_total",
		"Attempts sent, counted when they start, initial or retry.", "method", "route", "kind")
	c.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "httpretry_attempts_in_flight", Help: "Attempts sent that have not ended yet.", ConstLabels: constLabels,
	}, []string{"route"})
	c.retryWait = histogram("httpretry_retry_wait_seconds",
		"Waits before a retry, split by cause: retry_after (the part the server asked for) and backoff (the rest, the Transport's own).",
		labels.WaitBuckets, "route", "cause")
	c.successes = counter("httpretry_attempt_successes_total",
		"Attempts that got a response with a status below 400, initial or retry.", "method", "route", "kind")
	c.timeouts = counter("httpretry_attempt_timeouts_total",
		"Attempts that ran out of time: their attempt time limit, or the response idle timeout.",
		"method", "route", "kind")
	c.opAttempts = histogram("httpretry_operation_attempts",
		"Attempts per operation.", labels.AttemptBuckets(maxAttempts), "route")
	c.opWait = histogram("httpretry_operation_wait_seconds",
		"Time an operation spent waiting between attempts.", labels.WaitBuckets, "route")
	c.opDuration = histogram("httpretry_operation_duration_seconds",
		"Time from the start of RoundTrip until it returned, by outcome class.", labels.DurationBuckets, "route", "outcome")
	c.attemptDuration = histogram("httpretry_attempt_duration_seconds",
		"Time from sending an attempt to its response headers or error, by connection use and result.",
		labels.DurationBuckets, "route", "conn", "result")
	c.phases = histogram("httpretry_attempt_phase_seconds",
		"Time attempts spent in each connection phase that happened.", labels.PhaseBuckets, "phase")
	c.idempotency = counter("httpretry_idempotency_events_total",
		"Events of a server's idempotency-key middleware.", "kind")
	c.budgetStates = counter("httpretry_budget_state_changes_total",
		"Changes of a shared retry budget between its shared bucket and its local fallback, by the new state.", "state")
	c.budget = newBudgetCollector(constLabels)
	c.routeOverflows = prometheus.NewCounter(prometheus.CounterOpts{
		Name:        "httpretry_route_overflows_total",
		Help:        "Operations counted under route \"other\" because MaxRoutes distinct routes were already kept.",
		ConstLabels: constLabels,
	})
}

// Native histogram settings: a bucket factor of 1.1 (buckets about 10%
// wide), at most 160 buckets per series, halving the resolution past that.
const (
	nativeBucketFactor = 1.1
	nativeMaxBuckets   = 160
)

// register registers every collector with reg, or none.
func register(reg prometheus.Registerer, collectors []prometheus.Collector) error {
	for i, col := range collectors {
		if err := reg.Register(col); err != nil {
			for _, done := range collectors[:i] {
				reg.Unregister(done)
			}
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) {
				return fmt.Errorf("promretry: metrics already registered (give each Collector of a registry ConstLabels with the same names and distinct values): %w", err)
			}
			return fmt.Errorf("promretry: %w", err)
		}
	}
	return nil
}

// Instrumented returns a new Transport with t's settings whose
// OnAttemptStart, OnAttempt, OnWait and OnDone record every attempt, wait
// and operation in c, after calling the hooks t had; with Options.DialPhases its
// DialTrace is set. t itself is left unchanged, so it may already be in
// use, and each call returns a Transport that counts once: instrumenting
// one Transport twice gives two Transports, not doubled counts. The new
// Transport shares t's connection pool and retry budget, its default ones
// included ([httpretry.Transport.Clone]). When the Collector observes no
// budget yet, it observes that one. A Transport that Instrumented
// returned already records: instrumenting it again counts twice. A nil t
// gives nil.
//
//	client := &http.Client{Transport: metrics.Instrumented(t)}
func (c *Collector) Instrumented(t *httpretry.Transport) *httpretry.Transport {
	if t == nil {
		return nil
	}
	it := t.Clone()
	c.install(it)
	return it
}

// Instrument installs c on t, changing t's OnAttemptStart, OnAttempt,
// OnWait and OnDone (and DialTrace) as [Collector.Instrumented] sets them on its
// copy. It must run before t's first use, since a Transport's fields must
// not change afterwards, and only once per Transport, or everything
// counts twice. A nil t is ignored.
//
// Deprecated: Instrument changes the Transport it is given. Use
// [Collector.Instrumented], which returns an instrumented copy and leaves
// t alone: replace metrics.Instrument(t) with t = metrics.Instrumented(t).
func (c *Collector) Instrument(t *httpretry.Transport) {
	if t == nil {
		return
	}
	c.install(t)
}

// install sets t's hooks to record in c, after the hooks t had.
func (c *Collector) install(t *httpretry.Transport) {
	prevStart, prevAttempt, prevWait, prevDone := t.OnAttemptStart, t.OnAttempt, t.OnWait, t.OnDone
	if c.dialPhases {
		t.DialTrace = true
	}
	if r, ok := metricsutil.TransportBudget(t); ok {
		c.budget.observe(r)
	}
	c.hedges.delays.Watch(t)
	t.OnAttemptStart = func(req *http.Request, n int) {
		if prevStart != nil {
			prevStart(req, n)
		}
		c.OnAttemptStart(req, n)
	}
	t.OnAttempt = func(req *http.Request, a httpretry.Attempt) {
		if prevAttempt != nil {
			prevAttempt(req, a)
		}
		c.OnAttempt(req, a)
	}
	t.OnWait = func(req *http.Request, w httpretry.Wait) {
		if prevWait != nil {
			prevWait(req, w)
		}
		c.OnWait(req, w)
	}
	t.OnDone = func(req *http.Request, o httpretry.Outcome) {
		if prevDone != nil {
			prevDone(req, o)
		}
		c.OnDone(req, o)
	}
}
