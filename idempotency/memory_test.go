package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/httpretry/httpretry/idempotency/storetest"
	"github.com/jonboulle/clockwork"
)

func TestMemoryStoreConformance(t *testing.T) {
	t.Run("fake_clock", func(t *testing.T) {
		storetest.RunWithClock(t, func(t *testing.T) (idempotency.Store, func(time.Duration)) {
			fc := clockwork.NewFakeClock()
			return idempotency.NewMemoryStore(idempotency.MemoryOptions{Clock: fc}), fc.Advance
		})
	})
	t.Run("real_time", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) idempotency.Store {
			return idempotency.NewMemoryStore(idempotency.MemoryOptions{})
		})
	})
}

// fill completes n keys named prefix0…, each with body, one second apart
// on fc, and returns their keys.
func fill(t *testing.T, s *idempotency.MemoryStore, fc *clockwork.FakeClock, prefix string, n int, body string, ttl time.Duration) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	for i := range n {
		k := fmt.Sprintf("%s%d", prefix, i)
		r, err := s.Reserve(ctx, k, "fp", time.Minute)
		if err != nil || r.State != idempotency.StateReserved {
			t.Fatalf("Reserve(%q) = %+v, %v", k, r, err)
		}
		if err := s.Complete(ctx, k, r.Token, &idempotency.Response{Status: 200, Body: []byte(body)}, ttl); err != nil {
			t.Fatalf("Complete(%q): %v", k, err)
		}
		keys = append(keys, k)
		fc.Advance(time.Second)
	}
	return keys
}

func state(t *testing.T, s idempotency.Store, key string) idempotency.State {
	t.Helper()
	r, err := s.Reserve(context.Background(), key, "fp", time.Minute)
	if err != nil {
		t.Fatalf("Reserve(%q): %v", key, err)
	}
	return r.State
}

func TestMemoryStoreEvictsOldestCompletedAtMaxEntries(t *testing.T) {
	fc := clockwork.NewFakeClock()
	s := idempotency.NewMemoryStore(idempotency.MemoryOptions{MaxEntries: 3, Clock: fc, EvictResponses: true})
	keys := fill(t, s, fc, "k", 3, "x", time.Hour)
	// A fourth key evicts the oldest response (k0), and only it.
	if got := state(t, s, "new"); got != idempotency.StateReserved {
		t.Fatalf("new key: %v, want reserved", got)
	}
	for _, k := range keys[1:] {
		if got := state(t, s, k); got != idempotency.StateCompleted {
			t.Fatalf("%s: %v, want completed (kept)", k, got)
		}
	}
	// k0 was evicted: reserving it evicts k1, the next oldest.
	if got := state(t, s, keys[0]); got != idempotency.StateReserved {
		t.Fatalf("%s: %v, want reserved (evicted)", keys[0], got)
	}
	if got := state(t, s, keys[2]); got != idempotency.StateCompleted {
		t.Fatalf("%s: %v, want completed", keys[2], got)
	}
}

func TestMemoryStoreEvictsExpiredFirst(t *testing.T) {
	fc := clockwork.NewFakeClock()
	s := idempotency.NewMemoryStore(idempotency.MemoryOptions{MaxEntries: 3, Clock: fc, EvictResponses: true})
	old := fill(t, s, fc, "long", 1, "x", time.Hour)
	short := fill(t, s, fc, "short", 1, "x", time.Second) // expires at once after fill's Advance
	fill(t, s, fc, "mid", 1, "x", time.Hour)
	if got := state(t, s, "new"); got != idempotency.StateReserved {
		t.Fatalf("new key: %v, want reserved", got)
	}
	// The expired response went, although long0 is older.
	if got := state(t, s, old[0]); got != idempotency.StateCompleted {
		t.Fatalf("%s: %v, want completed (kept)", old[0], got)
	}
	if got := state(t, s, short[0]); got != idempotency.StateReserved {
		t.Fatalf("%s: %v, want reserved (expired and evicted)", short[0], got)
	}
}

