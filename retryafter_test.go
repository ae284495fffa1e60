package httpretry

import (
	"net/http"
	"testing"
	"time"
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
		{name: "fractional", value: "1.5", want: 0, wantOK: false},
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
