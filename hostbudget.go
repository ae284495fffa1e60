package httpretry

import (
	"net/http"

	"github.com/httpretry/httpretry/internal/desttable"
)

// maxHostBudgets is how many hosts keep a budget of their own with
// BudgetPerHost.
const maxHostBudgets = desttable.DefaultMax

// hostBudget is one host's retry budget, when BudgetPerHost is set.
type hostBudget struct{ b *TokenBucket }

func initHostBudget(h *hostBudget) {
	h.b = NewTokenBucket(DefaultBudgetCapacity, DefaultBudgetPerRequest)
}

// budgetFor returns the budget of req's operation: Budget, or the
// default shared by every host, or, with BudgetPerHost and no Budget,
// the default budget of req's host alone.
func (t *Transport) budgetFor(req *http.Request) Budget {
	if t.Budget != nil || !t.BudgetPerHost {
		return t.budget()
	}
	return t.hostBudgetTable().GetHost(req, 0, initHostBudget).b
}

// hostBudgetTable returns the per-host budgets, created on first use and
// shared with clones.
func (t *Transport) hostBudgetTable() *desttable.Table[hostBudget] {
	if d := t.hostBudgets.Load(); d != nil {
		return d
	}
	t.hostBudgets.CompareAndSwap(nil, &desttable.Table[hostBudget]{})
	return t.hostBudgets.Load()
}
