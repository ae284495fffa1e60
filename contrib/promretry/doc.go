// Package promretry reports the operations and attempts of
// [httpretry.Transport]s as Prometheus metrics, with a label set bounded
// by construction.
//
// Most programs create one [Collector] per registry and use an
// instrumented copy of their Transport:
//
//	metrics, err := promretry.New(reg, promretry.Options{
//		Route: func(r *http.Request) string { return routeTemplate(r) }, // e.g. "/books/{id}"
//	})
//	if err != nil { … }
//	t := &httpretry.Transport{Base: http.DefaultTransport}
//	client := &http.Client{Transport: metrics.Instrumented(t)} // t unchanged; its hooks run first
//
// # Metrics
//
//	httpretry_operations_total{method,route,outcome,reason}  counter: calls of RoundTrip
//	httpretry_attempts_total{method,route,kind,result}       counter: attempts that ended, kind initial|retry
//	httpretry_attempts_started_total{method,route,kind}      counter: attempts, counted when sent
//	httpretry_attempts_in_flight{route}                      gauge: attempts sent and not ended
//	httpretry_retry_wait_seconds{route,cause}                histogram: time waited per wait, split by cause retry_after|backoff
//	httpretry_attempt_successes_total{method,route,kind}     counter: attempts answered below 400
//	httpretry_attempt_timeouts_total{method,route,kind}      counter: kind attempt (ErrAttemptTimeout) | idle (ErrIdleTimeout)
//	httpretry_operation_attempts{route}                      histogram: attempts per operation, buckets 1…MaxAttempts (default 1…10)
//	httpretry_operation_wait_seconds{route}                  histogram: Outcome.Waited, buckets 0, 10ms … 100s
//	httpretry_operation_duration_seconds{route,outcome}      histogram: Outcome.Elapsed, buckets 5ms … 100s
//	httpretry_attempt_duration_seconds{route,conn,result}    histogram: Attempt.Duration by connection new|reused|unknown
//	httpretry_attempt_phase_seconds{phase}                   histogram: conn_wait|dns|connect|tls|first_byte, when it happened
//	httpretry_budget_tokens                                  gauge: the budget's tokens (Options.Budget, else the Transport's)
//	httpretry_budget_shared                                  gauge: a redisretry Budget's state, 1 shared, 0 local
//	httpretry_budget_state_changes_total{state}              counter: [Collector.BudgetStateChange]
//	httpretry_idempotency_events_total{kind}                 counter: [Collector.IdempotencyEvent]
//	httpretry_route_overflows_total                          counter: operations counted as route "other" past MaxRoutes
//	httpretry_hedges_total{method,route}                     counter: hedges sent
//	httpretry_hedges_won_total{method,route}                 counter: operations whose response was a hedge's
//	httpretry_hedge_losers_canceled_total{method,route}      counter: attempts canceled (or left to finish) when another won
//	httpretry_hedges_refused_total{method,route}             counter: hedges the budget or the extra-load cap refused
//	httpretry_hedge_delay_seconds{route}                     gauge: the current hedge delay, by latency key (Hedging.Key)
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
//     was not safe to repeat and may have been applied: exactly when
//     RoundTrip's error matches [httpretry.ErrOutcomeUnknown]).
//   - result (of an attempt): success, 4xx (other than 429), 429, 5xx
//     (other than 529), 529, timeout, idle_timeout, connection_error,
//     canceled, other.
//   - reason: the [httpretry.StopReasons] values, or other.
//   - kind: initial or retry (attempts); attempt or idle (timeouts); the
//     idempotency event kinds, or other. cause: retry_after or backoff.
//   - conn: new, reused, unknown. phase: conn_wait, dns, connect, tls,
//     first_byte.
//
// A series exists only once its label combination has happened. The
// README gives the most series the labels allow, and the PromQL for the
// first-attempt and retry success ratios, which leave a final 4xx out.
//
// # Costs
//
// Recording allocates nothing once a label combination's series exist:
// series are held in per-route arrays indexed by small integers, and
// routes in a map that is read without a lock.
package promretry
