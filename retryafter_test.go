package httpretry

import (
	"context"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 9, 5, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		value  string
		date   string // the response's Date header
		want   time.Duration
		wantOK bool
	}{
		{name: "seconds", value: "120", want: 120 * time.Second, wantOK: true},
		{name: "zero seconds", value: "0", want: 0, wantOK: true},
		{name: "leading zeros", value: "007", want: 7 * time.Second, wantOK: true},
		{name: "surrounding spaces", value: " 3\t", want: 3 * time.Second, wantOK: true},
		{name: "IMF-fixdate", value: "Sat, 05 Sep 2026 12:00:01 GMT", want: time.Second, wantOK: true},
		{name: "RFC 850 date", value: "Saturday, 05-Sep-26 12:00:30 GMT", want: 30 * time.Second, wantOK: true},
		{name: "asctime date", value: "Sat Sep  5 12:01:00 2026", want: time.Minute, wantOK: true},
		{name: "past date is zero", value: "Sat, 05 Sep 2026 11:00:00 GMT", want: 0, wantOK: true},
		{name: "date against server Date", value: "Sat, 05 Sep 2026 12:00:10 GMT",
			date: "Sat, 05 Sep 2026 12:00:08 GMT", want: 2 * time.Second, wantOK: true},
		{name: "skewed server clock ahead", value: "Sat, 05 Sep 2026 13:00:05 GMT",
			date: "Sat, 05 Sep 2026 13:00:00 GMT", want: 5 * time.Second, wantOK: true},
		{name: "invalid Date header falls back to now", value: "Sat, 05 Sep 2026 12:00:04 GMT",
			date: "yesterday", want: 4 * time.Second, wantOK: true},
		{name: "huge seconds saturate", value: "999999999999999999999", want: maxDuration, wantOK: true},
		{name: "just over the limit saturates", value: "9223372037", want: maxDuration, wantOK: true},
		{name: "largest representable", value: "9223372036", want: 9223372036 * time.Second, wantOK: true},
		{name: "far future date", value: "Fri, 31 Dec 9999 23:59:59 GMT", want: maxDuration, wantOK: true},
		{name: "missing", value: "", want: 0, wantOK: false},
		{name: "negative", value: "-5", want: 0, wantOK: false},
		{name: "plus sign", value: "+5", want: 0, wantOK: false},
		{name: "fractional", value: "1.5", want: 1500 * time.Millisecond, wantOK: true},
		{name: "a whole number with a fraction, as Shopify sends it", value: "2.0", want: 2 * time.Second, wantOK: true},
		{name: "a fraction past the nanosecond", value: "0.0000000019", want: 1, wantOK: true},
		{name: "a lone dot", value: ".", want: 0, wantOK: false},
		{name: "no whole part", value: ".5", want: 0, wantOK: false},
		{name: "two dots", value: "1.2.3", want: 0, wantOK: false},
		{name: "garbage", value: "soon", want: 0, wantOK: false},
		{name: "digits then garbage", value: "12abc", want: 0, wantOK: false},
		{name: "huge then garbage", value: "99999999999999999999x", want: 0, wantOK: false},
		{name: "inner space", value: "1 2", want: 0, wantOK: false},
		{name: "non-GMT zone", value: "Sat, 05 Sep 2026 12:00:01 PST", want: 0, wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if tt.value != "" {
				h.Set("Retry-After", tt.value)
			}
			if tt.date != "" {
				h.Set("Date", tt.date)
			}
			got, ok := ParseRetryAfter(h, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestParseRetryAfterNilHeader(t *testing.T) {
	t.Parallel()
	if got, ok := ParseRetryAfter(nil, time.Now()); got != 0 || ok {
		t.Errorf("ParseRetryAfter(nil) = %v, %v; want 0, false", got, ok)
	}
}

// TestParseRetryAfterMs: a valid millisecond header, Retry-After-Ms or
// X-Amz-Retry-After (milliseconds, fractions allowed, the same grammar),
// comes before Retry-After; a malformed one is ignored and Retry-After is
// read instead.
func TestParseRetryAfterMs(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 9, 5, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		ms     string
		after  string
		want   time.Duration
		wantOK bool
	}{
		{"whole milliseconds", "800", "", 800 * time.Millisecond, true},
		{"fraction", "1.5", "", 1500 * time.Microsecond, true},
		{"leading dot", ".25", "", 250 * time.Microsecond, true},
		{"trailing dot", "5.", "", 5 * time.Millisecond, true},
		{"digits past the nanosecond are dropped", "0.0000019", "", 1 * time.Nanosecond, true},
		{"zero", "0", "", 0, true},
		{"blanks", " 20\t", "", 20 * time.Millisecond, true},
		{"precedence over Retry-After", "800", "3", 800 * time.Millisecond, true},
		{"negative: Retry-After instead", "-5", "3", 3 * time.Second, true},
		{"NaN: Retry-After instead", "NaN", "3", 3 * time.Second, true},
		{"Inf", "Inf", "", 0, false},
		{"exponent", "1e3", "", 0, false},
		{"two dots", "1.2.3", "", 0, false},
		{"a lone dot", ".", "", 0, false},
		{"empty", "", "2", 2 * time.Second, true},
		{"overflowing: Retry-After instead", "99999999999999999999", "4", 4 * time.Second, true},
		{"the largest that fits", "9223372036854", "", 9223372036854 * time.Millisecond, true},
		{"one more does not fit", "9223372036855", "", 0, false},
		{"its fraction does not fit either", "9223372036854.9", "", 0, false},
		{"exactly the largest Duration", "9223372036854.775807", "", maxDuration, true},
		{"one nanosecond more", "9223372036854.775808", "", 0, false},
		{"the sixth fractional digit is a nanosecond", "1.000001", "", time.Millisecond + 1, true},
		{"huge then garbage is invalid", "99999999999999999999x", "4", 4 * time.Second, true},
	}
	for _, name := range []string{"Retry-After-Ms", "X-Amz-Retry-After"} {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				h := http.Header{}
				if tt.ms != "" {
					h[name] = []string{tt.ms}
				}
				if tt.after != "" {
					h.Set("Retry-After", tt.after)
				}
				got, ok := ParseRetryAfter(h, now)
				if got != tt.want || ok != tt.wantOK {
					t.Errorf("ParseRetryAfter(%s %q, Retry-After %q) = %v, %v; want %v, %v", name, tt.ms, tt.after, got, ok, tt.want, tt.wantOK)
				}
			})
		}
	}
	// As net/http receives them: any case, canonicalized.
	for _, name := range []string{"retry-after-ms", "x-amz-retry-after", "X-AMZ-RETRY-AFTER"} {
		h := http.Header{}
		h.Add(name, "800")
		if got, ok := ParseRetryAfter(h, now); got != 800*time.Millisecond || !ok {
			t.Errorf("%s: got %v, %v; want 800ms", name, got, ok)
		}
	}
}

