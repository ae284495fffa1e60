package metricsutil

import (
	"context"
	"fmt"
	"reflect"

	"github.com/httpretry/httpretry"
)

// BudgetReader reads a retry budget for gauges: its tokens, and, for a
// budget shared through a store, whether it uses the shared bucket or
// its local fallback now. Create one with [ReadBudget]. A BudgetReader is
// safe for concurrent use when its budget is.
type BudgetReader struct {
	tokens func(context.Context) (float64, error)
	state  func() string // nil when the budget has no state
}

// ReadBudget returns a reader of b's tokens, and false when b has no
// Tokens method in either of the two forms httpretry's budgets have:
// Tokens() float64 ([*httpretry.TokenBucket]) or Tokens(context.Context)
// (float64, error) (a budget shared through a store, such as
// contrib/redisretry's Budget, whose reading can fail).
//
// When b also has a State method returning a [fmt.Stringer], as
// redisretry's Budget does ("shared" or "local"), [BudgetReader.State]
// reports it. That method is found by reflection, once, so that this
// package need not import the package that defines the state's type.
func ReadBudget(b any) (BudgetReader, bool) {
	var r BudgetReader
	switch tb := b.(type) {
	case interface{ Tokens() float64 }:
		r.tokens = func(context.Context) (float64, error) { return tb.Tokens(), nil }
	case interface {
		Tokens(context.Context) (float64, error)
	}:
		r.tokens = tb.Tokens
	default:
		return BudgetReader{}, false
	}
	r.state = stateMethod(b)
	return r, true
}

// stringer is the type a State method must return to be reported.
var stringer = reflect.TypeFor[fmt.Stringer]()

// stateMethod returns a function calling b's State method, or nil when b
// has none that takes nothing and returns a fmt.Stringer.
func stateMethod(b any) func() string {
	m := reflect.ValueOf(b).MethodByName("State")
	if !m.IsValid() {
		return nil
	}
	mt := m.Type()
	if mt.NumIn() != 0 || mt.NumOut() != 1 || !mt.Out(0).Implements(stringer) {
		return nil
	}
	return func() string {
		return m.Call(nil)[0].Interface().(fmt.Stringer).String()
	}
}

// Tokens returns the tokens in the budget now. It fails only for a budget
// whose reading can fail, such as one kept in an unreachable store.
func (r BudgetReader) Tokens(ctx context.Context) (float64, error) {
	return r.tokens(ctx)
}

// State returns the budget's state as its State method spells it
// ("shared" or "local" for redisretry's Budget), and false when the
// budget has none.
func (r BudgetReader) State() (string, bool) {
	if r.state == nil {
		return "", false
	}
	return r.state(), true
}

// Budget states as redisretry's Budget spells them, and the value the
// adapters report for any other spelling, so that the label stays
// bounded.
const (
	StateShared = "shared"
	StateLocal  = "local"
	StateOther  = "other"
)

// States are the values of a budget state label, in a fixed order.
var States = [...]string{StateShared, StateLocal, StateOther}

// StateIndex returns the index in [States] of state, StateOther's for
// any spelling not listed.
func StateIndex(state string) int {
	for i, s := range States[:len(States)-1] {
		if s == state {
			return i
		}
	}
	return len(States) - 1
}

// TransportBudget returns the budget t's operations use, when it can be
// read for a gauge: t's Budget, or the default budget t creates for
// itself ([httpretry.Transport.EffectiveBudget]).
func TransportBudget(t *httpretry.Transport) (BudgetReader, bool) {
	return ReadBudget(t.EffectiveBudget())
}
