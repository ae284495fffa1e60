//go:build unix

package redisretry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/httpretry/httpretry/idempotency"
)

// Expected: a take-over refused with ErrNotReplicated leaves the key bound to its first payload (422 for another).
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

// Expected: a take-over refused with ErrNotReplicated takes nothing over; the expired lock's owner may still Complete.
func TestRefusedTakeoverLetsTheExpiredOwnerComplete(t *testing.T) {
	ctx := context.Background()
	set := redistest.StartSentinel(t)
	rdb := set.Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond})
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
	// The replica thawed: calls from here on wait for it as long as need be.
	patientStore, err := NewIdempotencyStore(rdb, prefix, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: patient / 4})
	if err != nil {
		t.Fatal(err)
	}
	charged := &idempotency.Response{Status: 201, Body: []byte("charged")}
	if err := patientStore.Complete(ctx, "order-1", slow.Token, charged, time.Minute); err != nil {
		t.Fatalf("Complete by the owner of the expired lock, after a take-over that was refused = %v; want nil "+
			"(fenced, its response goes unrecorded and the client's retry runs the operation a second time)", err)
	}
	r, err := patientStore.Reserve(ctx, "order-1", "payload-A", time.Minute)
	if err != nil || r.State != idempotency.StateCompleted {
		t.Fatalf("retry after the Complete = %+v, %v; want the recorded response replayed", r, err)
	}
}

// Expected: a retry refused with 503 for want of a replica never makes the slow first attempt run twice.
func TestRefusedTakeoverThroughTheHandlerChargesOnce(t *testing.T) {
	set := redistest.StartSentinel(t)
	rdb := set.Client(t)
	s, _ := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond})
	replica, err := set.Replica()
	if err != nil {
		t.Fatal(err)
	}
	var charges atomic.Int32
	started, finish := make(chan struct{}, 2), make(chan struct{})
	charge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if charges.Add(1) == 1 {
			started <- struct{}{}
			<-finish // the provider is slow
		}
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte("charged"))
	})
	h := idempotency.Handler(charge, s, idempotency.Options{LockTTL: 50 * time.Millisecond})
	send := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"order":1}`))
		req.Header.Set("Idempotency-Key", "order-1")
		h.ServeHTTP(rec, req)
		return rec
	}
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- send() }()
	<-started
	time.Sleep(200 * time.Millisecond) // past the lock's TTL

	replica.Freeze()
	retry := send()
	replica.Thaw()
	if retry.Code != http.StatusServiceUnavailable {
		t.Fatalf("retry with the replica frozen = %d; want 503", retry.Code)
	}
	close(finish)
	if got := <-first; got.Code != http.StatusCreated {
		t.Fatalf("first attempt = %d; want 201", got.Code)
	}
	last := send()
	if n := charges.Load(); n != 1 || last.Code != http.StatusCreated || last.Body.String() != "charged" {
		t.Fatalf("after a take-over refused for want of a replica: %d charges, last retry %d %q; want 1 charge, the recorded 201 replayed",
			n, last.Code, last.Body.String())
	}
}
