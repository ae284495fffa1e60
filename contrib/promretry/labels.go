package promretry

import (
	"errors"
	"net/http"

	"github.com/httpretry/httpretry"
)

// Every label value comes from one of the fixed tables below, looked up
// by a small index, so that the number of series is bounded by
// construction and recording needs no string building.

// Values of the method label: the methods RFC 9110 §9 and RFC 5789
// define; any other method is "OTHER".
var methodNames = [...]string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodDelete, http.MethodConnect, http.MethodOptions,
	http.MethodTrace, http.MethodPatch, "OTHER",
}

const numMethods = len(methodNames)

// methodIndex returns the index of method in methodNames. An empty method
// means GET, as in net/http.
func methodIndex(method string) int {
	switch method {
	case http.MethodGet, "":
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

// Values of the outcome label: what the caller got from an operation.
const (
	outcomeSuccess       = iota // a response with a status below 400
	outcomeErrorResponse        // a response with a status of 400 or more
	outcomeError                // no response
	outcomeUnknown              // no response, and the request may have been applied
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"success", "error_response", "error", "unknown"}

// Values of the reason label: the stop reasons, in the order of
// httpretry's documentation, and "other" for any reason a later version
// of httpretry may add.
var reasonNames = [...]string{
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

const numReasons = len(reasonNames)

func reasonIndex(r httpretry.StopReason) int {
	switch r {
	case httpretry.Final:
		return 0
	case httpretry.AttemptsExhausted:
		return 1
	case httpretry.DeadlineExhausted:
		return 2
	case httpretry.RetryAfterExceedsDeadline:
		return 3
	case httpretry.RetryAfterTooLong:
		return 4
	case httpretry.BudgetExhausted:
		return 5
	case httpretry.Canceled:
		return 6
	case httpretry.BodyNotRewindable:
		return 7
	case httpretry.NotIdempotent:
		return 8
	}
	return numReasons - 1
}

// Values of the kind label of the attempt counters.
const (
	kindInitial = iota // the first attempt of an operation
	kindRetry          // any later attempt
	numKinds
)

var kindNames = [numKinds]string{"initial", "retry"}

func kindIndex(a httpretry.Attempt) int {
	if a.Number > 1 {
		return kindRetry
	}
	return kindInitial
}

// Values of the conn label: whether an attempt opened a connection.
const (
	connNew = iota
	connReused
	connUnknown
	numConns
)

var connNames = [numConns]string{"new", "reused", "unknown"}

func connIndex(c httpretry.ConnUse) int {
	switch c {
	case httpretry.ConnNew:
		return connNew
	case httpretry.ConnReused:
		return connReused
	}
	return connUnknown
}

// Values of the kind label of the timeout counter.
const (
	timeoutAttempt = iota // the attempt ran out of its time (ErrAttemptTimeout)
	timeoutIdle           // no byte arrived for IdleTimeout (ErrIdleTimeout)
	numTimeouts
)

var timeoutNames = [numTimeouts]string{"attempt", "idle"}

// timeoutIndex reports which kind of timeout ended an attempt, if any.
func timeoutIndex(err error) (int, bool) {
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, httpretry.ErrAttemptTimeout):
		return timeoutAttempt, true
	case errors.Is(err, httpretry.ErrIdleTimeout):
		return timeoutIdle, true
	}
	return 0, false
}

// Values of the phase label: where an attempt's time went.
const (
	phaseConnWait = iota
	phaseDNS
	phaseConnect
	phaseTLS
	phaseFirstByte
	numPhases
)

var phaseNames = [numPhases]string{"conn_wait", "dns", "connect", "tls", "first_byte"}

// outcomeIndex classifies an operation by what its caller got: a
// success, an error response, or an error — unknown when the Transport
// judged that a request not safe to repeat may have been applied (the
// error matches [httpretry.ErrOutcomeUnknown]).
func outcomeIndex(o httpretry.Outcome) int {
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
