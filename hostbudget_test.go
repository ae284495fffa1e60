package httpretry

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/jonboulle/clockwork"
)

// TestBudgetPerHostKeepsHealthyHostsRetries: one host fails every
// attempt and drains its budget; with BudgetPerHost the other host's
// transient failures are still retried, while with one shared budget
// they stop with budget_exhausted.
func TestBudgetPerHostKeepsHealthyHostsRetries(t *testing.T) {
	t.Parallel()
	for _, perHost := range []bool{true, false} {
		t.Run(fmt.Sprintf("per host %v", perHost), func(t *testing.T) {
			t.Parallel()
			fc := clockwork.NewFakeClock()
			var flaky int
			base := &countingBase{status: func(r *http.Request) int {
				if r.URL.Host == "down.test" {
					return 503
				}
				flaky++ // up.test: every other attempt fails
				if flaky%2 == 1 {
					return 503
				}
				return 200
			}}
			tr := &Transport{Base: base, Clock: fc, MaxAttempts: 2, Jitter: noJitter, BudgetPerHost: perHost}
			for range 100 { // drains down.test's 20 tokens and more
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://down.test/", nil))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			reasons := map[StopReason]int{}
			for range 20 {
				var o Outcome
				resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", "http://up.test/", nil))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				reasons[o.Reason]++
			}
			if perHost && reasons[Final] != 20 {
				t.Errorf("per-host budgets: the healthy host's operations ended %v; want all 20 final after a retry", reasons)
			}
			if !perHost && reasons[BudgetExhausted] == 0 {
				t.Errorf("one shared budget: %v; want the failing host to have drained it (budget_exhausted)", reasons)
			}
		})
	}
}

// TestBudgetPerHostBounded: at most maxHostBudgets hosts keep a
// budget.
func TestBudgetPerHostBounded(t *testing.T) {
	t.Parallel()
	tr := &Transport{BudgetPerHost: true}
	for i := range maxHostBudgets + 50 {
		tr.budgetFor(newRequest(t, context.Background(), "GET", fmt.Sprintf("http://h%d.test/", i), nil))
	}
	if n := tr.hostBudgetTable().Len(); n != maxHostBudgets {
		t.Errorf("%d host budgets; want at most %d", n, maxHostBudgets)
	}
	if tr.budgetFor(newRequest(t, context.Background(), "GET", "http://a.test/", nil)) == tr.budgetFor(newRequest(t, context.Background(), "GET", "http://b.test/", nil)) {
		t.Error("two hosts share a budget")
	}
}
