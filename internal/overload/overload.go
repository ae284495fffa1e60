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
// 503 or 529; a 502 or 504, a proxy's word that the server behind it
// refused the connection or did not answer in time (unless the answer
// says "X-Should-Retry: true": the server's own word that the failure is
// passing, not load); an error response (4xx, 5xx) with Envoy's
// x-envoy-overloaded or x-envoy-ratelimited (its local overload and
// rate-limit answers); or
// any other 5xx whose server said "X-Should-Retry: false" (it is too busy
// to be asked again soon). Everything else, a 4xx included, is an accept.
func Response(resp *http.Response) bool {
	switch s := resp.StatusCode; {
	case Served(s):
		return false
	case s == http.StatusTooManyRequests, s == http.StatusServiceUnavailable, s == statusOverloaded:
		return true
	case len(resp.Header["X-Envoy-Overloaded"]) > 0, len(resp.Header["X-Envoy-Ratelimited"]) > 0:
		return true
	case s == http.StatusBadGateway, s == http.StatusGatewayTimeout:
		return !shouldRetryIs(resp.Header, "true")
	case s >= 500:
		return shouldRetryIs(resp.Header, "false")
	}
	return false
}

// shouldRetryIs reports whether h's X-Should-Retry says word.
func shouldRetryIs(h http.Header, word string) bool {
	v, ok := h["X-Should-Retry"]
	return ok && len(v) > 0 && strings.EqualFold(strings.TrimSpace(v[0]), word)
}

// Served reports whether a response of status was served: a 1xx, 2xx or
// 3xx, which signals no overload whatever its header says.
func Served(status int) bool { return status < 400 }
