// Package serverdelay names the response headers in which a server asks
// its client to wait before it tries again. It is the one list of them:
// httpretry's Transport reads a server's delay from them, and the
// idempotency middleware reads them to tell a conflict that asks to be
// tried again later from an answer it records.
package serverdelay

import "net/http"

// RetryAfter is the standard header (RFC 9110 §10.2.3): delay-seconds or
// an HTTP-date. It is read last.
const RetryAfter = "Retry-After"

// Millisecond lists the millisecond forms of Retry-After that APIs send
// beside it or instead of it, in the order they are read, all before
// Retry-After: Retry-After-Ms (OpenAI, Anthropic) and X-Amz-Retry-After
// (AWS). They are net/http's canonical spellings of "retry-after-ms" and
// "x-amz-retry-after", so that a received header map is indexed with
// them directly, without allocating.
var Millisecond = [...]string{"Retry-After-Ms", "X-Amz-Retry-After"}

// Present reports whether h carries a server's delay in any of these
// headers, valid or not. h must hold canonical names, as a header map
// net/http received does.
func Present(h http.Header) bool {
	for _, name := range Millisecond {
		if len(h[name]) > 0 {
			return true
		}
	}
	return len(h[RetryAfter]) > 0
}
