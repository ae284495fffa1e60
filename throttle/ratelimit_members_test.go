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
