package throttle

import (
	"net/http"
	"testing"
	"time"
)

// TestQuotaViewDecisions: a request may go when some group held has every
// quota with requests left; else it waits for the first group to open,
// at the latest reset of that group's spent quotas. Every request draws
// from the quotas held only when they form one group.
func TestQuotaViewDecisions(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		v         quotaView
		wantOpen  bool
		wantAt    int64
		wantDrawn uint32
	}{
		{"one quota left", quotaView{held: 1, until: [4]int64{10}, left: [4]int64{2}, group: [4]uint32{1}}, true, 0, 1},
		{"one quota spent", quotaView{held: 1, until: [4]int64{10}, left: [4]int64{0}, group: [4]uint32{1}}, false, 10, 1},
		{"two apart, one spent", quotaView{held: 3, until: [4]int64{10, 20}, left: [4]int64{0, 1}, group: [4]uint32{1, 2}}, true, 0, 0},
		{"two apart, both spent", quotaView{held: 3, until: [4]int64{10, 20}, left: [4]int64{0, 0}, group: [4]uint32{1, 2}}, false, 10, 0},
		{"one group, one spent", quotaView{held: 3, until: [4]int64{10, 20}, left: [4]int64{5, 0}, group: [4]uint32{3, 3}}, false, 20, 3},
		{"one group, both spent", quotaView{held: 3, until: [4]int64{10, 20}, left: [4]int64{0, 0}, group: [4]uint32{3, 3}}, false, 20, 3},
		{"one group, both left", quotaView{held: 3, until: [4]int64{10, 20}, left: [4]int64{1, 1}, group: [4]uint32{3, 3}}, true, 0, 3},
		{"a group's member no longer held", quotaView{held: 2, until: [4]int64{0, 20}, left: [4]int64{0, 1}, group: [4]uint32{3, 3}}, true, 0, 2},
		{"group and loner: group spent", quotaView{held: 7, until: [4]int64{10, 20, 30}, left: [4]int64{0, 4, 1}, group: [4]uint32{3, 3, 4}}, true, 0, 0},
		{"group and loner: all blocked", quotaView{held: 7, until: [4]int64{10, 20, 30}, left: [4]int64{0, 4, 0}, group: [4]uint32{3, 3, 4}}, false, 10, 0},
	} {
		at, ok := tt.v.open()
		if ok != tt.wantOpen || at != tt.wantAt {
			t.Errorf("%s: open() = %d, %v; want %d, %v", tt.name, at, ok, tt.wantAt, tt.wantOpen)
		}
		if got := tt.v.drawn(); got != tt.wantDrawn {
			t.Errorf("%s: drawn() = %b; want %b", tt.name, got, tt.wantDrawn)
		}
	}
}

// TestQuotaGroupTakesFromEach: two policies announced on one response
// form one group; each operation admitted takes one from both counts, so
// concurrent callers stop at the smaller, and the group is refused until
// the later reset of its spent quotas.
func TestQuotaGroupTakesFromEach(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	var q quotaState
	observeAt(&q, 200, http.Header{"Ratelimit": {`"burst";r=5;t=1, "day";r=2;t=100`}}, now)
	admitted := 0
	for range 10 {
		if _, ok := q.admit(now); ok {
			admitted++
		}
	}
	if admitted != 2 {
		t.Errorf("burst 5 left, day 2: %d of 10 admitted; want 2", admitted)
	}
	reset, ok := q.admit(now)
	if want := now.Add(100 * time.Second); ok || !reset.Equal(want) {
		t.Errorf("day spent: admit = %v, %v; want refused until %v", reset, ok, want)
	}
	q.refund(taken{counted: true})
	if _, ok := q.admit(now); !ok {
		t.Error("after a refund: refused; want admitted")
	}
}

// TestParseRateLimitsKeepsEveryPolicy: every policy of a RateLimit field
// is kept, the tightest first (ParseRateLimit's), one per name, at most
// maxQuotaNames.
func TestParseRateLimitsKeepsEveryPolicy(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		field string
		want  []string
	}{
		{`"a";r=5;t=1, "b";r=2;t=100`, []string{"b", "a"}},
		{`"a";r=2;t=1, "b";r=2;t=100`, []string{"b", "a"}},
		{`"a";r=2;t=1, "a";r=1;t=9, "b";r=3`, []string{"a", "b"}},
		{`"a";r=5, "b";r=4, "c";r=3, "d";r=2, "e";r=1, "f";r=9`, []string{"e", "d", "c", "b"}},
		{`"a";t=1, b;r=0;note="x;r=9"`, []string{"b"}},
	} {
		set := parseRateLimits(http.Header{"Ratelimit": {tt.field}}, time.Time{})
		var got []string
		for i := range set.n {
			got = append(got, set.rl[i].Name)
		}
		if len(got) != len(tt.want) {
			t.Errorf("%s: policies %q; want %q", tt.field, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("%s: policies %q; want %q", tt.field, got, tt.want)
				break
			}
		}
		if rl, _ := ParseRateLimit(http.Header{"Ratelimit": {tt.field}}, time.Time{}); rl != set.rl[0] {
			t.Errorf("%s: ParseRateLimit = %+v; want the first kept, %+v", tt.field, rl, set.rl[0])
		}
	}
}

// TestSFParamOutsideStrings: a ";" or "," inside a String parameter,
// escaped quotes included, is the string's content, not a separator.
func TestSFParamOutsideStrings(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		field string
		want  int64
	}{
		{`"d";r=0;n="a;r=9"`, 0},
		{`"d";r=0;n="a\";r=9"`, 0},
		{`"d";r=0;n="a\\";r=9`, 9},
		{`"d";r=0;n="a,b;r=9", "e";r=1`, 0},
		{`"d";n="x;r=0";r=4`, 4},
	} {
		rl, ok := ParseRateLimit(http.Header{"Ratelimit": {tt.field}}, time.Time{})
		if !ok || rl.Remaining != tt.want {
			t.Errorf("ParseRateLimit(%s) = %+v, %v; want remaining %d", tt.field, rl, ok, tt.want)
		}
	}
}

// TestQuotaPausesDestination: a 429 that names no quota, while only named
// quotas are held, pauses the whole destination; one that names a quota,
// or finds an unnamed one held or none held, spends a quota.
func TestQuotaPausesDestination(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	for _, tt := range []struct {
		name string
		h    http.Header
		held []string
		want bool
	}{
		{"Retry-After alone, a named quota held", http.Header{"Retry-After": {"30"}}, []string{"default"}, true},
		{"unnamed X-RateLimit fields, named quotas held", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"60"}}, []string{"core", "search"}, true},
		{"Retry-After alone, an unnamed quota held", http.Header{"Retry-After": {"30"}}, []string{""}, false},
		{"Retry-After alone, an unnamed quota held beside a named one", http.Header{"Retry-After": {"30"}}, []string{"core", ""}, false},
		{"Retry-After alone, none held", http.Header{"Retry-After": {"30"}}, nil, false},
		{"names a quota held", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"60"}, "X-Ratelimit-Resource": {"core"}}, []string{"core", "search"}, false},
		{"names a quota not held", http.Header{"Ratelimit": {`"burst";r=0;t=1`}}, []string{"default"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			set := parseRateLimits(tt.h, now)
			if got := pausesDestination(&set, tt.held); got != tt.want {
				t.Errorf("pausesDestination(%v, held %q) = %v; want %v", tt.h, tt.held, got, tt.want)
			}
		})
	}
}
