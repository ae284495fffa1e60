package redisretry

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// go-redis sends a command again when the connection ends after the
// command was written and before its reply was read (EOF; up to
// MaxRetries, 3 by default). The server may have run it already, so every
// script of this package is made safe to run twice: each call carries a
// nonce, and the script that changes anything remembers its answer under
// the nonce for a while. A second delivery of the same call finds it and
// answers the same, changing nothing. This holds whatever the client's
// options say, so a caller need not turn go-redis's retries off.

// nonceGrace is how much longer than the call's own bound a nonce is
// remembered. go-redis sends a command again only while the call's
// context lives, which CallTimeout bounds; the grace covers a write that
// left the client just before the deadline and was delayed on the way
// (without ContextTimeoutEnabled a write may take the client's
// WriteTimeout, 3s by default).
const nonceGrace = 10 * time.Second

// MaxCallTimeout is the longest bound of one Redis call: a larger
// CallTimeout of a [Budget] or an [IdempotencyStore] means this one. Every
// call leaves a nonce key in Redis for its bound plus 10s, so a longer
// bound (a "forever" such as time.Duration(math.MaxInt64)) would fill
// Redis with them.
const MaxCallTimeout = time.Minute

// callBound is the bound of each call for a CallTimeout of d: def when d
// is not positive, and at most MaxCallTimeout.
func callBound(d, def time.Duration) time.Duration {
	return min(durationOr(d, def), MaxCallTimeout)
}

// nonceTTL is how long, in milliseconds, a call bounded by callTimeout
// has its nonce remembered: callTimeout plus nonceGrace, saturating.
func nonceTTL(callTimeout time.Duration) int64 {
	d := time.Duration(math.MaxInt64)
	if callTimeout < d-nonceGrace {
		d = callTimeout + nonceGrace
	}
	return millis(d)
}

// millis is d in whole milliseconds rounded up, at least 1, for PX and
// PEXPIRE: Redis rejects PX 0, and a positive TTL must not become 0.
// Computing d/ms first keeps the largest durations (a common "forever"
// is time.Duration(math.MaxInt64)) from overflowing.
func millis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 {
		ms++
	}
	return max(ms, 1)
}

// nonces makes the nonces of one Budget or store: a random base, chosen
// once, and a counter, so that no two calls of any process share one.
type nonces struct {
	base string
	n    atomic.Uint64
}

// newNonces returns nonces with a base of 64 random bits.
func newNonces() *nonces {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather)
	return &nonces{base: hex.EncodeToString(b[:]) + ":"}
}

// next returns a nonce not returned before.
func (n *nonces) next() string {
	return n.base + strconv.FormatUint(n.n.Add(1), 36)
}

// errKeyBrace rejects a key that no other key can share a Cluster slot
// with by a suffix or a hash tag.
var errKeyBrace = errors.New("has a '}' but no hash tag, so no other key can be put in its Redis Cluster slot; " +
	"use a key without braces or with a hash tag such as {payments}")

// sameSlotPrefix returns a prefix for keys in the Redis Cluster slot of
// key: key itself when it has a hash tag (the first "{…}" with something
// inside, which appended text does not change), and otherwise key wrapped
// in braces, which makes all of key the hash tag. A key with a '}' and no
// hash tag cannot be wrapped that way and is an error.
func sameSlotPrefix(key string) (string, error) {
	if hasHashTag(key) {
		return key + ":nonce:", nil
	}
	if strings.Contains(key, "}") {
		return "", errKeyBrace
	}
	return "{" + key + "}:nonce:", nil
}

// hasHashTag reports whether Redis Cluster hashes only part of key: a '{'
// followed, later, by a '}' with at least one byte between them.
func hasHashTag(key string) bool {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return false
	}
	end := strings.IndexByte(key[open+1:], '}')
	return end > 0
}
