// Package labels holds the values of the labels (Prometheus) and
// attributes (OpenTelemetry) that httpretry's metric adapters record.
//
// Every value comes from a fixed table, looked up by a small index, so
// that the number of series is bounded by construction and recording
// builds no string. Each lookup maps anything it does not know, such as a
// made-up method or a stop reason added by a later version, to the last
// entry of its table. Method, route, outcome and stop reason never carry
// a query string, userinfo, header or body.
//
// The package is exported, not internal, because the adapters are
// modules of their own: a package under internal/ cannot be imported
// across a module boundary.
package labels

import (
	"errors"
	"net/http"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/idempotency"
)

// knownMethods are the methods RFC 9110 §9 and RFC 5789 define, in the
// order of the method index.
var knownMethods = [...]string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodDelete, http.MethodConnect, http.MethodOptions,
	http.MethodTrace, http.MethodPatch,
}

// NumMethods is the number of method values: the known methods and one
// for any other.
const NumMethods = len(knownMethods) + 1

// MethodNames returns the method values, with other as the spelling of
// any method not defined by RFC 9110 or RFC 5789 ("OTHER" in Prometheus,
// "_OTHER" in the OpenTelemetry HTTP conventions).
func MethodNames(other string) [NumMethods]string {
	var names [NumMethods]string
	copy(names[:], knownMethods[:])
	names[NumMethods-1] = other
	return names
}

// Method returns the index of method in [MethodNames]. An empty method
// means GET, as in net/http.
func Method(method string) int {
	if method == "" {
		return 0
	}
	for i, m := range knownMethods {
		if m == method {
			return i
		}
	}
	return NumMethods - 1
}

// Values of the outcome label: what the caller got from an operation.
const (
	OutcomeSuccess       = iota // a response with a status from 1 to 399
	OutcomeErrorResponse        // a response with a status of 400 or more
	OutcomeError                // no response, and nothing that may have been applied
	OutcomeUnknown              // no response to a request that may have been applied
	NumOutcomes
)

// Outcomes are the outcome values, by index.
var Outcomes = [NumOutcomes]string{"success", "error_response", "error", "unknown"}

// Outcome classifies a finished operation as its caller saw it. Err is
// nil exactly when RoundTrip returned a response, so it decides first: a
// 503 drained before a wait that the caller's context then cut short
// leaves Status 503 but gave the caller an error. Unknown is the
// Transport's own verdict, the one [httpretry.ErrOutcomeUnknown] matches.
func Outcome(o httpretry.Outcome) int {
	if o.Err == nil && o.Status >= 400 {
		return OutcomeErrorResponse
	}
	if o.Err == nil && o.Status > 0 {
		return OutcomeSuccess
	}
	if o.Unknown {
		return OutcomeUnknown
	}
	return OutcomeError
}

// Success reports whether an attempt's status counts as success: a
// response that is neither missing nor an error response.
func Success(status int) bool { return status >= 1 && status <= 399 }

// Reasons are the stop reason values: httpretry's, in the order it checks
// them ([httpretry.StopReasons]), then "other" for a reason a later
// version may add.
var Reasons = append(reasonValues(httpretry.StopReasons()), "other")

// NumReasons is the number of stop reason values.
var NumReasons = len(Reasons)

func reasonValues(rs []httpretry.StopReason) []string {
	values := make([]string, len(rs), len(rs)+1)
	for i, r := range rs {
		values[i] = string(r)
	}
	return values
}

// Reason returns the index of r in [Reasons].
func Reason(r httpretry.StopReason) int {
	for i, s := range Reasons[:NumReasons-1] {
		if string(r) == s {
			return i
		}
	}
	return NumReasons - 1
}

// Values of the attempt kind label.
const (
	AttemptInitial = iota // the first attempt of an operation
	AttemptRetry          // any later attempt
	NumAttemptKinds
)

// AttemptKinds are the attempt kind values, by index.
var AttemptKinds = [NumAttemptKinds]string{"initial", "retry"}

// AttemptKind returns the kind of the attempt with the given number
// (counted from 1).
func AttemptKind(number int) int {
	if number > 1 {
		return AttemptRetry
	}
	return AttemptInitial
}

// Values of the connection label: whether an attempt opened a connection.
const (
	ConnNew = iota
	ConnReused
	ConnUnknown
	NumConns
)

// Conns are the connection values, by index.
var Conns = [NumConns]string{"new", "reused", "unknown"}

// Conn returns the index of c in [Conns].
func Conn(c httpretry.ConnUse) int {
	if c == httpretry.ConnNew {
		return ConnNew
	}
	if c == httpretry.ConnReused {
		return ConnReused
	}
	return ConnUnknown
}

// Values of the timeout kind label.
const (
	TimeoutAttempt = iota // the attempt ran out of its time (ErrAttemptTimeout)
	TimeoutIdle           // no byte arrived for IdleTimeout (ErrIdleTimeout)
	NumTimeouts
)

// Timeouts are the timeout kind values, by index.
var Timeouts = [NumTimeouts]string{"attempt", "idle"}

// Timeout reports which kind of timeout ended an attempt, if any.
func Timeout(err error) (int, bool) {
	if err == nil {
		return 0, false
	}
	if errors.Is(err, httpretry.ErrAttemptTimeout) {
		return TimeoutAttempt, true
	}
	if errors.Is(err, httpretry.ErrIdleTimeout) {
		return TimeoutIdle, true
	}
	return 0, false
}

// Values of the phase label: where an attempt's time went, in the order
// of the fields of [httpretry.Attempt].
const (
	PhaseConnWait = iota
	PhaseDNS
	PhaseConnect
	PhaseTLS
	PhaseFirstByte
	NumPhases
)

// Phases are the phase values, by index.
var Phases = [NumPhases]string{"conn_wait", "dns", "connect", "tls", "first_byte"}

// PhaseDurations returns an attempt's phases, by index.
func PhaseDurations(a httpretry.Attempt) [NumPhases]time.Duration {
	return [NumPhases]time.Duration{a.ConnWait, a.DNS, a.Connect, a.TLSHandshake, a.FirstByte}
}

// Events are the values of the idempotency event label: the kinds of
// the idempotency package's events ([idempotency.Kinds], the one list of
// them), then "other" for any other string.
var Events = eventValues(idempotency.Kinds())

// NumEvents is the number of idempotency event values.
var NumEvents = len(Events)

func eventValues(kinds []idempotency.Kind) []string {
	values := make([]string, len(kinds), len(kinds)+1)
	for i, k := range kinds {
		values[i] = string(k)
	}
	return append(values, "other")
}

// Event returns the index of kind in [Events].
func Event(kind string) int {
	for i, k := range Events[:NumEvents-1] {
		if kind == k {
			return i
		}
	}
	return NumEvents - 1
}
