package httpretry

import (
	"net/http"
	"strings"
	"time"
)

// This file holds the README's rules as FuzzTransport and the fault matrix
// check them: small predicates, each a sentence of "Stop reasons" or
// "Fields and defaults", evaluated on what a test observed. They decide
// nothing and plan no wait; the tests use them to judge what the
// Transport did.

// readmeServerWord returns what a server's should-retry headers say:
// "true", "false", or "" when neither holds either word. X-Should-Retry
// is read first; any other value is ignored.
func readmeServerWord(h http.Header) string {
	for _, name := range []string{"X-Should-Retry", "Stripe-Should-Retry"} {
		switch v := strings.TrimSpace(h.Get(name)); {
		case strings.EqualFold(v, "true"):
			return "true"
		case strings.EqualFold(v, "false"):
			return "false"
		}
	}
	return ""
}

// readmeTransientResponse is "What counts as transient" for a response:
// 408, 429, 500, 502, 503, 504, and 409 for a request with an idempotency
// key when the response carries Retry-After (or Retry-After-Ms) and is not
// "Idempotent-Replayed: true"; on an error response (4xx, 5xx) the
// server's own word comes first; a success is never retried.
func readmeTransientResponse(status int, h http.Header, keyed bool) bool {
	if status >= 400 {
		switch readmeServerWord(h) {
		case "true":
			return true
		case "false":
			return false
		}
	}
	switch status {
	case 408, 429, 500, 502, 503, 504:
		return true
	case 409:
		return keyed && (h.Get("Retry-After") != "" || h.Get("Retry-After-Ms") != "") &&
			!strings.EqualFold(strings.TrimSpace(h.Get("Idempotent-Replayed")), "true")
	}
	return false
}

// readmeVouches reports whether an error response carries the server's
// explicit word that another attempt is safe: the only thing besides a
// dial error that lets a POST without a key go again.
func readmeVouches(status int, h http.Header) bool {
	return status >= 400 && readmeServerWord(h) == "true"
}

// readmeHonoursRetryAfter lists the statuses whose Retry-After (or
// Retry-After-Ms) is a minimum wait: 409, 429, 503 and 529.
func readmeHonoursRetryAfter(status int) bool {
	switch status {
	case 409, 429, 503, 529:
		return true
	}
	return false
}

// readmeWindow is the backoff window of retry r (0 for the first retry):
// min(MaxDelay, BaseDelay·2^r).
func readmeWindow(base, ceiling time.Duration, r int) time.Duration {
	w := base
	for range r {
		if w >= ceiling {
			break
		}
		w *= 2
	}
	return min(w, ceiling)
}

// readmeStop is one row of the README's "Stop reasons" table: a reason
// and, as a predicate on what an attempt met, the sentence that says
// when it holds.
type readmeStop[F any] struct {
	reason StopReason
	when   func(F) bool
}

// readmeFirstStop returns the first row of stops whose sentence holds,
// or "" when none does: "After each attempt the Transport checks, in this
// order, and stops at the first that holds."
func readmeFirstStop[F any](stops []readmeStop[F], f F) StopReason {
	for _, s := range stops {
		if s.when(f) {
			return s.reason
		}
	}
	return ""
}
