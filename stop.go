package httpretry

// StopReason says why an operation made no further attempt. Its values are
// a small fixed set of snake_case words, safe to use as a metric label.
type StopReason string

// The reasons an operation stops ([StopReasons]; docs/rules.md, "Stop
// reasons", says when each holds). [Throttled] is asked before the first
// attempt; after an attempt, the others in the order listed, with the
// Throttle's draw just ahead of the budget's token. A wait can still end
// in [Canceled], [DeadlineExhausted], or [Throttled] (a spent quota).
const (
	// Throttled: the [throttle.Throttle] refused the next attempt; before
	// the first, the error matches [throttle.ErrThrottled].
	Throttled StopReason = "throttled"
	// Canceled: the caller's context ended before the first attempt,
	// after a failed attempt or a transient response, or during a wait.
	Canceled StopReason = "canceled"
	// Final: the attempt succeeded, or failed in a way that is not
	// transient.
	Final StopReason = "final"
	// AttemptsExhausted: the last of MaxAttempts attempts failed.
	AttemptsExhausted StopReason = "attempts_exhausted"
	// NotIdempotent: the request is not safe to repeat and may have
	// reached the server.
	NotIdempotent StopReason = "not_idempotent"
	// BodyNotRewindable: the request body cannot be sent again.
	BodyNotRewindable StopReason = "body_not_rewindable"
	// RetryAfterExceedsDeadline: the server's Retry-After plus
	// MinAttemptTime does not fit in the time left.
	RetryAfterExceedsDeadline StopReason = "retry_after_exceeds_deadline"
	// RetryAfterTooLong: the server asked for more than MaxRetryAfter.
	RetryAfterTooLong StopReason = "retry_after_too_long"
	// DeadlineExhausted: the wait plus MinAttemptTime does not fit in the
	// time left.
	DeadlineExhausted StopReason = "deadline_exhausted"
	// BudgetExhausted: the retry [Budget] had no token; it is asked last,
	// so that a token is taken only for a retry every other rule allowed.
	BudgetExhausted StopReason = "budget_exhausted"
)

// StopReasons returns every [StopReason], in the order listed above:
// metric adapters register their label values from it, and the "Stop
// reasons" table of docs/rules.md is tested against it.
func StopReasons() []StopReason {
	return []StopReason{
		Throttled, Canceled, Final, AttemptsExhausted, NotIdempotent, BodyNotRewindable,
		RetryAfterExceedsDeadline, RetryAfterTooLong, DeadlineExhausted,
		BudgetExhausted,
	}
}
