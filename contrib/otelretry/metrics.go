package otelretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/internal/metricsutil"
	"github.com/httpretry/httpretry/internal/metricsutil/labels"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Metrics records httpretry operations and attempts as OpenTelemetry
// metrics. Its OnAttempt and OnDone methods are the Transport's hooks of
// the same names; [Instrument] installs them on its copy of the
// Transport, chained after any hooks the Transport already has. The instruments:
//
//	httpretry.client.operations               counter   {operation}  method, route, outcome, stop_reason
//	httpretry.client.attempts                 counter   {attempt}    method, route, attempt.kind, attempt.result, error.type
//	httpretry.client.attempts.started         counter   {attempt}    method, route, attempt.kind
//	httpretry.client.attempts.active          updown    {attempt}    route
//	httpretry.client.retry.wait               histogram s            route, wait.cause
//	httpretry.client.attempt.successes        counter   {attempt}    method, route, attempt.kind
//	httpretry.client.attempt.timeouts         counter   {attempt}    method, route, timeout.kind
//	httpretry.client.operation.attempts       histogram {attempt}    route (buckets 1…MaxAttempts)
//	httpretry.client.operation.wait           histogram s            route
//	httpretry.client.operation.duration       histogram s            route, outcome, error.type, http.response.status_code
//	httpretry.client.attempt.duration         histogram s            route, connection, attempt.result, error.type, http.response.status_code
//	httpretry.client.attempt.phase.duration   histogram s            phase
//	httpretry.client.budget.tokens            gauge     {token}      (none)
//	httpretry.client.budget.shared            gauge     1            (none): 1 shared, 0 local (redisretry)
//	httpretry.client.budget.state_changes     counter   {change}     budget.state
//	httpretry.server.idempotency.events       counter   {event}      idempotency.event
//	httpretry.client.route.overflows          counter   {operation}  (none): operations counted as route "other" past MaxRoutes
//	httpretry.client.hedges                   counter   {attempt}    method, route: hedges sent
//	httpretry.client.hedges.won               counter   {operation}  method, route: operations whose response was a hedge's
//	httpretry.client.hedges.losers_canceled   counter   {attempt}    method, route: attempts canceled (or left to finish) when another won
//	httpretry.client.hedges.refused           counter   {attempt}    method, route: hedges the budget or the extra-load cap refused
//	httpretry.client.hedge.delay              gauge     s            httpretry.hedge.key: the delay after which a request would be hedged now
//
// The attempt result is one of success, 4xx (other than 429), 429, 5xx
// (other than 529), 529, timeout, idle_timeout, connection_error,
// canceled and other; each wait is split by cause: retry_after the part the
// server asked for, backoff the rest (the Transport's own backoff, or
// its jitter after the server's delay). error.type is set on what did not
// succeed, to the attempt's result (for an operation, its last
// attempt's), and absent otherwise. http.response.status_code is set on
// the two duration histograms when a response came back, to its code
// (100–599, at most [MaxStatusCodes] distinct codes), and absent
// otherwise.
//
// Every attribute value comes from a fixed table except the route and the
// status code, whose distinct values are capped (see [Options]). Recording allocates nothing
// once a label combination has been seen.
//
// Create one with [NewMetrics]. A Metrics is safe for concurrent use by
// multiple goroutines. It observes at most one budget: give each
// MeterProvider one Metrics with a Budget, or the gauge reports one value
// per Metrics under the same (empty) attribute set.
type Metrics struct {
	routes   *metricsutil.RouteTable[*routeSeries]
	route    func(*http.Request) string
	statuses statusTable

	operations        metric.Int64Counter
	attempts          metric.Int64Counter
	attemptsStarted   metric.Int64Counter
	attemptsActive    metric.Int64UpDownCounter
	retryWait         metric.Float64Histogram
	attemptSuccesses  metric.Int64Counter
	attemptTimeouts   metric.Int64Counter
	operationAttempts metric.Int64Histogram
	operationWait     metric.Float64Histogram
	operationDuration metric.Float64Histogram
	attemptDuration   metric.Float64Histogram
	phaseDuration     metric.Float64Histogram
	idempotencyEvents metric.Int64Counter

	budgetStateChanges metric.Int64Counter
	routeOverflows     metric.Int64Counter
	budgetReg          metric.Registration // nil without a budget
	hedges             *hedgeInstruments   // hedge.go
}

