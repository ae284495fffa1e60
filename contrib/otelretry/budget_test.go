package otelretry

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/httpretry/httpretry"
)

// sharedBudget has the method set of contrib/redisretry's Budget that the
// gauges read (Tokens from a store, which can fail, and State), without
// this module importing redisretry and its Redis client. The real one is
// read through the same code in redisretry's TestBudgetReadableByMetrics.
type sharedBudget struct {
	mu     sync.Mutex
	tokens float64
	err    error
	state  budgetState
}

type budgetState int

func (s budgetState) String() string { return [...]string{"shared", "local"}[s] }

func (b *sharedBudget) Deposit()                      {}
func (b *sharedBudget) Withdraw(context.Context) bool { return false }
func (b *sharedBudget) Refund()                       {}
func (b *sharedBudget) Tokens(context.Context) (float64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tokens, b.err
}
func (b *sharedBudget) State() budgetState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

func TestSharedBudgetGauges(t *testing.T) {
	b := &sharedBudget{tokens: 12.5}
	m, metrics := newMetrics(t, Options{Budget: b})
	diffLines(t, filter(metrics(), "httpretry.client.budget"), []string{
		"httpretry.client.budget.shared{} 1",
		"httpretry.client.budget.tokens{} 12.5",
	})
	b.mu.Lock()
	b.state, b.err = 1, errors.New("redis: connection refused")
	b.mu.Unlock()
	m.BudgetStateChange("local")
	m.BudgetStateChange("closed")
	// Redis is unreachable: no made-up token count, and the state says why.
	diffLines(t, filter(metrics(), "httpretry.client.budget"), []string{
		"httpretry.client.budget.shared{} 0",
		"httpretry.client.budget.state_changes{httpretry.budget.state=local} 1",
		"httpretry.client.budget.state_changes{httpretry.budget.state=other} 1",
	})
}

// TestInstrumentObservesTheDefaultBudget: Instrument reports the budget
// the Transport creates for itself, and leaves the Transport's Budget
// field alone.
func TestInstrumentObservesTheDefaultBudget(t *testing.T) {
	mp, reader := newReader(t)
	tr := &httpretry.Transport{Base: newStaticBase()}
	if _, err := Instrument(tr, Options{MeterProvider: mp}); err != nil {
		t.Fatal(err)
	}
	if tr.Budget != nil {
		t.Errorf("Instrument set the Transport's Budget to %v; want it left nil", tr.Budget)
	}
	diffLines(t, filter(collect(t, reader), "httpretry.client.budget"), []string{
		"httpretry.client.budget.tokens{} 20",
	})
}

func TestBudgetWithoutTokensRefused(t *testing.T) {
	mp, _ := newReader(t)
	_, err := NewMetrics(Options{MeterProvider: mp, Budget: httpretry.Unlimited})
	if err == nil || !strings.Contains(err.Error(), "no Tokens method") {
		t.Errorf("NewMetrics with a budget that cannot be read: %v; want an error", err)
	}
}