// TestParseRetryAfterMillisecondHeadersInOrder: Retry-After-Ms is read
// before X-Amz-Retry-After, and both before Retry-After; the first valid
// one counts, whichever comes later in the response.
func TestParseRetryAfterMillisecondHeadersInOrder(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 9, 5, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name  string
		ms    string // Retry-After-Ms, if not empty
		amz   string // X-Amz-Retry-After, if not empty
		after string // Retry-After, if not empty
		want  time.Duration
	}{
		{"both valid: Retry-After-Ms", "800", "1200", "3", 800 * time.Millisecond},
		{"Retry-After-Ms malformed: X-Amz-Retry-After", "soon", "1200", "3", 1200 * time.Millisecond},
		{"X-Amz-Retry-After alone", "", "250", "", 250 * time.Millisecond},
		{"X-Amz-Retry-After before Retry-After", "", "250", "3", 250 * time.Millisecond},
		{"X-Amz-Retry-After malformed: Retry-After", "", "-5", "3", 3 * time.Second},
		{"both malformed: Retry-After", "x", "y", "3", 3 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for name, v := range map[string]string{"Retry-After-Ms": tt.ms, "X-Amz-Retry-After": tt.amz, "Retry-After": tt.after} {
				if v != "" {
					h.Set(name, v)
				}
			}
			if got, ok := ParseRetryAfter(h, now); got != tt.want || !ok {
				t.Errorf("ParseRetryAfter(%v) = %v, %v; want %v, true", h, got, ok, tt.want)
			}
		})
	}
}

