package pgidempotency

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/idempotency"
)

// TestSweepDeletesOnlyExpiredRecords: Sweep deletes responses past their
// TTL and reservations abandoned past AbandonedTTL, at most limit a call,
// and keeps live reservations, live responses, and locked-but-recent
// reservations a retry may still take over.
func TestSweepDeletesOnlyExpiredRecords(t *testing.T) {
	s, pool := newStore(t, Options{AbandonedTTL: 100 * time.Millisecond})
	ctx := context.Background()
	resp := &idempotency.Response{Status: 201, Body: []byte("ok")}
	for i := range 5 { // five responses that expire
		r, _ := s.Reserve(ctx, fmt.Sprintf("short-%d", i), "fp", time.Minute)
		if err := s.Complete(ctx, fmt.Sprintf("short-%d", i), r.Token, resp, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := s.Reserve(ctx, "live-response", "fp", time.Minute)
	if err := s.Complete(ctx, "live-response", r.Token, resp, time.Hour); err != nil {
		t.Fatal(err)
	}
	s.Reserve(ctx, "live-lock", "fp", time.Hour)
	s.Reserve(ctx, "abandoned", "fp", 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	n, err := s.Sweep(ctx, 4)
	if err != nil || n != 4 {
		t.Fatalf("Sweep(4) = %d, %v; want 4", n, err)
	}
	n, err = s.Sweep(ctx, 100)
	if err != nil || n != 2 {
		t.Fatalf("second Sweep = %d, %v; want the 2 left expired (a response, an abandoned reservation)", n, err)
	}
	var left []string
	for _, k := range []string{"short-0", "short-4", "live-response", "live-lock", "abandoned"} {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+DefaultTable+" WHERE key_sha256 = $1", recordKey(k)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			left = append(left, k)
		}
	}
	if fmt.Sprint(left) != "[live-response live-lock]" {
		t.Fatalf("records left = %v, want the live ones", left)
	}
	if _, err := s.Sweep(ctx, 0); err == nil {
		t.Fatal("Sweep(0) accepted")
	}
}

// TestSweepRacingReserveNeverLosesALiveRecord: sweeps run without pause
// while responses expire (1 ms) and their keys are reserved again, with
// locks of an hour: every Reserve that got a key keeps it — its Complete
// succeeds — so a sweep never deleted a record a Reserve had just renewed
// in its place.
func TestSweepRacingReserveNeverLosesALiveRecord(t *testing.T) {
	s, _ := newStore(t, Options{AbandonedTTL: time.Millisecond})
	ctx := context.Background()
	stop := make(chan struct{})
	var swept atomic.Int64
	var sweepers sync.WaitGroup
	for range 2 {
		sweepers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				n, err := s.Sweep(ctx, 50)
				if err != nil {
					t.Errorf("Sweep: %v", err)
					return
				}
				swept.Add(n)
			}
		})
	}
	var workers sync.WaitGroup
	var completed atomic.Int64
	for w := range 4 {
		workers.Go(func() {
			for i := range 60 {
				key := fmt.Sprintf("k-%d", i%5) // five keys, reused as they expire
				r, err := s.Reserve(ctx, key, "fp", time.Hour)
				if err != nil {
					t.Errorf("Reserve: %v", err)
					return
				}
				if r.State != idempotency.StateReserved {
					continue
				}
				if err := s.Complete(ctx, key, r.Token, &idempotency.Response{Status: 201, Body: []byte(fmt.Sprint(w, i))}, time.Millisecond); err != nil {
					t.Errorf("Complete of a reservation locked for an hour: %v (a sweep deleted it)", err)
					return
				}
				completed.Add(1)
			}
		})
	}
	workers.Wait()
	close(stop)
	sweepers.Wait()
	if completed.Load() == 0 || swept.Load() == 0 {
		t.Fatalf("completed %d, swept %d: the race did not happen", completed.Load(), swept.Load())
	}
	// A reservation with a long lock, swept at once, must stay.
	r, _ := s.Reserve(ctx, "held", "fp", time.Hour)
	for range 20 {
		s.Sweep(ctx, 100)
	}
	if err := s.Complete(ctx, "held", r.Token, &idempotency.Response{Status: 201}, time.Hour); err != nil {
		t.Fatalf("a live reservation was swept: Complete = %v", err)
	}
}
