package otelretry

import (
	"net/http"

	"github.com/httpretry/httpretry"
)

// The attribute keys this package sets. Every value comes from a fixed
// table, except the route, whose distinct values are capped.
const (
	keyMethod      = "http.request.method"
	keyRoute       = "httpretry.route"
	keyOutcome     = "httpretry.outcome"
	keyStopReason  = "httpretry.stop_reason"
	keyAttemptKind = "httpretry.attempt.kind"
	keyConnection  = "httpretry.connection"
	keyTimeoutKind = "httpretry.timeout.kind"
	keyPhase       = "httpretry.phase"

	keyIdempotencyEvent = "httpretry.idempotency.event"
)

// methods are the values of http.request.method: the methods of RFC 9110
// and PATCH (RFC 5789), then "_OTHER" for anything else, as the HTTP
// semantic conventions require, so that a client sending made-up methods
// cannot grow the number of series.
var methods = [...]string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodDelete, http.MethodConnect, http.MethodOptions,
	http.MethodTrace, http.MethodPatch, "_OTHER",
}

const numMethods = len(methods)

// methodIndex returns the index in methods of a request's method. An
// empty method means GET, as in net/http.
func methodIndex(m string) int {
	switch m {
	case "", http.MethodGet:
		return 0
	case http.MethodHead:
		return 1
	case http.MethodPost:
		return 2
	case http.MethodPut:
		return 3
	case http.MethodDelete:
		return 4
	case http.MethodConnect:
		return 5
	case http.MethodOptions:
		return 6
	case http.MethodTrace:
		return 7
	case http.MethodPatch:
		return 8
	}
	return numMethods - 1
}

// Outcome classes: how an operation ended, seen from its caller.
const (
	outcomeSuccess       = iota // a response with status 1..399
	outcomeErrorResponse        // a response with status >= 400
	outcomeError                // no response, and nothing was applied or it is safe to repeat
	outcomeUnknown              // no response to a request that may have been applied
	numOutcomes
)

var outcomes = [numOutcomes]string{"success", "error_response", "error", "unknown"}

// reasons are the values of httpretry.stop_reason: the StopReason
// constants, then "other" for a reason this version does not know.
var reasons = [...]string{
	string(httpretry.Final),
	string(httpretry.AttemptsExhausted),
	string(httpretry.DeadlineExhausted),
	string(httpretry.RetryAfterExceedsDeadline),
	string(httpretry.RetryAfterTooLong),
	string(httpretry.BudgetExhausted),
	string(httpretry.Canceled),
	string(httpretry.BodyNotRewindable),
	string(httpretry.NotIdempotent),
	"other",
}

const numReasons = len(reasons)

func reasonIndex(r httpretry.StopReason) int {
	for i, s := range reasons[:numReasons-1] {
		if string(r) == s {
			return i
		}
	}
	return numReasons - 1
}

// Attempt kinds, connection uses, timeout kinds and phases.
var (
	attemptKinds = [2]string{"initial", "retry"}
	connections  = [3]string{"new", "reused", "unknown"}
	timeoutKinds = [2]string{"attempt", "idle"}
	phases       = [5]string{"conn_wait", "dns", "connect", "tls", "first_byte"}
)

func attemptKindIndex(number int) int {
	if number <= 1 {
		return 0
	}
	return 1
}

func connectionIndex(c httpretry.ConnUse) int {
	switch c {
	case httpretry.ConnNew:
		return 0
	case httpretry.ConnReused:
		return 1
	}
	return 2
}

// statusSuccess reports a status that counts as success: a response that
// is neither missing nor an error response.
func statusSuccess(status int) bool { return status >= 1 && status <= 399 }

// outcomeClass classifies a finished operation as its caller saw it. Err
// is nil exactly when RoundTrip returned a response, so it decides first:
// a 503 drained before a wait that the caller's context then cut short
// leaves Status 503 but gave the caller an error. Unknown is the
// Transport's own verdict, the one ErrOutcomeUnknown matches.
func outcomeClass(o httpretry.Outcome) int {
	switch {
	case o.Err == nil && o.Status >= 400:
		return outcomeErrorResponse
	case o.Err == nil && o.Status > 0:
		return outcomeSuccess
	case o.Unknown:
		return outcomeUnknown
	}
	return outcomeError
}