// FuzzParseRetryAfterMs: any Retry-After-Ms value gives a delay ≥ 0 that
// agrees with strconv.ParseFloat's reading of a plain decimal (within a
// nanosecond), or is ignored in favour of Retry-After.
func FuzzParseRetryAfterMs(f *testing.F) {
	for _, v := range []string{"800", "1.5", ".5", "5.", "-1", "NaN", "Inf", "1e3", "", ".", "99999999999999999999", "9223372036854.775807", " 7 "} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{"Retry-After-Ms": {v}, "Retry-After": {"7"}}
		d, ok := ParseRetryAfter(h, time.Time{})
		if !ok || d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; want a delay ≥ 0 (Retry-After's 7s at worst)", v, d, ok)
		}
		trimmed := strings.Trim(v, " \t")
		plain := trimmed != "" && trimmed != "." && strings.Trim(trimmed, "0123456789.") == "" && strings.Count(trimmed, ".") <= 1
		ms, err := strconv.ParseFloat(trimmed, 64)
		switch {
		case plain && err == nil && ms*1e6 < float64(maxDuration)*0.999:
			want := time.Duration(ms * 1e6)
			if diff := d - want; diff < -time.Microsecond || diff > time.Microsecond {
				t.Fatalf("Retry-After-Ms %q gave %v; ParseFloat reads %v", v, d, want)
			}
		case !plain:
			if d != 7*time.Second {
				t.Fatalf("malformed Retry-After-Ms %q gave %v; want Retry-After's 7s", v, d)
			}
		}
	})
}

// TestServerDelayHonouredPerStatus: the server's delay is honoured on
// 409 (a keyed request still in progress), 429, 503 and 529, and ignored
// on other transient statuses, where the backoff alone applies.
func TestServerDelayHonouredPerStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status   int
		header   http.Header
		wantWait time.Duration
	}{
		{409, http.Header{"Retry-After": {"1"}}, time.Second},
		{429, http.Header{"Retry-After-Ms": {"800"}}, 800 * time.Millisecond},
		{503, http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{529, http.Header{"Retry-After-Ms": {"1500.5"}, "Retry-After": {"9"}}, 1500500 * time.Microsecond},
		{503, http.Header{"X-Amz-Retry-After": {"1200"}, "Retry-After": {"9"}}, 1200 * time.Millisecond},
		{409, http.Header{"X-Amz-Retry-After": {"700"}}, 700 * time.Millisecond},
		{500, http.Header{"X-Amz-Retry-After": {"3000"}}, 0},
		{500, http.Header{"Retry-After": {"3"}}, 0},
	} {
		t.Run(strconv.Itoa(tc.status)+"/"+strings.Join(slices.Sorted(maps.Keys(tc.header)), ","), func(t *testing.T) {
			t.Parallel()
			fc := clockwork.NewFakeClock()
			base := httptestutil.NewTransport(fc, httptestutil.Step{Status: tc.status, Header: tc.header}, httptestutil.Step{Status: 200})
			var log attemptLog
			tr := &Transport{Base: base, Clock: fc, Jitter: noJitter, OnAttempt: log.onAttempt}
			req := newRequest(t, context.Background(), "POST", "http://api.test/orders", strings.NewReader("{}"))
			req.Header.Set(IdempotencyKeyHeader, "k-1")
			ch := start(tr, req)
			if tc.wantWait > 0 {
				advance(t, fc, 1, tc.wantWait)
			}
			r := await(t, ch)
			if r.err != nil {
				t.Fatal(r.err)
			}
			readBody(t, r.resp)
			if a := log.attempts; len(a) != 2 || a[0].Wait != tc.wantWait {
				t.Errorf("attempts %+v; want 2, the first followed by a wait of %v", a, tc.wantWait)
			}
		})
	}
}