// NewMetrics creates the instruments on opts.MeterProvider's meter. It
// fails only when the provider refuses an instrument.
func NewMetrics(opts Options) (*Metrics, error) {
	meter := opts.meterProvider().Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL),
		metric.WithInstrumentationAttributes(opts.Attributes...))
	key := attribute.Key(keyServer)
	if opts.Route != nil {
		key = keyTemplate
	}
	m := &Metrics{
		routes: metricsutil.NewRouteTable(opts.maxRoutes(), func(r string) *routeSeries {
			return newRouteSeries(key.String(r))
		}),
		route: opts.Route,
	}
	var errs [16]error
	m.operations, errs[0] = meter.Int64Counter("httpretry.client.operations",
		metric.WithUnit("{operation}"),
		metric.WithDescription("Operations (calls of RoundTrip), by how they ended and why they stopped."))
	m.attempts, errs[1] = meter.Int64Counter("httpretry.client.attempts",
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts that ended, initial or retry, by result."))
	m.attemptsStarted, errs[11] = meter.Int64Counter("httpretry.client.attempts.started",
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts sent, counted when they start, initial or retry."))
	m.attemptsActive, errs[12] = meter.Int64UpDownCounter("httpretry.client.attempts.active",
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts sent that have not ended yet."))
	m.retryWait, errs[13] = meter.Float64Histogram("httpretry.client.retry.wait",
		metric.WithUnit("s"),
		metric.WithDescription("Waits before a retry, split by cause: retry_after (the part the server asked for) and backoff (the rest, the Transport's own)."),
		metric.WithExplicitBucketBoundaries(labels.WaitBuckets...))
	m.attemptSuccesses, errs[2] = meter.Int64Counter("httpretry.client.attempt.successes",
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts that got a response with status below 400, initial or retry."))
	m.attemptTimeouts, errs[3] = meter.Int64Counter("httpretry.client.attempt.timeouts",
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts ended by the attempt's time limit or by the response idle timeout."))
	m.operationAttempts, errs[4] = meter.Int64Histogram("httpretry.client.operation.attempts",
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts per operation, the first included."),
		metric.WithExplicitBucketBoundaries(labels.AttemptBuckets(opts.maxAttempts())...))
	m.operationWait, errs[5] = meter.Float64Histogram("httpretry.client.operation.wait",
		metric.WithUnit("s"),
		metric.WithDescription("Time an operation spent waiting between attempts."),
		metric.WithExplicitBucketBoundaries(labels.WaitBuckets...))
	m.operationDuration, errs[6] = meter.Float64Histogram("httpretry.client.operation.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Time from the start of RoundTrip until it returned, every attempt and wait included."),
		metric.WithExplicitBucketBoundaries(labels.DurationBuckets...))
	m.attemptDuration, errs[7] = meter.Float64Histogram("httpretry.client.attempt.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Time from sending an attempt until its response headers or its error, by connection use."),
		metric.WithExplicitBucketBoundaries(labels.DurationBuckets...))
	m.phaseDuration, errs[8] = meter.Float64Histogram("httpretry.client.attempt.phase.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Time attempts spent in each connection phase, recorded when the phase happened."),
		metric.WithExplicitBucketBoundaries(labels.PhaseBuckets...))
	m.idempotencyEvents, errs[9] = meter.Int64Counter("httpretry.server.idempotency.events",
		metric.WithUnit("{event}"),
		metric.WithDescription("What a server's idempotency-key middleware did with each request."))
	m.routeOverflows, errs[15] = meter.Int64Counter("httpretry.client.route.overflows",
		metric.WithUnit("{operation}"),
		metric.WithDescription("Operations reported under route \"other\" because MaxRoutes distinct routes were already kept."))
	if opts.Budget != nil {
		r, ok := metricsutil.ReadBudget(opts.Budget)
		if !ok {
			return nil, fmt.Errorf("otelretry: Budget %T has no Tokens method", opts.Budget)
		}
		errs[10] = m.observeBudget(meter, r)
	}
	m.budgetStateChanges, errs[14] = meter.Int64Counter("httpretry.client.budget.state_changes",
		metric.WithUnit("{change}"),
		metric.WithDescription("Changes of a shared retry budget between its shared bucket and its local fallback, by the new state."))
	var hedgeErr error
	m.hedges, hedgeErr = newHedgeInstruments(meter, opts.maxRoutes())
	if err := errors.Join(append(errs[:], hedgeErr)...); err != nil {
		return nil, fmt.Errorf("otelretry: creating instruments: %w", err)
	}
	return m, nil
}

func (m *Metrics) observeBudget(meter metric.Meter, b metricsutil.BudgetReader) error {
	tokens, err := meter.Float64ObservableGauge("httpretry.client.budget.tokens",
		metric.WithUnit("{token}"),
		metric.WithDescription("Tokens left in the retry budget; a retry needs one."))
	if err != nil {
		return err
	}
	shared, err := meter.Int64ObservableGauge("httpretry.client.budget.shared",
		metric.WithUnit("1"),
		metric.WithDescription("1 while a budget shared through a store (redisretry) uses the shared bucket, 0 while it uses its local fallback."))
	if err != nil {
		return err
	}
	m.budgetReg, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		// A budget whose store cannot be read reports no tokens rather
		// than a made-up value; its state says why.
		if n, err := b.Tokens(ctx); err == nil {
			o.ObserveFloat64(tokens, n)
		}
		if state, ok := b.State(); ok {
			v := int64(0)
			if state == metricsutil.StateShared {
				v = 1
			}
			o.ObserveInt64(shared, v)
		}
		return nil
	}, tokens, shared)
	return err
}

