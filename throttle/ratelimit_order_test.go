package throttle

import (
	"testing"
	"time"
)

// TestRateLimitTighterQuotaHasLessLeftOrAsMuchForLonger: of two quotas a
// response announces, the one that binds first, which ParseRateLimit
// returns, has fewer requests left, or as many for longer; two with as
// many left for as long are as tight, and neither binds before the
// other, so the first announced stays first.
func TestRateLimitTighterQuotaHasLessLeftOrAsMuchForLonger(t *testing.T) {
	t.Parallel()
	q := func(left int64, reset time.Duration) RateLimit { return RateLimit{Remaining: left, Reset: reset} }
	for _, tt := range []struct {
		a, b RateLimit
		want bool
	}{
		{q(5, 10*time.Second), q(6, time.Second), true},
		{q(6, time.Second), q(5, 10*time.Second), false},
		{q(5, 20*time.Second), q(5, 10*time.Second), true},
		{q(5, 10*time.Second), q(5, 20*time.Second), false},
		{q(5, 10*time.Second), q(5, 10*time.Second), false},
	} {
		if got := tighter(tt.a, tt.b); got != tt.want {
			t.Errorf("tighter(%d left for %v, %d left for %v) = %v; want %v", tt.a.Remaining, tt.a.Reset, tt.b.Remaining, tt.b.Reset, got, tt.want)
		}
	}
}
