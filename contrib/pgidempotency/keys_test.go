package pgidempotency

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/httpretry/httpretry/idempotency"
)

// TestStoreReservesKeysOfAnyLength: a key as the Handler hands it to the
// store — a scope of any length (a tenant's long identifier, say), a NUL
// byte and the client's key — is reserved, completed and replayed like a
// short one, whatever its length. A B-tree index entry holds at most
// 2,704 bytes: a key stored as is past that length could never be
// reserved, and every request with it would be answered 503. Two keys
// that differ only in their last byte are two records.
func TestStoreReservesKeysOfAnyLength(t *testing.T) {
	s, _ := newStore(t, Options{})
	ctx := context.Background()
	for _, n := range []int{1, 2700, 3000, 64 << 10} {
		scope := incompressible(n)
		a, b := scope+"\x00k1", scope+"\x00k2"
		for _, key := range []string{a, b} {
			res, err := s.Reserve(ctx, key, "fp", time.Minute)
			if err != nil || res.State != idempotency.StateReserved {
				t.Fatalf("scope of %d bytes: Reserve = %v, %v; want reserved", n, res.State, err)
			}
			if err := s.Complete(ctx, key, res.Token, &idempotency.Response{Status: 201, Body: []byte(key[len(key)-2:])}, time.Minute); err != nil {
				t.Fatalf("scope of %d bytes: Complete = %v", n, err)
			}
		}
		for _, key := range []string{a, b} {
			res, err := s.Reserve(ctx, key, "fp", time.Minute)
			if err != nil || res.State != idempotency.StateCompleted || string(res.Response.Body) != key[len(key)-2:] {
				t.Fatalf("scope of %d bytes: replay of %q = %v %+v, %v", n, key[len(key)-2:], res.State, res.Response, err)
			}
		}
	}
}

// incompressible returns n bytes that compression does not shorten, as
// the server would shorten repeated ones to fit an index entry.
func incompressible(n int) string {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{1}).Read(b)
	return string(b)
}
