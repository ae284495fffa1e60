package throttle

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestParseRateLimit(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	type want struct {
		ok        bool
		remaining int64
		reset     time.Duration
		hasReset  bool
	}
	tests := []struct {
		name string
		h    http.Header
		want want
	}{
		{"none", http.Header{}, want{}},
		{"structured, spent", http.Header{"Ratelimit": {`"default";r=0;t=30`}}, want{true, 0, 30 * time.Second, true}},
		{"structured, token name, spaces", http.Header{"Ratelimit": {` default ; r=7 ; t=2 `}}, want{true, 7, 2 * time.Second, true}},
		{"structured, two policies: the least remaining", http.Header{"Ratelimit": {`"hour";r=500;t=3000, "second";r=0;t=1`}}, want{true, 0, time.Second, true}},
		{"structured, equal remaining: the longest reset", http.Header{"Ratelimit": {`"a";r=0;t=1, "b";r=0;t=9`}}, want{true, 0, 9 * time.Second, true}},
		{"structured, comma in a name", http.Header{"Ratelimit": {`"a,b";r=3;t=4`}}, want{true, 3, 4 * time.Second, true}},
		{"structured, no t: the policy's window", http.Header{"Ratelimit": {`"default";r=0`}, "Ratelimit-Policy": {`"default";q=100;w=60`}}, want{true, 0, time.Minute, true}},
		{"structured, no t, no policy", http.Header{"Ratelimit": {`"default";r=0`}}, want{true, 0, 0, false}},
		{"structured, partition key ignored", http.Header{"Ratelimit": {`"default";r=5;t=10;pk=:cHJvamVjdC0xMjM=:`}}, want{true, 5, 10 * time.Second, true}},
		{"structured, negative r", http.Header{"Ratelimit": {`"default";r=-1;t=10`}}, want{}},
		{"structured, 16 digits", http.Header{"Ratelimit": {`"default";r=1234567890123456;t=10`}}, want{}},
		{"structured, 15 digits reset clamped to a day", http.Header{"Ratelimit": {`"default";r=0;t=999999999999999`}}, want{true, 0, 24 * time.Hour, true}},
		{"dictionary form", http.Header{"Ratelimit": {`limit=100, remaining=0, reset=30`}}, want{true, 0, 30 * time.Second, true}},
		{"separate fields", http.Header{"Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"12"}}, want{true, 0, 12 * time.Second, true}},
		{"separate fields, fractional reset", http.Header{"Ratelimit-Remaining": {"3"}, "Ratelimit-Reset": {"1.5"}}, want{true, 3, 1500 * time.Millisecond, true}},
		{"separate fields, bad reset", http.Header{"Ratelimit-Remaining": {"3"}, "Ratelimit-Reset": {"1.5s"}}, want{true, 3, 0, false}},
		{"separate fields, a dot without a fraction", http.Header{"Ratelimit-Remaining": {"3"}, "Ratelimit-Reset": {"1."}}, want{true, 3, 0, false}},
		{"x- fields, seconds", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"45"}}, want{true, 0, 45 * time.Second, true}},
		{"x- fields, epoch", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1796300420"}}, want{true, 0, time.Unix(1796300420, 0).Sub(now), true}},
		{"x- fields, epoch against Date", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1796300420"},
			"Date": {time.Unix(1796300400, 0).UTC().Format(http.TimeFormat)}}, want{true, 0, 20 * time.Second, true}},
		{"x- fields, epoch past", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"1000000000"}}, want{true, 0, 0, true}},
		{"x- fields, just under the epoch threshold: a delay clamped to a day", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"999999999"}}, want{true, 0, 24 * time.Hour, true}},
		{"x- fields, signed", http.Header{"X-Ratelimit-Remaining": {"+1"}}, want{}},
		{"invalid structured falls back to x- fields", http.Header{"Ratelimit": {`garbage`}, "X-Ratelimit-Remaining": {"4"}}, want{true, 4, 0, false}},
		{"empty", http.Header{"Ratelimit": {""}, "X-Ratelimit-Remaining": {""}}, want{}},
		{"duplicate parameter, the last not an integer", http.Header{"Ratelimit": {`"default";r=0;r=x;t=10`}}, want{}},
		{"bare r: a Boolean, not a count", http.Header{"Ratelimit": {`"default";r;t=10`}}, want{}},
		{"dictionary over two lines", http.Header{"Ratelimit": {`limit=100, remaining=0`, `reset=30`}}, want{true, 0, 30 * time.Second, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rl, ok := ParseRateLimit(tt.h, now)
			got := want{ok, rl.Remaining, rl.Reset, rl.HasReset}
			if got != tt.want {
				t.Errorf("ParseRateLimit(%v) = %+v; want %+v", tt.h, got, tt.want)
			}
		})
	}
}

