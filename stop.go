package httpretry

// StopReason says why an operation made no further attempt. Its values are
// a small fixed set of snake_case words, safe to use as a metric label.
type StopReason string

// The reasons an operation stops, in the order the Transport checks them
// ([StopReasons]). Before the first attempt it asks its
// [throttle.Throttle], if it has one, and stops with [Throttled] when
// refused. After each attempt
// it stops with the first of the others that holds, except that a retry
// every rule up to [DeadlineExhausted] allowed is put to the Throttle
// before the budget, and stops with [Throttled] when refused;
// when none does, it retries. A retry that was allowed can still stop
// during its wait: [Canceled] when the caller's context ends, else
// [DeadlineExhausted] when the wait ended with too little time left.
const (
	// Throttled: the Transport's [throttle.Throttle] refused the
	// operation's next attempt, because the destination has been
	// signalling overload or (before the first attempt) said its
	// rate-limit quota is spent. Refused before the first attempt, the
	// operation made none and its error matches [throttle.ErrThrottled];
	// refused before a retry, it returns what its last attempt returned.
	Throttled StopReason = "throttled"
	// Canceled: the caller's context ended (canceled, or its deadline
	// passed) and the attempt ended in an error or in a transient
	// response; or the caller's context ended during a wait.
	Canceled StopReason = "canceled"
	// Final: the attempt succeeded, or failed in a way that is not
	// transient.
	Final StopReason = "final"
	// AttemptsExhausted: the last of MaxAttempts attempts failed.
	AttemptsExhausted StopReason = "attempts_exhausted"
	// NotIdempotent: the request is not safe to repeat, the failure does
	// not prove that it never reached the server, and the server did not
	// say that another attempt is safe.
	NotIdempotent StopReason = "not_idempotent"
	// BodyNotRewindable: the request body was consumed and cannot be sent
	// again (no GetBody, or GetBody failed, and too large or of unknown
	// length to buffer).
	BodyNotRewindable StopReason = "body_not_rewindable"
	// RetryAfterExceedsDeadline: the server's Retry-After plus
	// MinAttemptTime does not fit in the time left. The server's delay is
	// never shortened to fit.
	RetryAfterExceedsDeadline StopReason = "retry_after_exceeds_deadline"
	// RetryAfterTooLong: the server asked for a wait longer than
	// MaxRetryAfter.
	RetryAfterTooLong StopReason = "retry_after_too_long"
	// DeadlineExhausted: the wait before the next attempt plus
	// MinAttemptTime does not fit in the time left, so the Transport
	// stopped rather than start an attempt with no useful time.
	DeadlineExhausted StopReason = "deadline_exhausted"
	// BudgetExhausted: the retry [Budget] had no token for another retry.
	// It is asked last, so that a token is withdrawn only for a retry
	// every other rule allowed.
	BudgetExhausted StopReason = "budget_exhausted"
)

// StopReasons returns every [StopReason], in the order the Transport
// checks them: [Throttled] before the first attempt (and, for a retry,
// just before the budget), the others after each attempt. It is the one list of the stop rules:
// metric adapters register their label values from it, and the
// "Stop reasons" table of docs/rules.md is tested against it.
func StopReasons() []StopReason {
	return []StopReason{
		Throttled, Canceled, Final, AttemptsExhausted, NotIdempotent, BodyNotRewindable,
		RetryAfterExceedsDeadline, RetryAfterTooLong, DeadlineExhausted,
		BudgetExhausted,
	}
}
