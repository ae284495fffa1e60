package redisretry

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
)

// Where an IdempotencyStore keeps a key, and how its fencing tokens grow.
//
// Every record of one idempotency key shares a Redis Cluster slot with
// the others and with nothing else: its name is
//
//	prefix + "{" + hex(sha256(key)) + "}:" + kind
//
// (kind "r" the record, "l" the lock, "n:<nonce>" a call's nonce), so the
// hash tag is the key's digest. A Reserve, Complete or Release script
// touches the records of one key only, and the keys spread over every
// master of a Cluster: the store grows with it. No key is shared by all
// the calls of the store, so it needs no store-wide counter.
//
// A fencing token is folded from a per-key counter and the server's clock:
//
//	token = max(last + 1, now)
//
// where last is the token of the key's record (0 when there is none) and
// now is the server's TIME in microseconds since 1970, read inside the
// script. It is strictly greater than last while the record lives, and
// when the record is gone (expired, released, evicted, lost with a server
// or a failover) the key starts again from the clock, above every token
// issued for it before:
//
//   - A token is never ahead of the clock that issued it by more than
//     the reservations of that key within one microsecond: last + 1 wins
//     over now only when last was issued in the same microsecond, and
//     Redis runs one script at a time, each longer than a microsecond.
//   - The record of a key outlives the reservation it holds (its TTL is
//     at least the lock's; Complete keeps it for the response's TTL), so
//     a key whose record is gone has had no reservation for at least one
//     script's time, and now has moved past its last token.
//
// Both hold as long as the server's wall clock does not step back by
// more than the time since the key's record went: NTP slews rather than
// steps, and across a failover the new master's clock must not lag the
// old one's by more than the failover took (seconds; clocks kept by NTP
// agree within milliseconds). Where the clock does step back further, a
// later token may be smaller than an earlier one, but a stale owner is
// still fenced unless the two are equal: Complete and Release accept only
// the token the record holds, and the two reservations would have to
// fall on the same microsecond.
//
// Tokens of different keys are never compared (the Store contract orders
// them per key), so keys on different masters need no common order. A
// token is about 1.8e15 today, exact in Lua's numbers (below 2^53) until
// the year 2255.

// keys returns the script keys of key: its record, its lock and a new
// nonce for this call (see nonce.go), all in the slot of the key's
// digest.
func (s *IdempotencyStore) keys(key string) []string {
	base := s.keyBase(key)
	return []string{base + "r", base + "l", base + "n:" + s.nonces.next()}
}

// keyBase is the common start of every record of key.
func (s *IdempotencyStore) keyBase(key string) string {
	sum := sha256.Sum256([]byte(key))
	return s.prefix + "{" + hex.EncodeToString(sum[:]) + "}:"
}

// errPrefixEmptyTag rejects a prefix whose first '{' is followed by '}':
// Redis Cluster then hashes each whole key name, and a key's records land
// in different slots.
var errPrefixEmptyTag = errors.New("redisretry: the idempotency store prefix has an empty hash tag \"{}\", " +
	"which makes Redis Cluster hash each whole key name; use a prefix without braces")

// checkPrefix accepts a prefix under which every record of a key shares
// a slot: one without braces (the key's digest is the hash tag), one
// with a hash tag of its own (every key then shares that one slot, as
// before this layout, and the store lives on one shard), or one with a
// '{' left open (the tag then runs from it to the digest's '}', which
// still differs per key).
func checkPrefix(prefix string) error {
	open := strings.IndexByte(prefix, '{')
	if open >= 0 && strings.HasPrefix(prefix[open+1:], "}") {
		return errPrefixEmptyTag
	}
	return nil
}