// TestParseRateLimitNamesAndLimits: the quota's name, size and window
// come with its count.
func TestParseRateLimitNamesAndLimits(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		h    http.Header
		want RateLimit
	}{
		{"structured with its policy", http.Header{"Ratelimit": {`"search";r=0;t=60`}, "Ratelimit-Policy": {`"core";q=5000;w=3600, "search";q=30;w=60`}},
			RateLimit{Remaining: 0, Reset: time.Minute, HasReset: true, Limit: 30, Window: time.Minute, Name: "search"}},
		{"structured without a policy", http.Header{"Ratelimit": {`core;r=4;t=6`}},
			RateLimit{Remaining: 4, Reset: 6 * time.Second, HasReset: true, Name: "core"}},
		{"a long name is not kept", http.Header{"Ratelimit": {`"` + strings.Repeat("n", 65) + `";r=4;t=6`}},
			RateLimit{Remaining: 4, Reset: 6 * time.Second, HasReset: true}},
		{"dictionary", http.Header{"Ratelimit": {`limit=100, remaining=7, reset=30`}},
			RateLimit{Remaining: 7, Reset: 30 * time.Second, HasReset: true, Limit: 100}},
		{"draft fields", http.Header{"Ratelimit-Remaining": {"7"}, "Ratelimit-Reset": {"30"}, "Ratelimit-Limit": {"100"}},
			RateLimit{Remaining: 7, Reset: 30 * time.Second, HasReset: true, Limit: 100}},
		{"x- fields with a resource", http.Header{"X-Ratelimit-Remaining": {"7"}, "X-Ratelimit-Reset": {"30"}, "X-Ratelimit-Limit": {"60"}, "X-Ratelimit-Resource": {" search "}},
			RateLimit{Remaining: 7, Reset: 30 * time.Second, HasReset: true, Limit: 60, Name: "search"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, ok := ParseRateLimit(tt.h, now); !ok || got != tt.want {
				t.Errorf("ParseRateLimit(%v) = %+v, %v; want %+v", tt.h, got, ok, tt.want)
			}
		})
	}
}

