// Package overload holds the one rule that says whether a response
// signals that its server is overloaded: the throttle counts it against
// the destination, and spread against the address that answered.
package overload

import (
	"net/http"
	"strings"
)

// statusOverloaded is the 529 some APIs (Anthropic's among them) answer
// when they are overloaded.
const statusOverloaded = 529

// Response reports whether resp says its server is overloaded: a 429,
// 503 or 529, or any other 5xx whose server said "X-Should-Retry: false"
// (it is too busy to be asked again soon). Everything else, a 4xx
// included, is an accept.
func Response(resp *http.Response) bool {
	switch s := resp.StatusCode; {
	case s == http.StatusTooManyRequests, s == http.StatusServiceUnavailable, s == statusOverloaded:
		return true
	case s >= 500:
		v, ok := resp.Header["X-Should-Retry"]
		return ok && len(v) > 0 && strings.EqualFold(strings.TrimSpace(v[0]), "false")
	}
	return false
}
