package labels

import (
	"crypto/tls"
	"errors"
	"time"

	"github.com/httpretry/httpretry"
)

// Values of the result label: why an attempt ended as it did, from a
// small fixed set an operator can act on. A status decides when there
// was a response; otherwise the error's class does.
const (
	ResultSuccess     = iota // a response with a status from 1 to 399
	Result4xx                // a 4xx response other than 429: the request itself is refused
	Result429                // 429 Too Many Requests: a quota or rate limit
	Result5xx                // a 5xx response other than 529
	Result529                // 529: the server sheds load (overloaded)
	ResultTimeout            // the attempt's or the operation's time ran out
	ResultIdleTimeout        // no byte of the response arrived for IdleTimeout
	ResultConnection         // refused, reset, broken pipe, cut short, DNS or TLS failure
	ResultCanceled           // the caller canceled, or the attempt lost to a hedge
	ResultOther              // anything else, such as a status of 600 or more
	NumResults
)

// Results are the result values, by index.
var Results = [NumResults]string{
	"success", "4xx", "429", "5xx", "529", "timeout", "idle_timeout",
	"connection_error", "canceled", "other",
}

// errorResults maps [httpretry.ErrorClass]'s classes to results; a class
// not listed is ResultOther.
var errorResults = map[string]int{
	"attempt_timeout":    ResultTimeout,
	"deadline_exceeded":  ResultTimeout,
	"timeout":            ResultTimeout,
	"idle_timeout":       ResultIdleTimeout,
	"canceled":           ResultCanceled,
	"hedge_lost":         ResultCanceled, // not the server failing: another attempt won
	"connection_refused": ResultConnection,
	"connection_reset":   ResultConnection,
	"broken_pipe":        ResultConnection,
	"eof":                ResultConnection,
	"dns":                ResultConnection,
	"tls":                ResultConnection,
}

// Result classifies an attempt, or an operation's last attempt, by its
// status and error. Err decides first: a status left from a response
// drained before the error does not count.
func Result(status int, err error) int {
	if err != nil {
		if r, ok := errorResults[httpretry.ErrorClass(err)]; ok {
			return r
		}
		if connectionFailed(err) {
			return ResultConnection
		}
		return ResultOther
	}
	switch {
	case Success(status):
		return ResultSuccess
	case status == 429:
		return Result429
	case status == 529:
		return Result529
	case status >= 400 && status <= 499:
		return Result4xx
	case status >= 500 && status <= 599:
		return Result5xx
	}
	return ResultOther
}

// connectionFailed reports the connection failures that
// [httpretry.ErrorClass] leaves as "other": those [httpretry.IsTransient]
// recognises only as lost connections (an HTTP/2 stream the server reset,
// a GOAWAY before the response, an idle connection closed under the
// request), and a TLS handshake that failed for another reason than a
// certificate (a plain-HTTP server, an alert from the peer).
func connectionFailed(err error) bool {
	if httpretry.IsTransient(nil, err) {
		// Every transient error ErrorClass names is classified before
		// this: what is left is a connection the server cut.
		return true
	}
	var (
		header tls.RecordHeaderError
		alert  tls.AlertError
	)
	return errors.As(err, &header) || errors.As(err, &alert)
}

// Values of the wait cause label: who asked for a part of a wait before
// a retry.
const (
	WaitBackoff    = iota // the Transport's own backoff, and the jitter it adds after a server's delay
	WaitRetryAfter        // the server, with Retry-After, Retry-After-Ms or X-Amz-Retry-After
	NumWaitCauses
)

// WaitCauses are the wait cause values, by index.
var WaitCauses = [NumWaitCauses]string{"backoff", "retry_after"}

// WaitParts splits a wait, as [httpretry.Transport.OnWait] reports it
// once it ended, by cause: the part of the time waited that the server
// asked for (w.RetryAfter) and the rest, the Transport's own. A wait after
// Retry-After: 2 with 100 ms of jitter is 2 s of retry_after and 0.1 s of
// backoff; cut short by the caller after 0.5 s, it is 0.5 s of
// retry_after and no backoff. The parts add up to the time waited, as
// the waits of an operation add up to its Outcome.Waited. A part of 0 did
// not happen and is not recorded.
func WaitParts(w httpretry.Wait) [NumWaitCauses]time.Duration {
	waited := max(w.Waited, 0)
	server := min(max(w.RetryAfter, 0), waited)
	var parts [NumWaitCauses]time.Duration
	parts[WaitRetryAfter] = server
	parts[WaitBackoff] = waited - server
	return parts
}