// By default a full store keeps every recorded response for its whole TTL
// and refuses new keys instead; an expired response makes room again.
func TestMemoryStoreKeepsRecordedResponsesForTheirTTL(t *testing.T) {
	ctx := context.Background()
	for _, limit := range []struct {
		name string
		opts idempotency.MemoryOptions
	}{
		{"entries", idempotency.MemoryOptions{MaxEntries: 3}},
		{"bytes", idempotency.MemoryOptions{MaxBytes: 300}}, // 3 records of 100 bytes
	} {
		t.Run(limit.name, func(t *testing.T) {
			fc := clockwork.NewFakeClock()
			opts := limit.opts
			opts.Clock = fc
			s := idempotency.NewMemoryStore(opts)
			keys := fill(t, s, fc, "k", 3, string(make([]byte, 96)), time.Hour)
			if r, err := s.Reserve(ctx, "new", "fp", time.Minute); !errors.Is(err, idempotency.ErrStoreFull) {
				t.Fatalf("Reserve of a new key in a full store = %+v, %v; want ErrStoreFull", r, err)
			}
			for _, k := range keys {
				if got := state(t, s, k); got != idempotency.StateCompleted {
					t.Fatalf("%s: %v, want completed (kept for its TTL)", k, got)
				}
			}
			// fill spaced the keys a second apart, from 3 s ago: k0
			// expires first.
			fc.Advance(time.Hour - 3*time.Second)
			if got := state(t, s, "new"); got != idempotency.StateReserved {
				t.Fatalf("new key once k0 expired: %v, want reserved", got)
			}
			for _, k := range keys[1:] {
				if got := state(t, s, k); got != idempotency.StateCompleted {
					t.Fatalf("%s: %v, want completed", k, got)
				}
			}
		})
	}
}