// TestRulesOverflowingRetryAfterStopsTooLong keeps docs/rules.md's account
// of an overflowing Retry-After true: the Transport (TestRetryAfterTooLong)
// stops with retry_after_too_long, so the rules must say so and must not
// call the value ignored.
func TestRulesOverflowingRetryAfterStopsTooLong(t *testing.T) {
	doc, err := os.ReadFile(rulesDoc)
	if err != nil {
		t.Fatal(err)
	}
	// The paragraph that says how the server's delay is read.
	text := strings.Join(strings.Fields(string(doc)), " ")
	i := strings.Index(text, "The server's delay is `Retry-After-Ms`")
	if i < 0 {
		t.Fatal(rulesDoc + ": the paragraph on the server's delay is missing")
	}
	para := text[i:]
	if j := strings.Index(para, "A wait is planned"); j >= 0 {
		para = para[:j]
	}
	if strings.Contains(para, "overflowing value is ignored") {
		t.Errorf("docs/rules.md says an overflowing value is ignored; the Transport stops with retry_after_too_long:\n%s", para)
	}
	if !strings.Contains(para, "`Retry-After` too large for a duration") || !strings.Contains(para, "`retry_after_too_long`") {
		t.Errorf("docs/rules.md does not say that a Retry-After too large for a duration stops with retry_after_too_long:\n%s", para)
	}
	// Every header the server's delay is read from is named, in the
	// order ParseRetryAfter reads them.
	last := -1
	for _, name := range append(msDelayHeaders[:], "Retry-After") {
		at := strings.Index(para, "`"+name+"`")
		if at < 0 {
			t.Errorf("docs/rules.md's paragraph on the server's delay does not name %s, which ParseRetryAfter reads:\n%s", name, para)
			continue
		}
		if at < last {
			t.Errorf("docs/rules.md names %s out of the order ParseRetryAfter reads the headers in (%v, then Retry-After)", name, msDelayHeaders)
		}
		last = at
	}
}

// TestThrottlePausesForTheDelayTheRetriesWait: the pause a 429 asks of
// its destination is read by the one rule the retries follow
// (ParseRetryAfter): a header the retries ignore pauses nothing, and one
// they honour pauses for the same time.
func TestThrottlePausesForTheDelayTheRetriesWait(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(now)
	for _, tc := range []struct {
		name, header, value string
	}{
		{"signed milliseconds", "X-Amz-Retry-After", "+1500"},
		{"AWS milliseconds", "X-Amz-Retry-After", "1500"},
		{"fractional seconds", "Retry-After", "2.0"},
		{"OpenAI milliseconds", "Retry-After-Ms", "250"},
		{"negative", "Retry-After", "-3"},
	} {
		h := http.Header{}
		h.Set(tc.header, tc.value)
		resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: h}
		var r throttle.Result
		answer(&r, resp, nil, clock)
		want, wantOK := ParseRetryAfter(h, now)
		if r.RetryAfter != want || r.HasRetryAfter != wantOK {
			t.Errorf("%s (%s: %s): the throttle pauses %v (%v), the retries wait %v (%v); want the same", tc.name, tc.header, tc.value, r.RetryAfter, r.HasRetryAfter, want, wantOK)
		}
	}
}
