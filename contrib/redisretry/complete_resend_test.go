package redisretry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/httpretry/httpretry/idempotency"
)

// completeVerdict: a Complete is sent again after a write too few
// replicas acknowledged, and, when CompleteTimeout is above CallTimeout
// (persist), after a send that failed; once a write
// was recorded somewhere, that write's ErrNotReplicated stays the answer
// whatever a later send meets, except success or a stale token.
func TestCompleteVerdictResendsUntilTheResponseIsSafe(t *testing.T) {
	notRepl := fmt.Errorf("%w: 0 of 2", ErrNotReplicated)
	lost := errors.New("redisretry: idempotency complete: EOF")
	readOnly := errors.New("READONLY You can't write against a read only replica.")
	full := fmt.Errorf("redisretry: idempotency complete: %w", idempotency.ErrStoreFull)
	uncounted := fmt.Errorf("%w: 3 replicas", ErrReplicasUncounted)
	tests := []struct {
		name      string
		err, prev error
		persist   bool
		want      error
		again     bool
	}{
		{"recorded and replicated", nil, nil, true, nil, false},
		{"recorded after a send too few acknowledged", nil, notRepl, true, nil, false},
		{"stale token", idempotency.ErrStaleToken, nil, true, idempotency.ErrStaleToken, false},
		{"stale token after a send too few acknowledged", idempotency.ErrStaleToken, notRepl, true, idempotency.ErrStaleToken, false},
		{"more replicas than counted", uncounted, nil, true, uncounted, false},
		{"too few acknowledged", notRepl, nil, true, notRepl, true},
		{"too few acknowledged, default CompleteTimeout", notRepl, nil, false, notRepl, true},
		{"too few again", notRepl, notRepl, true, notRepl, true},
		{"no answer", lost, nil, true, lost, true},
		{"no answer, default CompleteTimeout", lost, nil, false, lost, false},
		{"no answer after a write too few acknowledged", lost, notRepl, true, notRepl, true},
		{"no answer after a write too few acknowledged, default CompleteTimeout", lost, notRepl, false, notRepl, false},
		{"old primary turned replica", readOnly, notRepl, true, notRepl, true},
		{"no answer twice", lost, lost, true, lost, true},
		{"full Redis", full, nil, true, full, false},
		{"full Redis after a write too few acknowledged", full, notRepl, true, notRepl, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, again := completeVerdict(tt.err, tt.prev, tt.persist)
			if got != tt.want || again != tt.again {
				t.Errorf("completeVerdict(%v, %v, %v) = %v, %v; want %v, %v", tt.err, tt.prev, tt.persist, got, again, tt.want, tt.again)
			}
		})
	}
}

// CompleteTimeout is at least CallTimeout and at most MaxCallTimeout: a
// Complete's nonce lives as long, so the cap bounds the nonces Redis keeps.
func TestCompleteTimeoutBetweenCallTimeoutAndMaxCallTimeout(t *testing.T) {
	tests := []struct {
		name           string
		call, complete time.Duration
		waitReplicas   int
		want           time.Duration
	}{
		{"unset", 0, 0, 0, DefaultIdempotencyCallTimeout},
		{"unset with WaitReplicas", 0, 0, 2, DefaultCompleteTimeout},
		{"unset with WaitReplicas, CallTimeout above the default", 45 * time.Second, 0, 1, 45 * time.Second},
		{"set with WaitReplicas", time.Second, 5 * time.Second, 2, 5 * time.Second},
		{"below CallTimeout", 5 * time.Second, time.Second, 0, 5 * time.Second},
		{"set", time.Second, 20 * time.Second, 0, 20 * time.Second},
		{"above MaxCallTimeout", time.Second, 24 * time.Hour, 0, MaxCallTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &IdempotencyStore{opts: IdempotencyOptions{CallTimeout: tt.call, CompleteTimeout: tt.complete, WaitReplicas: tt.waitReplicas}}
			if got := s.completeTimeout(); got != tt.want {
				t.Errorf("completeTimeout() with CallTimeout %v, CompleteTimeout %v, WaitReplicas %d = %v; want %v", tt.call, tt.complete, tt.waitReplicas, got, tt.want)
			}
			if got, want := s.resendsFailedSends(), tt.want > s.callTimeout(); got != want {
				t.Errorf("resendsFailedSends() = %v; want %v", got, want)
			}
		})
	}
}

// reserveReplicated reserves key before a failover or a replica's stop, trying again while
// too few replicas acknowledge in time (a set-up just started, a loaded
// machine: the refused reservation is undone), and returns its token.
func reserveReplicated(t *testing.T, s *IdempotencyStore, key string) idempotency.Token {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := s.Reserve(context.Background(), key, "payload", time.Minute)
		if err == nil && r.State == idempotency.StateReserved {
			return r.Token
		}
		if !errors.Is(err, ErrNotReplicated) || time.Now().After(deadline) {
			t.Fatalf("Reserve %s = %+v, %v; want reserved", key, r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