// A Complete that cannot fit evicts nothing: neither a live response (when
// eviction of responses is allowed, it is put back) nor a reservation
// whose lock expired, whose owner may still complete.
func TestMemoryStoreFailedCompleteEvictsNothing(t *testing.T) {
	ctx := context.Background()
	for _, evict := range []bool{false, true} {
		t.Run(fmt.Sprintf("EvictResponses=%v", evict), func(t *testing.T) {
			fc := clockwork.NewFakeClock()
			s := idempotency.NewMemoryStore(idempotency.MemoryOptions{MaxBytes: 300, Clock: fc, EvictResponses: evict})
			kept := fill(t, s, fc, "k", 1, string(make([]byte, 96)), time.Hour) // 100 bytes
			slow, err := s.Reserve(ctx, "slow", "fp", time.Second)              // 6 bytes
			if err != nil {
				t.Fatal(err)
			}
			fc.Advance(2 * time.Second) // slow's lock expired; no one took it over
			live := strings.Repeat("l", 50)
			if _, err := s.Reserve(ctx, live, "fp", time.Hour); err != nil { // 52 bytes, locked
				t.Fatal(err)
			}
			big, err := s.Reserve(ctx, "big", "fp", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			// 5 + 250 bytes: under MaxBytes, but beside the live
			// reservation it does not fit even if everything else went.
			err = s.Complete(ctx, "big", big.Token, &idempotency.Response{Status: 200, Body: make([]byte, 250)}, time.Hour)
			if !errors.Is(err, idempotency.ErrStoreFull) {
				t.Fatalf("Complete of a response that cannot fit: err = %v, want ErrStoreFull", err)
			}
			if got := state(t, s, kept[0]); got != idempotency.StateCompleted {
				t.Fatalf("%s after the failed Complete: %v, want completed (not evicted)", kept[0], got)
			}
			if err := s.Complete(ctx, "slow", slow.Token, &idempotency.Response{Status: 201}, time.Hour); err != nil {
				t.Fatalf("Complete by the owner of the expired lock after the failed Complete: %v, want nil (not evicted)", err)
			}
		})
	}
}

func TestMemoryStoreNeverEvictsLiveReservations(t *testing.T) {
	ctx := context.Background()
	fc := clockwork.NewFakeClock()
	s := idempotency.NewMemoryStore(idempotency.MemoryOptions{MaxEntries: 2, Clock: fc})
	var tokens []idempotency.Token
	for _, k := range []string{"a", "b"} {
		r, err := s.Reserve(ctx, k, "fp", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, r.Token)
	}
	if _, err := s.Reserve(ctx, "c", "fp", time.Minute); !errors.Is(err, idempotency.ErrStoreFull) {
		t.Fatalf("Reserve with only live reservations held: err = %v, want ErrStoreFull", err)
	}
	for _, k := range []string{"a", "b"} {
		if got := state(t, s, k); got != idempotency.StateInProgress {
			t.Fatalf("%s: %v, want in progress", k, got)
		}
	}
	// Once a's lock expires, its reservation may go to make room; its
	// owner then learns it no longer owns the key.
	fc.Advance(time.Minute)
	if got := state(t, s, "c"); got != idempotency.StateReserved {
		t.Fatalf("c after the locks expired: %v, want reserved", got)
	}
	err := s.Complete(ctx, "a", tokens[0], &idempotency.Response{Status: 200}, time.Hour)
	if !errors.Is(err, idempotency.ErrStaleToken) {
		t.Fatalf("Complete by the evicted owner: err = %v, want ErrStaleToken", err)
	}
}

func TestMemoryStoreMaxBytes(t *testing.T) {
	ctx := context.Background()
	fc := clockwork.NewFakeClock()
	// Each record: key "kN" (2) + "fp" (2) + a 96-byte body = 100 bytes.
	s := idempotency.NewMemoryStore(idempotency.MemoryOptions{MaxBytes: 300, Clock: fc, EvictResponses: true})
	body := string(make([]byte, 96))
	keys := fill(t, s, fc, "k", 3, body, time.Hour)
	fill(t, s, fc, "n", 1, body, time.Hour)
	if got := state(t, s, keys[1]); got != idempotency.StateCompleted {
		t.Fatalf("%s: %v, want completed", keys[1], got)
	}
	if got := state(t, s, keys[0]); got != idempotency.StateReserved {
		t.Fatalf("%s: %v, want evicted for bytes", keys[0], got)
	}

	t.Run("response_larger_than_the_store", func(t *testing.T) {
		r, err := s.Reserve(ctx, "big", "fp", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Complete(ctx, "big", r.Token, &idempotency.Response{Status: 200, Body: make([]byte, 300)}, time.Hour)
		if !errors.Is(err, idempotency.ErrStoreFull) {
			t.Fatalf("Complete of 300 bytes into a 300-byte store: err = %v, want ErrStoreFull", err)
		}
		// The reservation is unchanged: its owner can still release it.
		if err := s.Release(ctx, "big", r.Token); err != nil {
			t.Fatalf("Release after ErrStoreFull: %v", err)
		}
	})
}

func TestMemoryStoreRejectsNonPositiveTTL(t *testing.T) {
	ctx := context.Background()
	s := idempotency.NewMemoryStore(idempotency.MemoryOptions{})
	if _, err := s.Reserve(ctx, "k", "fp", 0); err == nil {
		t.Fatal("Reserve with lock TTL 0: no error")
	}
	r, err := s.Reserve(ctx, "k", "fp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "k", r.Token, &idempotency.Response{Status: 200}, -time.Second); err == nil {
		t.Fatal("Complete with TTL -1s: no error")
	}
	if err := s.Complete(ctx, "k", r.Token, nil, time.Hour); err == nil {
		t.Fatal("Complete with a nil response: no error")
	}
}

func TestMemoryStoreEvictsExpiredResponsesBeforeExpiredLocks(t *testing.T) {
	ctx := context.Background()
	fc := clockwork.NewFakeClock()
	s := idempotency.NewMemoryStore(idempotency.MemoryOptions{MaxEntries: 2, Clock: fc})
	slow, err := s.Reserve(ctx, "slow", "fp", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, s, fc, "done", 1, "x", time.Second)
	fc.Advance(2 * time.Minute) // both expired
	if got := state(t, s, "new"); got != idempotency.StateReserved {
		t.Fatalf("new key: %v, want reserved", got)
	}
	// The useless expired response went; the slow owner, whom no one took
	// over, may still record its response.
	if err := s.Complete(ctx, "slow", slow.Token, &idempotency.Response{Status: 200}, time.Hour); err != nil {
		t.Fatalf("Complete by the slow owner: %v", err)
	}
}
