package throttle

import (
	"net/http"
	"testing"
)

// TestHeaderDecimalReadsTheFractionToTheNanosecond: a rate-limit field
// read as a decimal (Discord's fractional X-RateLimit-Reset-After,
// Reddit's float remaining) keeps its whole part and nine digits of its
// fraction, every digit 0 to 9 taken, the tenth and later dropped; a
// field with a dot and no fraction, or a fraction that is not digits, is
// not a decimal.
func TestHeaderDecimalReadsTheFractionToTheNanosecond(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		v            string
		whole, nanos int64
		ok           bool
	}{
		{"9", 9, 0, true},
		{"2.9", 2, 900_000_000, true},
		{"0.0", 0, 0, true},
		{"3.250", 3, 250_000_000, true},
		{"0.123456789", 0, 123_456_789, true},
		{"0.1234567899", 0, 123_456_789, true},
		{" 1.5\t", 1, 500_000_000, true},
		{"1.", 0, 0, false},
		{"1.a", 0, 0, false},
		{"1.9/", 0, 0, false},
		{"-1.5", 0, 0, false},
	} {
		whole, nanos, ok := headerDecimal(http.Header{"X-Ratelimit-Reset-After": {tt.v}}, "X-Ratelimit-Reset-After")
		if whole != tt.whole || nanos != tt.nanos || ok != tt.ok {
			t.Errorf("headerDecimal(%q) = %d, %d, %v; want %d, %d, %v", tt.v, whole, nanos, ok, tt.whole, tt.nanos, tt.ok)
		}
	}
	if _, _, ok := headerDecimal(http.Header{}, "X-Ratelimit-Reset-After"); ok {
		t.Error("headerDecimal of a field not sent: ok; want not")
	}
}
