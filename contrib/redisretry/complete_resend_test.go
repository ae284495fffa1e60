package redisretry

import (
	"errors"
	"fmt"
	"testing"

	"github.com/httpretry/httpretry/idempotency"
)

// completeVerdict: a Complete is sent again after a write too few
// replicas acknowledged and after a send that failed, and once a write
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
		want      error
		again     bool
	}{
		{"recorded and replicated", nil, nil, nil, false},
		{"recorded after a send too few acknowledged", nil, notRepl, nil, false},
		{"stale token", idempotency.ErrStaleToken, nil, idempotency.ErrStaleToken, false},
		{"stale token after a send too few acknowledged", idempotency.ErrStaleToken, notRepl, idempotency.ErrStaleToken, false},
		{"more replicas than counted", uncounted, nil, uncounted, false},
		{"too few acknowledged", notRepl, nil, notRepl, true},
		{"too few again", notRepl, notRepl, notRepl, true},
		{"no answer", lost, nil, lost, true},
		{"no answer after a write too few acknowledged", lost, notRepl, notRepl, true},
		{"old primary turned replica", readOnly, notRepl, notRepl, true},
		{"no answer twice", lost, lost, lost, true},
		{"full Redis", full, nil, full, false},
		{"full Redis after a write too few acknowledged", full, notRepl, notRepl, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, again := completeVerdict(tt.err, tt.prev)
			if got != tt.want || again != tt.again {
				t.Errorf("completeVerdict(%v, %v) = %v, %v; want %v, %v", tt.err, tt.prev, got, again, tt.want, tt.again)
			}
		})
	}
}
