package otelretry

import "github.com/httpretry/httpretry/internal/metricsutil/labels"

// The attribute keys this package sets. Every value comes from a fixed
// table, except the route and the status code, whose distinct values are
// capped.
const (
	keyMethod = "http.request.method"
	// keyTemplate carries the route when Options.Route names it, a
	// template as the HTTP conventions' url.template is; keyServer carries
	// it by default, the request's host, as their server.address does.
	keyTemplate    = "url.template"
	keyServer      = "server.address"
	keyOutcome     = "httpretry.outcome"
	keyStopReason  = "httpretry.stop_reason"
	keyAttemptKind = "httpretry.attempt.kind"
	keyConnection  = "httpretry.connection"
	keyTimeoutKind = "httpretry.timeout.kind"
	keyPhase       = "httpretry.phase"
	keyResult      = "httpretry.attempt.result"
	keyWaitCause   = "httpretry.wait.cause"
	keyBudgetState = "httpretry.budget.state"
	// keyErrorType is the semantic conventions' error.type: set, to the
	// result or outcome class, only on what did not succeed.
	keyErrorType = "error.type"
	// keyStatusCode is the conventions' http.response.status_code, on the
	// duration histograms of what got a response: a code in 100–599, at
	// most MaxStatusCodes distinct ones.
	keyStatusCode = "http.response.status_code"

	keyIdempotencyEvent = "httpretry.idempotency.event"
)

// methods are the values of http.request.method: the methods of RFC 9110
// and PATCH (RFC 5789), then "_OTHER" for anything else, as the HTTP
// semantic conventions require, so that a client sending made-up methods
// cannot grow the number of series. The other attributes take their
// values from the tables of package labels.
var methods = labels.MethodNames("_OTHER")