// BudgetStateChange counts a change of a shared budget's state in
// httpretry.client.budget.state_changes{httpretry.budget.state}: state is
// the new one, "shared" or "local" ("other" for any other string). Wire
// it to redisretry's hook:
//
//	OnStateChange: func(s redisretry.State) { metrics.BudgetStateChange(s.String()) },
func (m *Metrics) BudgetStateChange(state string) {
	m.budgetStateChanges.Add(context.Background(), 1, budgetStateOpts[metricsutil.StateIndex(state)]...)
}

// Close stops observing the budget and the hedge delays. The counters and histograms stay
// usable; Close only matters to a program that creates and drops many
// Metrics on one MeterProvider.
func (m *Metrics) Close() error {
	var errs []error
	if m.hedges.reg != nil {
		errs = append(errs, m.hedges.reg.Unregister())
	}
	if m.budgetReg != nil {
		errs = append(errs, m.budgetReg.Unregister())
	}
	return errors.Join(errs...)
}

// series returns the series of req's method and route, and whether the
// route overflowed the cap.
func (m *Metrics) series(req *http.Request) (*routeSeries, *methodSeries, bool) {
	rs, overflowed := m.routes.Get(routeOf(req, m.route))
	return rs, rs.method(labels.Method(req.Method)), overflowed
}

// OnAttemptStart records that an attempt was sent: the started counter,
// and the active attempts, which OnAttempt lowers again. It has the
// signature of [httpretry.Transport.OnAttemptStart].
func (m *Metrics) OnAttemptStart(req *http.Request, number int) {
	ctx := req.Context()
	rs, ms, _ := m.series(req)
	m.attemptsStarted.Add(ctx, 1, ms.started[labels.AttemptKind(number)]...)
	m.attemptsActive.Add(ctx, 1, rs.inFlight...)
}

