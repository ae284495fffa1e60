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
	"github.com/redis/go-redis/v9"
)

// With WaitReplicas and no replica to acknowledge, Reserve fails with
// ErrNotReplicated and leaves the key free (the reservation is undone on
// the primary), the Handler answers 503 and runs nothing, and Complete
// fails likewise after recording the response on the primary.
func TestWaitReplicasUnacknowledgedRunsNothing(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
	s, prefix := newIdempotencyStore(t, rdb, IdempotencyOptions{CallTimeout: patient, WaitReplicas: 1, WaitTimeout: 20 * time.Millisecond})

	_, err := s.Reserve(ctx, "k", "fp", time.Minute)
	if want := "redisretry: fewer replicas than WaitReplicas acknowledged the write in time: idempotency reserve: 0 of 1 within 20ms"; !errors.Is(err, ErrNotReplicated) || err.Error() != want {
		t.Fatalf("Reserve without a replica = %v; want %q", err, want)
	}
	if n := rdb.Exists(ctx, recordKey(prefix, "k"), lockKey(prefix, "k")).Val(); n != 0 {
		t.Fatalf("%d of the key's record and lock left after the refused Reserve; want 0", n)
	}

	var ran atomic.Int32
	h := idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran.Add(1) }), s, idempotency.Options{})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/charge", strings.NewReader("{}"))
	req.Header.Set("Idempotency-Key", "k2")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || ran.Load() != 0 {
		t.Fatalf("Handler = %d, ran %d; want 503, 0", rec.Code, ran.Load())
	}

	// Reserved by a store that does not wait; completed by one that does,
	// which sends the Complete again until its CallTimeout is nearly
	// spent (2s here: the test's own bound, not a verdict on the
	// machine's speed).
	plain, _ := NewIdempotencyStore(rdb, prefix, IdempotencyOptions{CallTimeout: patient})
	r, err := plain.Reserve(ctx, "k3", "fp", time.Minute)
	if err != nil || r.State != idempotency.StateReserved {
		t.Fatalf("Reserve = %+v, %v", r, err)
	}
	waiting, _ := NewIdempotencyStore(rdb, prefix, IdempotencyOptions{CallTimeout: 2 * time.Second, WaitReplicas: 1, WaitTimeout: 20 * time.Millisecond})
	err = waiting.Complete(ctx, "k3", r.Token, &idempotency.Response{Status: 201}, time.Minute)
	if !errors.Is(err, ErrNotReplicated) || errors.Is(err, idempotency.ErrStaleToken) {
		t.Fatalf("Complete without a replica = %v; want ErrNotReplicated", err)
	}
	if got := rdb.HGet(ctx, recordKey(prefix, "k3"), "st").Val(); got != "c" {
		t.Fatalf("record state after the unacknowledged Complete = %q; want c (recorded on the primary)", got)
	}
}

// WAIT counts the writes of its own connection, so the store needs a
// client whose connection it can choose: a Ring is refused.
func TestWaitReplicasNeedsAClientOrCluster(t *testing.T) {
	t.Parallel()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	if _, err := NewIdempotencyStore(ring, "p:", IdempotencyOptions{WaitReplicas: 1}); err == nil ||
		!strings.Contains(err.Error(), "WaitReplicas needs a *redis.Client or a *redis.ClusterClient") {
		t.Fatalf("NewIdempotencyStore(Ring, WaitReplicas 1) = %v; want a refusal", err)
	}
	if _, err := NewIdempotencyStore(ring, "p:"); err != nil {
		t.Fatalf("NewIdempotencyStore(Ring) = %v; want nil: without WaitReplicas any client works", err)
	}
}
