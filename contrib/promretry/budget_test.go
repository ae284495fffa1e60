package promretry

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
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

// fallBack puts the budget in the state of one whose Redis is gone.
func (b *sharedBudget) fallBack() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state, b.err = 1, errors.New("redis: connection refused")
}

func TestSharedBudgetGauges(t *testing.T) {
	b := &sharedBudget{tokens: 12.5}
	c, reg := newCollector(t, Options{Budget: b})
	all := samples(scrape(t, reg))
	checkFamily(t, all, "httpretry_budget_tokens", map[string]float64{`httpretry_budget_tokens`: 12.5})
	checkFamily(t, all, "httpretry_budget_shared", map[string]float64{`httpretry_budget_shared`: 1})

	b.fallBack()
	c.BudgetStateChange("local")
	all = samples(scrape(t, reg))
	// Redis is unreachable: no made-up token count, and the state says why.
	checkFamily(t, all, "httpretry_budget_tokens", map[string]float64{})
	checkFamily(t, all, "httpretry_budget_shared", map[string]float64{`httpretry_budget_shared`: 0})
	checkFamily(t, all, "httpretry_budget_state_changes_total", map[string]float64{
		`httpretry_budget_state_changes_total{state="local"}`: 1,
	})
	c.BudgetStateChange("shared")
	c.BudgetStateChange("closed")
	checkFamily(t, samples(scrape(t, reg)), "httpretry_budget_state_changes_total", map[string]float64{
		`httpretry_budget_state_changes_total{state="local"}`:  1,
		`httpretry_budget_state_changes_total{state="shared"}`: 1,
		`httpretry_budget_state_changes_total{state="other"}`:  1,
	})
}

// TestBudgetOfTheTransport: without Options.Budget, Instrument reports
// the budget the Transport uses, its default one included.
func TestBudgetOfTheTransport(t *testing.T) {
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
	c, reg := newCollector(t, Options{})
	checkFamily(t, samples(scrape(t, reg)), "httpretry_budget_tokens", map[string]float64{})
	tr := &httpretry.Transport{Base: base, Clock: fc, Jitter: noJitter}
	c.Instrument(tr)
	if r := await(t, start(tr, mustRequest(t, context.Background(), "GET", "http://api.test/"))); r.err != nil {
		t.Fatal(r.err)
	} else {
		r.resp.Body.Close()
	}
	all := samples(scrape(t, reg))
	// The default budget, NewTokenBucket(20, 0.1): its deposit found it full,
	// and the retry took one token.
	checkFamily(t, all, "httpretry_budget_tokens", map[string]float64{`httpretry_budget_tokens`: 19})
	checkFamily(t, all, "httpretry_budget_shared", map[string]float64{})
}

func TestBudgetWithoutTokensRefused(t *testing.T) {
	_, err := New(nil, Options{Budget: httpretry.Unlimited})
	if err == nil || !strings.Contains(err.Error(), "no Tokens method") {
		t.Errorf("New with a budget that cannot be read: %v; want an error", err)
	}
}