// OnAttempt records one attempt that ended, and lowers the active
// attempts: install it together with [Metrics.OnAttemptStart]. It has
// the signature of [httpretry.Transport.OnAttempt].
func (m *Metrics) OnAttempt(req *http.Request, a httpretry.Attempt) {
	ctx := req.Context()
	rs, ms, _ := m.series(req)
	kind := labels.AttemptKind(a.Number)
	res := labels.Result(a.Status, a.Err)
	m.attempts.Add(ctx, 1, ms.attempts[kind][res]...)
	m.attemptsActive.Add(ctx, -1, rs.inFlight...)
	if res == labels.ResultSuccess {
		m.attemptSuccesses.Add(ctx, 1, ms.successes[kind]...)
	}
	if t, ok := labels.Timeout(a.Err); ok {
		m.attemptTimeouts.Add(ctx, 1, ms.timeouts[t]...)
	}
	m.attemptDuration.Record(ctx, a.Duration.Seconds(), m.attemptDurationOpts(rs, a, res)...)
	m.recordPhases(ctx, a)
}

// OnWait records one wait once it ended, split by cause, for the time
// actually waited: a wait the caller cut short counts for the time it
// lasted, so that httpretry.client.retry.wait adds up to
// httpretry.client.operation.wait. It has the signature of
// [httpretry.Transport.OnWait].
func (m *Metrics) OnWait(req *http.Request, w httpretry.Wait) {
	ctx := req.Context()
	rs, _, _ := m.series(req)
	for cause, d := range labels.WaitParts(w) {
		if d > 0 {
			m.retryWait.Record(ctx, d.Seconds(), rs.retryWait[cause]...)
		}
	}
}

func (m *Metrics) recordPhases(ctx context.Context, a httpretry.Attempt) {
	for i, d := range labels.PhaseDurations(a) {
		if d > 0 {
			m.phaseDuration.Record(ctx, d.Seconds(), phaseOpts[i]...)
		}
	}
}

// OnDone records one operation. It has the signature of
// [httpretry.Transport.OnDone].
func (m *Metrics) OnDone(req *http.Request, o httpretry.Outcome) {
	ctx := req.Context()
	rs, ms, overflowed := m.series(req)
	if overflowed {
		m.routeOverflows.Add(ctx, 1)
	}
	outcome := labels.Outcome(o)
	m.operations.Add(ctx, 1, ms.operation(outcome, labels.Reason(o.Reason))...)
	m.operationAttempts.Record(ctx, int64(o.Attempts), rs.operationAttempts...)
	m.operationWait.Record(ctx, o.Waited.Seconds(), rs.operationWait...)
	m.operationDuration.Record(ctx, o.Elapsed.Seconds(), m.operationDurationOpts(rs, o, outcome)...)
	m.recordHedges(ctx, req, ms, o)
}

// attemptDurationOpts returns the options of attempt a's duration, whose
// result is res: with its status code when it got a response whose code
// has a slot.
func (m *Metrics) attemptDurationOpts(rs *routeSeries, a httpretry.Attempt, res int) recordOpts {
	conn := labels.Conn(a.Conn)
	if a.Err == nil {
		if slot, ok := m.statuses.slot(a.Status); ok {
			return rs.attemptWithStatus(conn, slot, a.Status)
		}
	}
	return rs.attemptDuration[conn][res]
}

// operationDurationOpts returns the options of operation o's duration,
// whose outcome is outcome: with its status code when it returned a
// response whose code has a slot.
func (m *Metrics) operationDurationOpts(rs *routeSeries, o httpretry.Outcome, outcome int) recordOpts {
	if o.Err == nil {
		if slot, ok := m.statuses.slot(o.Status); ok {
			return rs.operationWithStatus(slot, o.Status)
		}
	}
	return rs.operationDuration[outcome][labels.Result(o.Status, o.Err)]
}
