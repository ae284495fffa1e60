package httpretry

import (
	"net/http"
	"testing"
	"time"
)

// TestQuotaWantsHeadersRead pins which responses are read for a quota: a
// 429 always; every response while a quota is held, a response without
// rate-limit fields included; with none held, the first, and the next
// only while the last one read carried fields.
func TestQuotaWantsHeadersRead(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	plain := func(status int) *http.Response { return &http.Response{StatusCode: status, Header: http.Header{}} }
	announcing := func(status int, left string) *http.Response {
		r := plain(status)
		r.Header.Set("X-RateLimit-Remaining", left)
		r.Header.Set("X-RateLimit-Reset", "60")
		return r
	}
	tests := []struct {
		name    string
		history []*http.Response // read in turn before the question
		next    *http.Response
		want    bool
	}{
		{"a destination's first response", nil, plain(200), true},
		{"after one without fields, none held", []*http.Response{plain(200)}, plain(200), false},
		{"a 429 after one without fields", []*http.Response{plain(200)}, plain(429), true},
		{"while a quota is held", []*http.Response{announcing(200, "5")}, plain(200), true},
		{"a 404 without fields while a quota is held", []*http.Response{announcing(200, "5"), plain(404)}, plain(200), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s throttleState
			initThrottleState(&s)
			for _, r := range tt.history {
				if s.quota.wants(r) {
					s.quota.observe(r, now)
				}
			}
			if got := s.quota.wants(tt.next); got != tt.want {
				t.Errorf("wants = %v; want %v", got, tt.want)
			}
		})
	}
}
