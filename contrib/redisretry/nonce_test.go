package redisretry

import (
	"math"
	"strings"
	"testing"
	"time"
)

// hashPart is the part of key Redis Cluster hashes into its slot, by the
// rule of the Cluster specification.
func hashPart(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return key[open+1 : open+1+end]
		}
	}
	return key
}

func TestNonceKeysShareTheSlotOfTheirKey(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"retry-budget:payments", "{pay}:budget", "a{b}c}", "x{", "x{y", "{a}{b}"} {
		t.Run(key, func(t *testing.T) {
			prefix, err := sameSlotPrefix(key)
			if err != nil {
				t.Fatalf("sameSlotPrefix(%q): %v", key, err)
			}
			nonce := prefix + newNonces().next()
			if got, want := hashPart(nonce), hashPart(key); got != want {
				t.Errorf("nonce key %q hashes %q; want %q, as %q does", nonce, got, want, key)
			}
		})
	}
	for _, key := range []string{"{}x", "a}b", "x{}y"} {
		if _, err := sameSlotPrefix(key); err == nil {
			t.Errorf("sameSlotPrefix(%q) = nil error; want one: no key can share its slot", key)
		}
	}
}

func TestNoncesNeverRepeat(t *testing.T) {
	t.Parallel()
	a, b := newNonces(), newNonces()
	seen := map[string]bool{}
	for range 1000 {
		for _, n := range []string{a.next(), b.next()} {
			if seen[n] {
				t.Fatalf("nonce %q returned twice", n)
			}
			seen[n] = true
		}
	}
}

// A positive TTL is at least 1ms (Redis rejects PX 0), and the longest
// durations do not overflow into small ones.
func TestMillisClampsBothWays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{time.Nanosecond, 1},
		{999 * time.Microsecond, 1},
		{time.Millisecond, 1},
		{time.Millisecond + 1, 2},
		{10 * time.Minute, 600_000},
		{time.Duration(math.MaxInt64), math.MaxInt64/int64(time.Millisecond) + 1},
		{time.Duration(math.MaxInt64) - time.Millisecond, math.MaxInt64/int64(time.Millisecond) + 0},
	} {
		if got := millis(tc.d); got != tc.want {
			t.Errorf("millis(%v) = %d; want %d", tc.d, got, tc.want)
		}
	}
	if got, want := nonceTTL(time.Duration(math.MaxInt64)), millis(time.Duration(math.MaxInt64)); got != want {
		t.Errorf("nonceTTL(max) = %d; want %d (saturated)", got, want)
	}
	if got := nonceTTL(50 * time.Millisecond); got != 10_050 {
		t.Errorf("nonceTTL(50ms) = %d; want 10050", got)
	}
}
