package metricsutil

import (
	"context"
	"errors"
	"testing"

	"github.com/httpretry/httpretry"
)

// sharedBudget has the method set of contrib/redisretry's Budget that
// gauges read: tokens read from a store, which can fail, and a state.
type sharedBudget struct {
	tokens float64
	err    error
	state  fakeState
}

type fakeState int

func (s fakeState) String() string { return [...]string{"shared", "local"}[s] }

func (b *sharedBudget) Deposit()                      {}
func (b *sharedBudget) Withdraw(context.Context) bool { return true }
func (b *sharedBudget) Refund()                       {}
func (b *sharedBudget) Tokens(context.Context) (float64, error) {
	return b.tokens, b.err
}
func (b *sharedBudget) State() fakeState { return b.state }

// noStringState has a State method of another shape: not reported.
type noStringState struct{ sharedBudget }

func (noStringState) State() int { return 1 }

func TestReadBudget(t *testing.T) {
	t.Parallel()
	unreachable := errors.New("store unreachable")
	tests := []struct {
		name     string
		budget   any
		ok       bool
		tokens   float64
		err      error
		state    string
		hasState bool
	}{
		{"token bucket", httpretry.NewTokenBucket(7, 0.1), true, 7, nil, "", false},
		{"shared, in Redis", &sharedBudget{tokens: 12.5, state: 0}, true, 12.5, nil, "shared", true},
		{"shared, fallen back", &sharedBudget{tokens: 3, state: 1}, true, 3, nil, "local", true},
		{"shared, unreadable", &sharedBudget{err: unreachable, state: 1}, true, 0, unreachable, "local", true},
		{"state of another shape", &noStringState{sharedBudget{tokens: 1}}, true, 1, nil, "", false},
		{"no Tokens method", httpretry.Unlimited, false, 0, nil, "", false},
		{"nil", nil, false, 0, nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := ReadBudget(tt.budget)
			if ok != tt.ok {
				t.Fatalf("ReadBudget ok = %v; want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			tokens, err := r.Tokens(context.Background())
			if tokens != tt.tokens || !errors.Is(err, tt.err) {
				t.Errorf("Tokens() = %v, %v; want %v, %v", tokens, err, tt.tokens, tt.err)
			}
			state, has := r.State()
			if state != tt.state || has != tt.hasState {
				t.Errorf("State() = %q, %v; want %q, %v", state, has, tt.state, tt.hasState)
			}
		})
	}
}

func TestStateIndex(t *testing.T) {
	t.Parallel()
	for state, want := range map[string]string{"shared": "shared", "local": "local", "closed": "other", "": "other"} {
		if got := States[StateIndex(state)]; got != want {
			t.Errorf("StateIndex(%q) is %q; want %q", state, got, want)
		}
	}
}

func TestTransportBudgetIsTheDefault(t *testing.T) {
	t.Parallel()
	tr := &httpretry.Transport{}
	r, ok := TransportBudget(tr)
	if !ok {
		t.Fatal("the default budget cannot be read")
	}
	if got, _ := r.Tokens(context.Background()); got != 20 {
		t.Errorf("default budget tokens = %v; want 20", got)
	}
}
