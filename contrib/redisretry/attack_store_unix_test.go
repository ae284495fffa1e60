//go:build unix

package redisretry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
)

// A take-over that Reserve refuses for want of a replica leaves the key
// bound to its first payload: another payload still meets a mismatch.
func TestRefusedTakeoverKeepsTheKeysFirstPayload(t *testing.T) {
	ctx := context.Background()
	set := redistest.StartSentinel(t)
	rdb := set.Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond})
	replica, err := set.Replica()
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Reserve(ctx, "order-1", "payload-A", 50*time.Millisecond)
	if err != nil || first.State != idempotency.StateReserved {
		t.Fatalf("Reserve = %+v, %v; want reserved", first, err)
	}
	time.Sleep(200 * time.Millisecond) // the owner died: its lock expired
	replica.Freeze()
	_, err = s.Reserve(ctx, "order-1", "payload-A", time.Minute)
	replica.Thaw()
	if !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("take-over with the replica frozen = %v; want ErrNotReplicated", err)
	}
	r, err := s.Reserve(ctx, "order-1", "payload-B", time.Minute)
	if err != nil || r.State != idempotency.StateMismatch {
		t.Fatalf("Reserve with another payload after the refused take-over = %+v, %v; want state %v (the key belongs to payload-A for ReservationTTL)",
			r, err, idempotency.StateMismatch)
	}
}

// A take-over that Reserve refuses for want of a replica takes nothing
// over: the owner of the expired lock, still running, may Complete, and
// its response is recorded (no one took the key over).
func TestRefusedTakeoverLetsTheExpiredOwnerComplete(t *testing.T) {
	ctx := context.Background()
	set := redistest.StartSentinel(t)
	rdb := set.Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond})
	replica, err := set.Replica()
	if err != nil {
		t.Fatal(err)
	}
	slow, err := s.Reserve(ctx, "order-1", "payload-A", 50*time.Millisecond)
	if err != nil || slow.State != idempotency.StateReserved {
		t.Fatalf("Reserve = %+v, %v; want reserved", slow, err)
	}
	time.Sleep(200 * time.Millisecond) // the owner is slow: its lock expired
	replica.Freeze()
	_, err = s.Reserve(ctx, "order-1", "payload-A", time.Minute)
	replica.Thaw()
	if !errors.Is(err, ErrNotReplicated) {
		t.Fatalf("take-over with the replica frozen = %v; want ErrNotReplicated", err)
	}
	charged := &idempotency.Response{Status: 201, Body: []byte("charged")}
	if err := s.Complete(ctx, "order-1", slow.Token, charged, time.Minute); err != nil {
		t.Fatalf("Complete by the owner of the expired lock, after a take-over that was refused = %v; want nil "+
			"(fenced, its response goes unrecorded and the client's retry runs the operation a second time)", err)
	}
	r, err := s.Reserve(ctx, "order-1", "payload-A", time.Minute)
	if err != nil || r.State != idempotency.StateCompleted {
		t.Fatalf("retry after the Complete = %+v, %v; want the recorded response replayed", r, err)
	}
}
