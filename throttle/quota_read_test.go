package throttle

import (
	"net/http"
	"testing"
	"time"
)

// TestQuotaWantsHeadersRead pins which responses are read for a quota: a
// 429 always; every response while a quota is held, a response without
// rate-limit fields included; with none held, each until quotaMisses in a
// row had no fields, and again once a sample carries fields.
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
	noReset := plain(200) // fields, but no quota held after it
	noReset.Header.Set("X-RateLimit-Remaining", "5")
	plains := func(n int) []*http.Response {
		h := make([]*http.Response, n)
		for i := range h {
			h[i] = plain(200)
		}
		return h
	}
	tests := []struct {
		name    string
		history []*http.Response // read in turn before the question, when wanted
		sampled *http.Response   // given to sample after the history, when set
		next    *http.Response
		want    bool
	}{
		{"a destination's first response", nil, nil, plain(200), true},
		{"after one without fields, none held", plains(1), nil, plain(200), true},
		{"after 15 without fields", plains(quotaMisses - 1), nil, plain(200), true},
		{"after 16 without fields", plains(quotaMisses), nil, plain(200), false},
		{"after 16 without fields and one with", append(plains(quotaMisses), noReset), nil, plain(200), false},
		{"after 15 without fields, one with, and 15 without", append(append(plains(quotaMisses-1), noReset), plains(quotaMisses-1)...), nil, plain(200), true},
		{"a 429 after 16 without fields", plains(quotaMisses), nil, plain(429), true},
		{"after 16 without fields, a sample with fields", plains(quotaMisses), announcing(200, "5"), plain(200), true},
		{"after 16 without fields, a sample without", plains(quotaMisses), plain(200), plain(200), false},
		{"while a quota is held", []*http.Response{announcing(200, "5")}, nil, plain(200), true},
		{"a 404 without fields while a quota is held", []*http.Response{announcing(200, "5"), plain(404)}, nil, plain(200), true},
		{"16 without fields while a quota is held", append([]*http.Response{announcing(200, "5")}, plains(quotaMisses)...), nil, plain(200), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s Dest
			for _, r := range tt.history {
				if s.quota.wants(r.StatusCode) {
					res := resultOf(r, nil, now, now)
					s.quota.observe(&res, now)
				}
			}
			if tt.sampled != nil {
				s.quota.sample(tt.sampled.Header)
			}
			if got := s.quota.wants(tt.next.StatusCode); got != tt.want {
				t.Errorf("wants = %v; want %v", got, tt.want)
			}
		})
	}
}
