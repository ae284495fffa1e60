package labels

import "github.com/httpretry/httpretry"

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
	ResultCanceled           // the caller canceled
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

// Values of the wait cause label: who set the length of a wait before a
// retry.
const (
	WaitBackoff    = iota // the Transport's own backoff
	WaitRetryAfter        // the server, with Retry-After or Retry-After-Ms
	NumWaitCauses
)

// WaitCauses are the wait cause values, by index.
var WaitCauses = [NumWaitCauses]string{"backoff", "retry_after"}

// WaitCause returns who set the wait scheduled after attempt a, and
// whether there is a wait to record: a Wait above 0. A retry after a zero
// backoff waited for nothing and is not recorded.
func WaitCause(a httpretry.Attempt) (int, bool) {
	if a.RetryAfter > 0 {
		return WaitRetryAfter, true
	}
	return WaitBackoff, a.Wait > 0
}
