// Package promretry reports the operations and attempts of
// [httpretry.Transport]s as Prometheus metrics, with a label set bounded
// by construction.
//
// Most programs create one [Collector] per registry and install it on the
// Transport before its first use:
//
//	metrics, err := promretry.New(reg, promretry.Options{
//		Route: func(r *http.Request) string { return routeTemplate(r) }, // e.g. "/books/{id}"
//		Budget: budget,                                                 // the Transport's *httpretry.TokenBucket
//	})
//	if err != nil { … }
//	t := &httpretry.Transport{Base: http.DefaultTransport, Budget: budget}
//	metrics.Instrument(t) // chains with OnAttempt and OnDone already set
//	client := &http.Client{Transport: t}
//
// # Metrics
//
//	httpretry_operations_total{method,route,outcome,reason}  counter: calls of RoundTrip
//	httpretry_attempts_total{method,route,kind}              counter: attempts, kind initial|retry
//	httpretry_attempt_successes_total{method,route,kind}     counter: attempts answered below 400
//	httpretry_attempt_timeouts_total{method,route,kind}      counter: kind attempt (ErrAttemptTimeout) | idle (ErrIdleTimeout)
//	httpretry_operation_attempts{route}                      histogram: attempts per operation, buckets 1…MaxAttempts
//	httpretry_operation_wait_seconds{route}                  histogram: Outcome.Waited, buckets 0, 10ms … 30s
//	httpretry_operation_duration_seconds{route}              histogram: Outcome.Elapsed, buckets 5ms … 10s
//	httpretry_attempt_duration_seconds{route,conn}           histogram: Attempt.Duration by connection new|reused|unknown
//	httpretry_attempt_phase_seconds{phase}                   histogram: conn_wait|dns|connect|tls|first_byte, when it happened
//	httpretry_budget_tokens                                  gauge: Options.Budget's Tokens()
//	httpretry_idempotency_events_total{kind}                 counter: [Collector.IdempotencyEvent]
//
// # Labels
//
// Every label value comes from a fixed table, except route:
//
//   - method: GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE,
//     PATCH, or OTHER (10 values).
//   - route: the value of Options.Route (by default the request's host),
//     at most Options.MaxRoutes distinct values (default 100); any
//     further value, and any empty, overlong (over 128 bytes) or invalid
//     UTF-8 one, is "other" (101 values by default). Paths, query
//     strings, userinfo, headers and bodies never become label values.
//   - outcome: success (a response below 400), error_response (400 and
//     above), error (no response), unknown (no response, and the request
//     was not safe to repeat and may have been applied: see below).
//   - reason: the [httpretry.StopReasons] values, or other.
//   - kind: initial or retry (attempts); attempt or idle (timeouts); the
//     Event constants (idempotency).
//   - conn: new, reused, unknown. phase: conn_wait, dns, connect, tls,
//     first_byte.
//
// A series exists only once its label combination has happened. With the
// defaults the most series there can ever be are, per route value: 400
// operation series (10 methods × 4 outcomes × 10 reasons; with the
// default classification only 21 (outcome, reason) pairs occur, so 210),
// 60 attempt, success and timeout series, and 76 histogram series
// (attempts 3 buckets + 3, wait 11 + 3, duration 11 + 3, attempt duration
// 3 × (11 + 3)); plus 70 phase series, 12 idempotency series and the
// gauge. That is at most 536 × 101 + 83 = 54,219 series, and in practice
// a few per route: a route used by one method on a healthy service has
// about 70.
//
// # Queries
//
// Ratios are one PromQL query away:
//
//	# first-attempt success ratio
//	sum(rate(httpretry_attempt_successes_total{kind="initial"}[5m]))
//	  / sum(rate(httpretry_attempts_total{kind="initial"}[5m]))
//	# retry success ratio
//	sum(rate(httpretry_attempt_successes_total{kind="retry"}[5m]))
//	  / sum(rate(httpretry_attempts_total{kind="retry"}[5m]))
//	# retries per operation
//	sum(rate(httpretry_attempts_total{kind="retry"}[5m])) / sum(rate(httpretry_operations_total[5m]))
//	# final success ratio
//	sum(rate(httpretry_operations_total{outcome="success"}[5m])) / sum(rate(httpretry_operations_total[5m]))
//	# operations stopped by the deadline, the budget, the caller
//	sum by (reason) (rate(httpretry_operations_total{reason=~"deadline_exhausted|retry_after_exceeds_deadline|budget_exhausted|canceled"}[5m]))
//	# requests that may have been applied: reconcile them
//	sum(rate(httpretry_operations_total{outcome="unknown"}[5m]))
//
// # Unknown outcomes
//
// An operation is counted with outcome "unknown" when the Transport says
// so in [httpretry.Outcome.Unknown]: it ended without a response, the
// request was not safe to repeat, and its last attempt may have reached
// the server — exactly when RoundTrip's error matches
// [httpretry.ErrOutcomeUnknown].
//
// # Costs
//
// Recording allocates nothing once a label combination's series exist:
// series are held in per-route arrays indexed by small integers, and
// routes in a map that is read without a lock.
package promretry
