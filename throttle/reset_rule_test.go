package throttle

import (
	"net/http"
	"testing"
	"time"
)

// TestQuotaEveryResetFieldIsOneRuleBoundedByRetryAfter: real APIs'
// spent answers, read by Record as the Transport hands them over. Every
// reset field, whatever its spelling, is a Unix time when it is 10⁹ or
// more, measured from the answer's Date (here an hour behind our clock:
// the server's clock is skewed, its delay still holds). A 429's
// Retry-After bounds the reset: a reset misread (a Unix time in
// milliseconds, clamped to a day) or already past spends the quota for
// the Retry-After, never for a day or for nothing.
func TestQuotaEveryResetFieldIsOneRuleBoundedByRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC)
	date := now.Add(-time.Hour) // the server's Date, its clock an hour behind ours
	epoch := func(d time.Duration) string { return itoa(date.Add(d).Unix()) }
	millis := func(d time.Duration) string { return itoa(date.Add(d).UnixMilli()) }
	tests := []struct {
		name   string
		status int
		h      http.Header
		ra     time.Duration // the Retry-After, 0 for none
		want   time.Duration // how long the quota is spent from now
	}{
		{"GitLab: RateLimit-Reset, a Unix time, and Retry-After agree", 429, http.Header{
			"Ratelimit-Limit": {"60"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {epoch(42 * time.Second)}}, 42 * time.Second, 42 * time.Second},
		{"Twitch: RateLimit-Reset, a Unix time, no Retry-After", 429, http.Header{
			"Ratelimit-Limit": {"800"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {epoch(9 * time.Second)}}, 0, 9 * time.Second},
		{"GitHub: X-RateLimit-Reset, a Unix time, on a 403 with Retry-After 60", 403, http.Header{
			"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {epoch(50 * time.Minute)},
			"X-Ratelimit-Resource": {"core"}}, 60 * time.Second, 60 * time.Second},
		{"GitHub: X-RateLimit-Reset, a Unix time, on a 429 without Retry-After", 429, http.Header{
			"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {epoch(50 * time.Minute)},
			"X-Ratelimit-Resource": {"core"}}, 0, 50 * time.Minute},
		{"Okta: X-Rate-Limit-Reset, a Unix time", 429, http.Header{
			"X-Rate-Limit-Limit": {"600"}, "X-Rate-Limit-Remaining": {"0"}, "X-Rate-Limit-Reset": {epoch(17 * time.Second)}}, 0, 17 * time.Second},
		{"Discord: X-RateLimit-Reset-After, a delay, with Retry-After", 429, http.Header{
			"X-Ratelimit-Limit": {"5"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {epoch(64*time.Second) + ".570"},
			"X-Ratelimit-Reset-After": {"64.57"}}, 65 * time.Second, 64*time.Second + 570*time.Millisecond},
		{"the dictionary form's reset, a Unix time", 429, http.Header{
			"Ratelimit": {"limit=100, remaining=0, reset=" + epoch(30*time.Second)}}, 0, 30 * time.Second},
		{"RateLimit's t, a Unix time", 429, http.Header{
			"Ratelimit": {`"default";r=0;t=` + epoch(25*time.Second)}}, 0, 25 * time.Second},
		{"RateLimit-Reset in Unix milliseconds, bounded by Retry-After", 429, http.Header{
			"Ratelimit-Limit": {"60"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {millis(42 * time.Second)}}, 42 * time.Second, 42 * time.Second},
		{"X-RateLimit-Reset in Unix milliseconds, bounded by Retry-After", 429, http.Header{
			"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {millis(10 * time.Second)}}, 10 * time.Second, 10 * time.Second},
		{"X-Rate-Limit-Reset in Unix milliseconds, bounded by Retry-After", 429, http.Header{
			"X-Rate-Limit-Remaining": {"0"}, "X-Rate-Limit-Reset": {millis(10 * time.Second)}}, 7 * time.Second, 7 * time.Second},
		{"X-RateLimit-Reset already past: the Retry-After", 429, http.Header{
			"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {epoch(-time.Minute)}}, 30 * time.Second, 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			th := &Throttle{draws: func() float64 { return 1 }}
			req, _ := http.NewRequest(http.MethodGet, "https://api.example.test/x", nil)
			d := th.Dest(req)
			h := tt.h.Clone()
			h.Set("Date", date.Format(http.TimeFormat))
			r := Result{Status: tt.status, Header: h, Request: req, Sent: now, Overload: tt.status == 429}
			r.RetryAfter, r.HasRetryAfter = tt.ra, tt.ra > 0
			th.Record(d, &r, fixedClock(now))
			reset, spent := d.quota.spent(now)
			if !spent {
				t.Fatalf("after the answer: not spent; want spent for %v", tt.want)
			}
			if got := reset.Sub(now); got != tt.want {
				t.Errorf("spent for %v; want %v", got, tt.want)
			}
			if _, spent := d.quota.spent(now.Add(tt.want)); spent {
				t.Errorf("at the reset, %v on: still spent", tt.want)
			}
		})
	}
}
