package throttle

import (
	"net/http"
	"testing"
	"time"
)

// TestQuota429WithQuotaLeftPausesForAtMostAMinute: a 429 whose headers
// say quota is left (a secondary limit beside the primary quota's
// fields) and give no Retry-After spends the quota until the headers'
// reset, paced by it, when that comes within a minute; a later reset is
// not believed as the quota's end: the quota is spent for a minute, and
// its window's length is not learned from it.
func TestQuota429WithQuotaLeftPausesForAtMostAMinute(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		reset, want time.Duration
		paced       bool
	}{
		{30 * time.Second, 30 * time.Second, true},
		{time.Minute, time.Minute, true},
		{time.Minute + time.Second, time.Minute, false},
		{time.Hour, time.Minute, false},
	} {
		a, ok := quotaAnnounced(RateLimit{Remaining: 5, Reset: tt.reset, HasReset: true}, http.StatusTooManyRequests, 0, false)
		if !ok || !a.spent || a.rl.Reset != tt.want || a.paced != tt.paced {
			t.Errorf("a 429 with 5 left, reset in %v: %+v, %v; want spent for %v, paced %v", tt.reset, a, ok, tt.want, tt.paced)
		}
	}
}
