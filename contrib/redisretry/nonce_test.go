package redisretry

import (
	"context"
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

// Every call leaves a nonce key in Redis, so a nonce must expire soon
// whatever CallTimeout says: a CallTimeout of "forever" must not leave a
// key per call for 292 years (Redis, under noeviction, would fill up and
// refuse every Reserve).
func TestNonceKeysExpireWhateverCallTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, rdb := server(t)
	forever := time.Duration(math.MaxInt64)
	b := newBudget(t, rdb, "nonce-forever", 20, 1, Options{CallTimeout: forever, FlushInterval: time.Hour})
	b.Deposit()
	if !b.Withdraw(ctx) {
		t.Fatal("Withdraw refused")
	}
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: forever})
	if _, err := s.Reserve(ctx, "k", "fp", time.Minute); err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	const bound = int64((time.Minute + nonceGrace) / time.Millisecond)
	for _, pattern := range []string{"{nonce-forever}:nonce:*", prefix + "{" + hashed("k") + "}:n:*"} {
		keys, err := rdb.Keys(ctx, pattern).Result()
		if err != nil || len(keys) != 1 {
			t.Fatalf("KEYS %s = %q, %v; want one nonce key", pattern, keys, err)
		}
		// Read as milliseconds: go-redis's Duration of a long PTTL overflows.
		ttl, err := rdb.Do(ctx, "PTTL", keys[0]).Int64()
		if err != nil || ttl <= 0 || ttl > bound {
			t.Errorf("PTTL %s = %d ms, %v; want at most %d ms", keys[0], ttl, err, bound)
		}
	}
}

func TestCallBound(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		d    time.Duration
		want time.Duration
	}{
		{"zero", 0, time.Second},
		{"negative", -time.Second, time.Second},
		{"min", time.Duration(math.MinInt64), time.Second},
		{"set", 50 * time.Millisecond, 50 * time.Millisecond},
		{"at the bound", MaxCallTimeout, MaxCallTimeout},
		{"over the bound", MaxCallTimeout + 1, MaxCallTimeout},
		{"forever", time.Duration(math.MaxInt64), MaxCallTimeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := callBound(c.d, time.Second); got != c.want {
				t.Errorf("callBound(%v, 1s) = %v; want %v", c.d, got, c.want)
			}
		})
	}
}