func TestQuotaUpdate(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	at := func(d time.Duration) int64 { return stamp(now.Add(d)) }
	minute := int64(time.Minute)
	r := func(remaining int64, reset time.Duration) RateLimit {
		return RateLimit{Remaining: remaining, Reset: reset, HasReset: true}
	}
	tests := []struct {
		name                         string
		rl                           RateLimit
		spent                        bool
		held                         heldQuota
		wantUntil, wantLeft, wantLow int64
	}{
		{"first quota", r(40, 10*time.Second), false, heldQuota{}, at(10 * time.Second), 40, 40},
		{"same window, some in flight: the smaller local count", r(40, 10*time.Second), false,
			heldQuota{until: at(10*time.Second + 500*time.Millisecond), left: 30, low: 40, inflight: 2}, at(10*time.Second + 500*time.Millisecond), 30, 40},
		{"same window, some in flight: the smaller server count", r(20, 10*time.Second), false,
			heldQuota{until: at(10 * time.Second), left: 30, low: 32, inflight: 1}, at(10 * time.Second), 20, 20},
		{"same window, nothing in flight: the server's count", r(40, 10*time.Second), false,
			heldQuota{until: at(10 * time.Second), left: 30, low: 41, inflight: 0}, at(10 * time.Second), 40, 40},
		{"same window, nothing in flight, a count the server gave before: kept", r(5, 10*time.Second), false,
			heldQuota{until: at(10 * time.Second), left: 4, low: 5, inflight: 0}, at(10 * time.Second), 5, 5},
		{"same window, nothing in flight, a late answer with more left: the server's least count", r(2, 60*time.Second), false,
			heldQuota{until: at(60 * time.Second), left: 0, low: 0, inflight: 0, period: minute}, at(60 * time.Second), 0, 0},
		{"same window, some in flight, a late answer with more left: the count here", r(5, 60*time.Second), false,
			heldQuota{until: at(60 * time.Second), left: 1, low: 2, inflight: 1, period: minute}, at(60 * time.Second), 1, 2},
		{"a late answer with a reset a little later, in a long window: not a newer one", r(2, 60*time.Second), false,
			heldQuota{until: at(60*time.Second - 5*time.Millisecond), left: 0, low: 0, inflight: 0, period: minute}, at(60*time.Second - 5*time.Millisecond), 0, 0},
		{"the first answer in a renewed window whose size was a guess: the server's count", r(99, 60*time.Minute), false,
			heldQuota{until: at(60 * time.Minute), left: 3, low: 3, inflight: 2, period: int64(time.Hour), guessed: true}, at(60 * time.Minute), 99, 99},
		{"the same once the size was announced: the smaller count here", r(99, 60*time.Minute), false,
			heldQuota{until: at(60 * time.Minute), left: 3, low: 3, inflight: 2, period: int64(time.Hour)}, at(60 * time.Minute), 3, 3},
		{"new window: the server's count", r(100, 60*time.Second), false,
			heldQuota{until: at(time.Second), left: 0, low: 0, inflight: 3}, at(60 * time.Second), 100, 100},
		{"spent: nothing left", r(5, 3*time.Second), true, heldQuota{}, at(3 * time.Second), 0, 0},
		{"spent in the same window", r(5, 3*time.Second), true,
			heldQuota{until: at(3 * time.Second), left: 4, low: 5, inflight: 0}, at(3 * time.Second), 0, 0},
		{"a later reset with more left than here and in flight, a short window: a newer window", r(9, 1500*time.Millisecond), false,
			heldQuota{until: at(800 * time.Millisecond), left: 3, low: 4, inflight: 1, period: int64(time.Second)}, at(1500 * time.Millisecond), 9, 9},
		{"the same with the window's length not known: a newer window", r(9, 1500*time.Millisecond), false,
			heldQuota{until: at(800 * time.Millisecond), left: 3, low: 4, inflight: 1}, at(1500 * time.Millisecond), 9, 9},
		{"an earlier reset with more left: the same window, the smaller count", r(9, 500*time.Millisecond), false,
			heldQuota{until: at(800 * time.Millisecond), left: 3, low: 4, inflight: 1, period: int64(time.Second)}, at(800 * time.Millisecond), 3, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u, l, low := quotaUpdate(tt.rl, tt.spent, tt.held, now, now)
			if u != tt.wantUntil || l != tt.wantLeft || low != tt.wantLow {
				t.Errorf("quotaUpdate = (%d, %d, %d); want (%d, %d, %d)", u, l, low, tt.wantUntil, tt.wantLeft, tt.wantLow)
			}
		})
	}
}

