package throttle

import (
	"net/http"
	"testing"
	"time"
)

// TestParseRateLimitHostileForms: forms a server or a proxy may send
// that the parser must read as the rules of HTTP and Structured Fields
// say, not as a quota left when it is spent.
func TestParseRateLimitHostileForms(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	type want struct {
		ok        bool
		remaining int64
		reset     time.Duration
		hasReset  bool
	}
	tests := []struct {
		name string
		h    http.Header
		want want
	}{
		// A list field may be split over several field lines (RFC 9110
		// §5.3): the spent policy on the second line counts.
		{"two field lines: the least remaining of both", http.Header{"Ratelimit": {`"hour";r=500;t=3000`, `"second";r=0;t=1`}}, want{true, 0, time.Second, true}},
		// RFC 9651 §4.2.3.2: a parameter given twice takes its last value.
		{"duplicate parameter: the last wins", http.Header{"Ratelimit": {`"default";r=5;r=0;t=10`}}, want{true, 0, 10 * time.Second, true}},
		// An sf-string may hold an escaped quote (RFC 9651 §3.3.3): the
		// name ends at the closing quote, not at the escaped one.
		{"escaped quote in a policy name", http.Header{"Ratelimit": {`"a\";r=9";r=0;t=5`}}, want{true, 0, 5 * time.Second, true}},
		// A member without r is ignored, never the policies beside it.
		{"a member without r beside a spent policy", http.Header{"Ratelimit": {`"a";r=0;t=5, "b";t=3`}}, want{true, 0, 5 * time.Second, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rl, ok := ParseRateLimit(tt.h, now)
			got := want{ok, rl.Remaining, rl.Reset, rl.HasReset}
			if got != tt.want {
				t.Errorf("ParseRateLimit(%v) = %+v; want %+v", tt.h, got, tt.want)
			}
		})
	}
}
