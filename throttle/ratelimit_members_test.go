package throttle

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRateLimitDictionaryOfOneMemberIsRead: the earlier drafts' RateLimit
// dictionary is read from its first member on, even when that is its
// only one ("remaining=5"): 5 left, no reset announced.
func TestRateLimitDictionaryOfOneMemberIsRead(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	rl, ok := ParseRateLimit(http.Header{"Ratelimit": {"remaining=5"}}, now)
	if !ok || rl.Remaining != 5 || rl.HasReset {
		t.Errorf("ParseRateLimit(RateLimit: remaining=5) = %+v, %v; want 5 left, no reset", rl, ok)
	}
}

// TestRateLimitReadsAtMost16MembersOfAField: a RateLimit field is read
// for its first 16 members (maxRateLimitItems), so that a response
// cannot make each read cost more: 16 policies with 10 left each, then
// a 17th with none left, across two field lines; the 17th is not read,
// and the quota returned has 10 left. The same spent policy among the
// first 16 is the one returned.
func TestRateLimitReadsAtMost16MembersOfAField(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	var members []string
	for i := range 16 {
		members = append(members, `"p`+itoa(int64(i))+`";r=10;t=60`)
	}
	spent := `"late";r=0;t=60`
	h := http.Header{"Ratelimit": {strings.Join(members[:8], ", "), strings.Join(members[8:], ", ") + ", " + spent}}
	if rl, ok := ParseRateLimit(h, now); !ok || rl.Remaining != 10 {
		t.Errorf("17 members, the 17th spent: %+v, %v; want 10 left, the 17th not read", rl, ok)
	}
	h = http.Header{"Ratelimit": {strings.Join(append([]string{spent}, members[:15]...), ", ")}}
	if rl, ok := ParseRateLimit(h, now); !ok || rl.Remaining != 0 || rl.Name != "late" {
		t.Errorf("16 members, the first spent: %+v, %v; want the spent one, 0 left", rl, ok)
	}
}

// TestRateLimitFieldReadingNothingFallsBackToTheXRateLimitFields: a
// response whose RateLimit field holds no quota that can be read is read
// for its X-RateLimit fields instead: 0 left, reset in 30s.
func TestRateLimitFieldReadingNothingFallsBackToTheXRateLimitFields(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	h := http.Header{"Ratelimit": {"garbage"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"30"}}
	if rl, ok := ParseRateLimit(h, now); !ok || rl.Remaining != 0 || rl.Reset != 30*time.Second {
		t.Errorf("ParseRateLimit = %+v, %v; want the X-RateLimit fields' 0 left, reset in 30s", rl, ok)
	}
}

// TestQuotaNameIsKeptUpToItsBound: a quota's name is kept when it has at
// most maxQuotaName bytes, and dropped when longer, so that a response
// cannot make the state it leaves grow.
func TestQuotaNameIsKeptUpToItsBound(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("n", maxQuotaName)
	if got := quotaName(long); got != long {
		t.Errorf("a name of %d bytes: %q; want it kept", maxQuotaName, got)
	}
	if got := quotaName(long + "n"); got != "" {
		t.Errorf("a name of %d bytes: %q; want it dropped", maxQuotaName+1, got)
	}
}

// TestResetDelayIsCappedAtADayToTheNanosecond: a reset of a day and a
// half second, or more, is a day; one just under a day is itself.
func TestResetDelayIsCappedAtADayToTheNanosecond(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	day := int64(maxRateLimitReset / time.Second)
	for _, tt := range []struct {
		secs, nanos int64
		want        time.Duration
	}{
		{day, 500_000_000, maxRateLimitReset},
		{day + 1, 0, maxRateLimitReset},
		{day - 1, 500_000_000, maxRateLimitReset - 500*time.Millisecond},
	} {
		if got := resetDelay(tt.secs, tt.nanos, http.Header{}, now); got != tt.want {
			t.Errorf("resetDelay(%d, %d) = %v; want %v", tt.secs, tt.nanos, got, tt.want)
		}
	}
}
