package throttle

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// observeAt has q read a response of status with header h at now.
func observeAt(q *quotaState, status int, h http.Header, now time.Time) {
	q.observe(&Result{Status: status, Header: h, Sent: now}, now)
}

// TestQuotaNamedAllSpentRefuses: with two named quotas held, an
// operation is admitted while either has requests left, and refused,
// until the earlier reset, once both are spent.
func TestQuotaNamedAllSpentRefuses(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	var q quotaState
	observeAt(&q, 200, http.Header{"Ratelimit": {`"core";r=0;t=60`}}, now)
	observeAt(&q, 200, http.Header{"Ratelimit": {`"search";r=3;t=30`}}, now)
	if _, ok := q.admit(now); !ok {
		t.Fatal("core spent, search with 3 left: refused; want admitted")
	}
	observeAt(&q, 200, http.Header{"Ratelimit": {`"search";r=0;t=30`}}, now)
	reset, ok := q.admit(now.Add(time.Second))
	if ok {
		t.Fatal("both quotas spent: admitted; want refused")
	}
	if want := now.Add(30 * time.Second); !reset.Equal(want) {
		t.Errorf("reset = %v; want the earlier one, %v", reset, want)
	}
	if _, ok := q.admit(now.Add(31 * time.Second)); !ok {
		t.Error("after search's reset: refused; want admitted")
	}
}

// TestQuotaNamesAreBounded: a destination naming ever new quotas holds
// at most maxQuotaNames of them; a new name takes the place of the one
// that resets first.
func TestQuotaNamesAreBounded(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	var q quotaState
	for i := range 3 * maxQuotaNames {
		observeAt(&q, 200, http.Header{"Ratelimit": {fmt.Sprintf(`"n%d";r=5;t=%d`, i, 10+i)}}, now)
	}
	held := map[string]bool{}
	for i := range q.slots {
		if q.slots[i].until.Load() != 0 {
			held[q.slots[i].name] = true
		}
	}
	if len(held) != maxQuotaNames {
		t.Fatalf("%d quotas held (%v); want %d", len(held), held, maxQuotaNames)
	}
	for i := 3*maxQuotaNames - maxQuotaNames; i < 3*maxQuotaNames; i++ {
		if name := fmt.Sprintf("n%d", i); !held[name] {
			t.Errorf("quota %s, among the last announced, not held (held %v)", name, held)
		}
	}
}

// TestQuotaResetRenewsOnlyWhileAnnounced: a window that resets is renewed
// with the quota's size when a response announced the quota during the
// window that ended, whatever responses without rate-limit headers came
// between; a quota no response announced for a whole window is dropped,
// and the next reset admits every operation until a response says more.
func TestQuotaResetRenewsOnlyWhileAnnounced(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	h := http.Header{"Ratelimit": {`"default";r=0;t=1`}, "Ratelimit-Policy": {`"default";q=3;w=1`}}
	admitted := func(q *quotaState, at time.Duration) int {
		n := 0
		for range 10 {
			if _, ok := q.admit(now.Add(at)); ok {
				n++
			}
		}
		return n
	}
	for _, headersStop := range []bool{false, true} {
		var q quotaState
		observeAt(&q, 200, h, now)
		observeAt(&q, 404, http.Header{}, now.Add(500*time.Millisecond))
		if n := admitted(&q, 1500*time.Millisecond); n != 3 {
			t.Errorf("headers stopped %v: %d of 10 admitted at the first reset; want 3", headersStop, n)
		}
		if !headersStop {
			observeAt(&q, 200, h, now.Add(1600*time.Millisecond))
		}
		want := 3
		if headersStop {
			want = 10
		}
		if n := admitted(&q, 2500*time.Millisecond); n != want {
			t.Errorf("headers stopped %v: %d of 10 admitted at the second reset; want %d", headersStop, n, want)
		}
	}
}

// TestQuotaSpentIsNeverEvictedByAFifthName: GitHub names its quotas in
// X-RateLimit-Resource. A process uses five: search is spent (its
// one-minute window resets first), the others have requests left. When
// the fifth name comes, the quota that gives its place is the one that
// resets first among those not spent, never search: forgotten, search
// would be sent to until its server said it was spent again.
func TestQuotaSpentIsNeverEvictedByAFifthName(t *testing.T) {
	t.Parallel()
	now := time.Unix(1765000000, 0)
	gh := func(resource string, remaining, reset int) http.Header {
		return http.Header{
			"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {fmt.Sprint(remaining)},
			"X-Ratelimit-Reset": {fmt.Sprint(now.Unix() + int64(reset))}, "X-Ratelimit-Resource": {resource},
		}
	}
	var q quotaState
	observeAt(&q, 200, gh("core", 4990, 3000), now)
	observeAt(&q, 429, gh("search", 0, 50), now)
	observeAt(&q, 200, gh("graphql", 4999, 3500), now)
	observeAt(&q, 200, gh("code_search", 9, 55), now)
	observeAt(&q, 200, gh("integration_manifest", 4999, 3200), now)
	held := map[string]bool{}
	for i := range q.slots {
		if q.slots[i].until.Load() != 0 {
			held[q.slots[i].name] = true
		}
	}
	if !held["search"] {
		t.Errorf("held %v; want the spent search quota still held", held)
	}
	if held["code_search"] || !held["integration_manifest"] {
		t.Errorf("held %v; want code_search (not spent, resets first) given up for integration_manifest", held)
	}
	if reset, spent, ok := q.spentNamed("search", now.Add(time.Second)); !ok || !spent || !reset.Equal(now.Add(50*time.Second)) {
		t.Errorf("search: spent %v until %v (held %v); want spent until %v", spent, reset, ok, now.Add(50*time.Second))
	}
}