// TestQuotaAnnounced: what a response says of its quota, by status,
// headers and Retry-After. A 429 with quota left and no Retry-After
// (GitHub's secondary rate limit, beside its primary quota's fields with
// 4,990 left and an hour to go) pauses for the shorter of the headers'
// reset and a minute, as GitHub asks, not for the primary quota's hour.
func TestQuotaAnnounced(t *testing.T) {
	t.Parallel()
	withReset := RateLimit{Remaining: 4990, Reset: time.Hour, HasReset: true, Name: "core"}
	spentRL := RateLimit{Remaining: 0, Reset: 20 * time.Second, HasReset: true}
	noReset := RateLimit{Remaining: 0}
	soonReset := RateLimit{Remaining: 3, Reset: 20 * time.Second, HasReset: true}
	tests := []struct {
		name   string
		rl     RateLimit
		status int
		ra     time.Duration
		hasRA  bool
		want   announcement
		wantOK bool
	}{
		{"200 with a reset", withReset, 200, 0, false, announcement{rl: withReset, paced: true}, true},
		{"200 without a reset", noReset, 200, 0, false, announcement{rl: noReset, paced: true}, false},
		{"200 without headers", RateLimit{}, 200, 0, false, announcement{paced: true}, false},
		{"429, headers spent: their reset", spentRL, 429, 20 * time.Second, true, announcement{rl: spentRL, spent: true, paced: true}, true},
		{"429, headers spent, reset a second past Retry-After: their reset", spentRL, 429, 19 * time.Second, true, announcement{rl: spentRL, spent: true, paced: true}, true},
		{"429, headers spent, no Retry-After: their reset", spentRL, 429, 0, false, announcement{rl: spentRL, spent: true, paced: true}, true},
		{"429, headers spent, reset later than Retry-After: the Retry-After", spentRL, 429, 5 * time.Second, true,
			announcement{rl: RateLimit{Reset: 5 * time.Second, HasReset: true}, spent: true}, true},
		{"429, headers spent, reset past: the Retry-After", RateLimit{HasReset: true}, 429, 30 * time.Second, true,
			announcement{rl: RateLimit{Reset: 30 * time.Second, HasReset: true}, spent: true}, true},
		{"429, headers spent, reset a day off: the Retry-After", RateLimit{Reset: maxRateLimitReset, HasReset: true, Limit: 60}, 429, 42 * time.Second, true,
			announcement{rl: RateLimit{Reset: 42 * time.Second, HasReset: true, Limit: 60}, spent: true}, true},
		{"429 with quota left and Retry-After: the pause", withReset, 429, time.Minute, true,
			announcement{rl: RateLimit{Remaining: 4990, Reset: time.Minute, HasReset: true, Name: "core"}, spent: true}, true},
		{"429, unreadable reset, Retry-After: the pause", noReset, 429, 30 * time.Second, true,
			announcement{rl: RateLimit{Reset: 30 * time.Second, HasReset: true}, spent: true}, true},
		{"429, Retry-After only", RateLimit{}, 429, 30 * time.Second, true,
			announcement{rl: RateLimit{Reset: 30 * time.Second, HasReset: true}, spent: true}, true},
		{"429, Retry-After past a day: a day", RateLimit{}, 429, 48 * time.Hour, true,
			announcement{rl: RateLimit{Reset: maxRateLimitReset, HasReset: true}, spent: true}, true},
		{"429 with quota left, no Retry-After: a minute, not the headers' hour", withReset, 429, 0, false,
			announcement{rl: RateLimit{Remaining: 4990, Reset: time.Minute, HasReset: true, Name: "core"}, spent: true}, true},
		{"429 with quota left, no Retry-After, a reset within a minute: the reset", soonReset, 429, 0, false,
			announcement{rl: soonReset, spent: true, paced: true}, true},
		{"429 with nothing", RateLimit{}, 429, 0, false, announcement{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := quotaAnnounced(tt.rl, tt.status, tt.ra, tt.hasRA)
			if ok != tt.wantOK || (ok && got != tt.want) {
				t.Errorf("quotaAnnounced = %+v, %v; want %+v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestQuotaLimitAndPeriod: a quota's size and window length, announced
// or learned from the counts seen (never above the largest count a
// field carries), and the window a reset renews into.
func TestQuotaLimitAndPeriod(t *testing.T) {
	t.Parallel()
	if got := limitOf(RateLimit{Limit: 30, Remaining: 50}, 80); got != 30 {
		t.Errorf("limitOf announced = %d; want 30", got)
	}
	if got := limitOf(RateLimit{Remaining: 9}, 0); got != 10 {
		t.Errorf("limitOf from remaining 9 = %d; want 10", got)
	}
	if got := limitOf(RateLimit{Remaining: 3}, 10); got != 10 {
		t.Errorf("limitOf from remaining 3, 10 seen = %d; want 10", got)
	}
	if got := limitOf(RateLimit{Remaining: maxSFInteger}, 0); got != maxSFInteger {
		t.Errorf("limitOf from the largest remaining a field carries = %d; want %d, no more", got, int64(maxSFInteger))
	}
	if got := periodOf(RateLimit{Window: time.Minute, Reset: time.Hour}, 0); got != int64(time.Minute) {
		t.Errorf("periodOf announced = %v; want 1m", time.Duration(got))
	}
	if got := periodOf(RateLimit{Reset: 3 * time.Second}, int64(2*time.Second)); got != int64(3*time.Second) {
		t.Errorf("periodOf learned = %v; want 3s", time.Duration(got))
	}
	for _, tt := range []struct{ until, now, period, want int64 }{
		{10, 10, 5, 15},
		{10, 14, 5, 15},
		{10, 15, 5, 20},
		{10, 100, 5, 105},
	} {
		if got := renewedReset(tt.until, tt.now, tt.period); got != tt.want {
			t.Errorf("renewedReset(%d, %d, %d) = %d; want %d", tt.until, tt.now, tt.period, got, tt.want)
		}
	}
}

func FuzzParseRateLimit(f *testing.F) {
	for _, s := range []string{`"default";r=0;t=30`, `a;r=1;t=2, "b,c";r=0`, `limit=1, remaining=0, reset=9`, `"x`, `;;;`, `"default";r=999999999999999;t=999999999999999`} {
		f.Add(s, `"default";q=100;w=60`, "0", "1796300420")
	}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, rl, policy, remaining, reset string) {
		h := http.Header{"Ratelimit": {rl}, "Ratelimit-Policy": {policy}}
		got, ok := ParseRateLimit(h, now)
		checkRateLimit(t, got, ok)
		h = http.Header{"X-Ratelimit-Remaining": {remaining}, "X-Ratelimit-Reset": {reset}}
		got, ok = ParseRateLimit(h, now)
		checkRateLimit(t, got, ok)
		checkRateLimitRoundTrip(t, rl, remaining, reset)
	})
}

// checkRateLimitRoundTrip writes a valid RateLimit field from the fuzzed
// strings (each read as numbers where it can be, a name otherwise) and
// checks that the parse gives back what was written: the member with the
// least remaining, split over two field lines, with a decoy member
// without r between them and a duplicate r whose last value counts.
func checkRateLimitRoundTrip(t *testing.T, name, remaining, reset string) {
	t.Helper()
	r1, t1 := fuzzInt(remaining), fuzzInt(reset)
	r2, t2 := fuzzInt(reset), fuzzInt(remaining)
	n1 := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name) + `"`
	lines := []string{
		fmt.Sprintf(`%s;r=%d;r=%d;t=%d, "decoy";t=1`, n1, r1+1, r1, t1),
		fmt.Sprintf(`second;r=%d;t=%d`, r2, t2),
	}
	rl, ok := ParseRateLimit(http.Header{"Ratelimit": lines}, time.Time{})
	wantR, wantT := r1, t1
	if r2 < r1 || (r2 == r1 && t2 > t1) {
		wantR, wantT = r2, t2
	}
	wantReset := maxRateLimitReset
	if wantT < int64(maxRateLimitReset/time.Second) {
		wantReset = time.Duration(wantT) * time.Second
	}
	if !ok || rl.Remaining != wantR || rl.Reset != wantReset || !rl.HasReset {
		t.Errorf("ParseRateLimit(%q) = %+v, %v; want remaining %d, reset %v", lines, rl, ok, wantR, wantReset)
	}
}

// fuzzInt turns a fuzzed string into a valid Structured Field Integer.
func fuzzInt(s string) int64 {
	var n int64
	for i := 0; i < len(s) && i < 14; i++ {
		n = n*10 + int64(s[i]%10)
	}
	return n
}

// checkRateLimit checks the bounds every parse keeps.
func checkRateLimit(t *testing.T, rl RateLimit, ok bool) {
	t.Helper()
	if !ok && rl != (RateLimit{}) {
		t.Errorf("not ok, but %+v", rl)
	}
	if rl.Remaining < 0 || rl.Remaining > maxSFInteger {
		t.Errorf("remaining %d out of [0, %d]", rl.Remaining, int64(maxSFInteger))
	}
	if rl.Reset < 0 || rl.Reset > maxRateLimitReset || (!rl.HasReset && rl.Reset != 0) {
		t.Errorf("reset %v (has %v) out of [0, %v]", rl.Reset, rl.HasReset, maxRateLimitReset)
	}
}

// TestQuotaUpdateAnswerPlacedFromItsSend: an answer was counted by the
// server at some moment between its attempt's send and now, so its
// window is placed from both: one whose reset, counted from the send,
// is the held window's is an answer for it, however late it is read;
// one sent before the held window began says nothing of it.
func TestQuotaUpdateAnswerPlacedFromItsSend(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	at := func(d time.Duration) int64 { return stamp(now.Add(d)) }
	ten := int64(10 * time.Second)
	tests := []struct {
		name                         string
		rl                           RateLimit
		spent                        bool
		held                         heldQuota
		sent                         time.Time
		wantUntil, wantLeft, wantLow int64
	}{
		{"read 0.5s late, just past the reset: the held window's last answer", RateLimit{Remaining: 0, Reset: time.Second, HasReset: true}, false,
			heldQuota{until: at(-100 * time.Millisecond), left: 1, low: 1, inflight: 0, period: ten}, now.Add(-500 * time.Millisecond),
			at(-100 * time.Millisecond), 0, 0},
		{"the same read at once: a new window", RateLimit{Remaining: 0, Reset: time.Second, HasReset: true}, false,
			heldQuota{until: at(-1100 * time.Millisecond), left: 1, low: 1, inflight: 0, period: ten}, now,
			at(time.Second), 0, 0},
		{"sent before the held window began: says nothing of it", RateLimit{Remaining: 0, Reset: time.Second, HasReset: true}, false,
			heldQuota{until: at(9900 * time.Millisecond), left: 5, low: 5, inflight: 1, period: ten}, now.Add(-500 * time.Millisecond),
			at(9900 * time.Millisecond), 5, 5},
		{"a 429 sent before the held window began: the last window's, says nothing of this one", RateLimit{Remaining: 0, Reset: time.Second, HasReset: true}, true,
			heldQuota{until: at(9900 * time.Millisecond), left: 5, low: 5, inflight: 1, period: ten}, now.Add(-500 * time.Millisecond),
			at(9900 * time.Millisecond), 5, 5},
		{"sent when no quota was known (no send time), read just past the reset: the held window's", RateLimit{Remaining: 0, Reset: time.Second, HasReset: true}, false,
			heldQuota{until: at(-100 * time.Millisecond), left: 1, low: 1, inflight: 0, period: ten}, time.Time{},
			at(-100 * time.Millisecond), 0, 0},
		{"a 429 with no send time, its quota known before the held window began: the last window's", RateLimit{Remaining: 0, Reset: time.Second, HasReset: true}, true,
			heldQuota{until: at(2600 * time.Millisecond), left: 4, low: 4, inflight: 0, period: int64(5 * time.Second), knownAt: at(-3500 * time.Millisecond)}, time.Time{},
			at(2600 * time.Millisecond), 4, 4},
		{"a 429 with no send time: spends a window from now", RateLimit{Remaining: 0, Reset: time.Second, HasReset: true}, true,
			heldQuota{until: at(-1100 * time.Millisecond), left: 1, low: 1, inflight: 0, period: ten}, time.Time{},
			at(time.Second), 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u, l, low := quotaUpdate(tt.rl, tt.spent, tt.held, now, tt.sent)
			if u != tt.wantUntil || l != tt.wantLeft || low != tt.wantLow {
				t.Errorf("quotaUpdate = (%v, %d, %d); want (%v, %d, %d)", time.Duration(u-stamp(now)), l, low, time.Duration(tt.wantUntil-stamp(now)), tt.wantLeft, tt.wantLow)
			}
		})
	}
}

// TestParseRateLimitHostileForms: forms a server or a proxy may send
// that the parser must read as the rules of HTTP and Structured Fields
// say, not as a quota left when it is spent.
func TestParseRateLimitHostileForms(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	type want struct {
		ok        bool
		remaining int64
		reset     time.Duration
		hasReset  bool
	}
	tests := []struct {
		name string
		h    http.Header
		want want
	}{
		// A list field may be split over several field lines (RFC 9110
		// §5.3): the spent policy on the second line counts.
		{"two field lines: the least remaining of both", http.Header{"Ratelimit": {`"hour";r=500;t=3000`, `"second";r=0;t=1`}}, want{true, 0, time.Second, true}},
		// RFC 9651 §4.2.3.2: a parameter given twice takes its last value.
		{"duplicate parameter: the last wins", http.Header{"Ratelimit": {`"default";r=5;r=0;t=10`}}, want{true, 0, 10 * time.Second, true}},
		// An sf-string may hold an escaped quote (RFC 9651 §3.3.3): the
		// name ends at the closing quote, not at the escaped one.
		{"escaped quote in a policy name", http.Header{"Ratelimit": {`"a\";r=9";r=0;t=5`}}, want{true, 0, 5 * time.Second, true}},
		// A member without r is ignored, never the policies beside it.
		{"a member without r beside a spent policy", http.Header{"Ratelimit": {`"a";r=0;t=5, "b";t=3`}}, want{true, 0, 5 * time.Second, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rl, ok := ParseRateLimit(tt.h, now)
			got := want{ok, rl.Remaining, rl.Reset, rl.HasReset}
			if got != tt.want {
				t.Errorf("ParseRateLimit(%v) = %+v; want %+v", tt.h, got, tt.want)
			}
		})
	}
}
