package throttle

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestParseRateLimitDialectsInTheWild: the rate-limit headers real APIs
// send, as they send them. A reset field given as a Unix time (GitLab's
// and Twitch's RateLimit-Reset, Okta's and X's X-Rate-Limit-Reset,
// Discord's fractional X-RateLimit-Reset) is a time, never a delay of
// decades clamped to a day; Discord's X-RateLimit-Reset-After is a delay
// and comes first, X-RateLimit-Bucket names its quota; Reddit's float counts are counts.
func TestParseRateLimitDialectsInTheWild(t *testing.T) {
	t.Parallel()
	// The responses' Date: every epoch below is a few seconds after it.
	date := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	now := date.Add(3 * time.Second) // our clock, a little ahead
	epoch := func(d time.Duration) string { return itoa(date.Add(d).Unix()) }
	dated := func(h http.Header) http.Header {
		h.Set("Date", date.Format(http.TimeFormat))
		return h
	}
	type want struct {
		remaining int64
		reset     time.Duration
		limit     int64
		name      string
	}
	tests := []struct {
		name string
		h    http.Header
		want want
	}{
		{"GitLab: RateLimit-Reset as a Unix time", dated(http.Header{
			"Ratelimit-Limit": {"60"}, "Ratelimit-Observed": {"67"}, "Ratelimit-Remaining": {"0"},
			"Ratelimit-Reset": {epoch(42 * time.Second)}, "Ratelimit-Resettime": {date.Add(42 * time.Second).Format(http.TimeFormat)},
			"Retry-After": {"42"}}), want{0, 42 * time.Second, 60, ""}},
		{"Twitch: RateLimit-Reset as a Unix time", dated(http.Header{
			"Ratelimit-Limit": {"800"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {epoch(9 * time.Second)}}),
			want{0, 9 * time.Second, 800, ""}},
		{"GitHub: X-RateLimit-Reset as a Unix time, a named resource", dated(http.Header{
			"X-Ratelimit-Limit": {"30"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {epoch(51 * time.Second)},
			"X-Ratelimit-Used": {"30"}, "X-Ratelimit-Resource": {"search"}}), want{0, 51 * time.Second, 30, "search"}},
		{"Okta: X-Rate-Limit-* with a Unix time", dated(http.Header{
			"X-Rate-Limit-Limit": {"600"}, "X-Rate-Limit-Remaining": {"0"}, "X-Rate-Limit-Reset": {epoch(17 * time.Second)}}),
			want{0, 17 * time.Second, 600, ""}},
		{"X (Twitter): x-rate-limit-* with a Unix time", dated(http.Header{
			http.CanonicalHeaderKey("x-rate-limit-limit"): {"900"}, http.CanonicalHeaderKey("x-rate-limit-remaining"): {"12"},
			http.CanonicalHeaderKey("x-rate-limit-reset"): {epoch(14 * time.Minute)}}), want{12, 14 * time.Minute, 900, ""}},
		{"Discord: Reset-After, a fractional delay, comes first", dated(http.Header{
			"X-Ratelimit-Limit": {"5"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {epoch(64*time.Second) + ".570"},
			"X-Ratelimit-Reset-After": {"64.57"}, "X-Ratelimit-Bucket": {"abcd1234"}}), want{0, 64*time.Second + 570*time.Millisecond, 5, "abcd1234"}},
		{"Discord: a fractional Unix time alone", dated(http.Header{
			"X-Ratelimit-Limit": {"5"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {epoch(2*time.Second) + ".250"}}),
			want{0, 2*time.Second + 250*time.Millisecond, 5, ""}},
		{"Reddit: float counts, reset in seconds", http.Header{
			"X-Ratelimit-Used": {"100"}, "X-Ratelimit-Remaining": {"0.0"}, "X-Ratelimit-Reset": {"312"}}, want{0, 312 * time.Second, 0, ""}},
		{"Reddit: a float count rounded down", http.Header{
			"X-Ratelimit-Remaining": {"598.7"}, "X-Ratelimit-Reset": {"312"}}, want{598, 312 * time.Second, 0, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rl, ok := ParseRateLimit(tt.h, now)
			if !ok || !rl.HasReset {
				t.Fatalf("ParseRateLimit = %+v, %v; want a quota with a reset", rl, ok)
			}
			got := want{rl.Remaining, rl.Reset, rl.Limit, rl.Name}
			if got != tt.want {
				t.Errorf("ParseRateLimit = %+v; want %+v", got, tt.want)
			}
		})
	}
}

// itoa formats n in decimal.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
