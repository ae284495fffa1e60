package redisretry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
	"github.com/redis/go-redis/v9"
)

// serverMicros is the server's clock, as the scripts read it.
func serverMicros(t *testing.T, rdb redis.UniversalClient) uint64 {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return uint64(now.UnixMicro())
}

// A token is max(last + 1, the server's clock in microseconds): the key's
// record, when there is one, is the floor, and the clock is the floor
// when there is none, each case against a real server.
func TestFencingTokenFoldsCounterAndClock(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient})
	ahead := serverMicros(t, rdb) + 1e12 // eleven days ahead of the clock
	cases := []struct {
		name   string
		record map[string]any // the key's record before Reserve; nil for none
		lock   bool           // a live lock before Reserve
		state  idempotency.State
		exact  uint64 // the token wanted exactly; 0 for "at least the clock"
	}{
		{name: "no_record", state: idempotency.StateReserved},
		{name: "record_behind_the_clock", record: map[string]any{"st": "p", "fp": "fp", "tok": "7"}, state: idempotency.StateReserved},
		{name: "record_ahead_of_the_clock", record: map[string]any{"st": "p", "fp": "fp", "tok": fmt.Sprint(ahead)}, state: idempotency.StateReserved, exact: ahead + 1},
		{name: "record_without_token", record: map[string]any{"st": "p", "fp": "fp"}, state: idempotency.StateReserved},
		{name: "lock_without_record", lock: true, state: idempotency.StateInProgress},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := c.name
			if c.record != nil {
				if err := rdb.HSet(ctx, recordKey(prefix, key), c.record).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if c.lock {
				if err := rdb.Set(ctx, lockKey(prefix, key), "5", time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
			}
			before := serverMicros(t, rdb)
			r, err := s.Reserve(ctx, key, "fp", time.Minute)
			if err != nil || r.State != c.state {
				t.Fatalf("Reserve = %+v, %v; want %v", r, err, c.state)
			}
			if c.state != idempotency.StateReserved {
				return
			}
			if r.TookOver != (c.record != nil) {
				t.Errorf("TookOver = %v; want %v", r.TookOver, c.record != nil)
			}
			switch tok := uint64(r.Token); {
			case c.exact != 0 && tok != c.exact:
				t.Errorf("token = %d; want %d, the record's plus one", tok, c.exact)
			case c.exact == 0 && tok < before:
				t.Errorf("token = %d; want at least the server's clock before Reserve, %d", tok, before)
			}
			if got := rdb.HGet(ctx, recordKey(prefix, key), "tok").Val(); got != fmt.Sprint(r.Token) {
				t.Errorf("record holds token %s; want %d", got, r.Token)
			}
		})
	}
}

// Tokens grow for a key across everything that removes its records: the
// record expiring after its lock, a Release, a Complete whose response
// expired, and a server that lost every key (killed and restarted empty,
// as a restart without persistence or a failover to a replica that had
// not received them does). A store-wide counter starts again from 1 after
// the last; the clock does not.
func TestFencingTokensGrowAcrossExpiryAndLoss(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, ReservationTTL: 50 * time.Millisecond})
	const key = "order-1"
	reserve := func(t *testing.T) idempotency.Token {
		t.Helper()
		r, err := s.Reserve(ctx, key, "fp", 50*time.Millisecond)
		if err != nil || r.State != idempotency.StateReserved {
			t.Fatalf("Reserve = %+v, %v; want reserved", r, err)
		}
		return r.Token
	}
	gone := func(t *testing.T) {
		t.Helper()
		eventually(t, "the record expires", func() bool {
			return rdb.Exists(ctx, recordKey(prefix, key), lockKey(prefix, key)).Val() == 0
		})
	}
	last := reserve(t)
	steps := []struct {
		name   string
		remove func(t *testing.T, tok idempotency.Token)
	}{
		{"reservation_expired", func(t *testing.T, _ idempotency.Token) { gone(t) }},
		{"released", func(t *testing.T, tok idempotency.Token) {
			if err := s.Release(ctx, key, tok); err != nil {
				t.Fatal(err)
			}
		}},
		{"response_expired", func(t *testing.T, tok idempotency.Token) {
			if err := s.Complete(ctx, key, tok, &idempotency.Response{Status: 201}, 50*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			gone(t)
		}},
		{"server_lost_every_key", func(t *testing.T, _ idempotency.Token) {
			srv.Kill()
			srv.Restart(t)
		}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.remove(t, last)
			tok := reserve(t)
			if tok <= last {
				t.Fatalf("token after the records went = %d; want above the last one, %d", tok, last)
			}
			last = tok
		})
	}
}

// A prefix whose first '{' is followed by '}' makes Redis Cluster hash
// each whole key name, so a key's records would land in different slots:
// refused. Other braces keep a key's records together.
func TestIdempotencyStorePrefixHashTags(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, c := range []struct {
		prefix string
		ok     bool
	}{
		{"idem:", true},
		{"{idem}:", true}, // one slot for the whole store
		{"a{b:", true},    // the tag runs to the digest's '}'
		{"a}b:", true},
		{"{}:", false},
		{"x{}y{z}:", false},
	} {
		s, err := NewIdempotencyStore(rdb, c.prefix)
		if (err == nil) != c.ok {
			t.Errorf("NewIdempotencyStore(%q) = %v; want ok %v", c.prefix, err, c.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, errPrefixEmptyTag) {
				t.Errorf("NewIdempotencyStore(%q) = %v; want errPrefixEmptyTag", c.prefix, err)
			}
			continue
		}
		keys := s.keys("k")
		for _, k := range keys[1:] {
			if got, want := hashPart(k), hashPart(keys[0]); got != want {
				t.Errorf("prefix %q: key %q hashes %q; want %q, as the record %q does", c.prefix, k, got, want, keys[0])
			}
		}
		if c.prefix == "idem:" {
			if other := s.keys("other")[0]; hashPart(other) == hashPart(keys[0]) {
				t.Errorf("keys k and other share the hash tag %q; want one per key", hashPart(other))
			}
		}
	}
}
