package promretry

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/httpretry/httpretry/internal/metricsutil"
	"github.com/prometheus/client_golang/prometheus"
)

// budgetReadTimeout bounds one scrape's reading of a budget kept in a
// store: a scrape must not hang on an unreachable Redis.
const budgetReadTimeout = 2 * time.Second

// budgetCollector reports the retry budget a Collector observes: the one
// in Options.Budget, or else the budget of the first Transport
// instrumented. Until there is one, it reports nothing.
type budgetCollector struct {
	tokens, shared *prometheus.Desc
	reader         atomic.Pointer[metricsutil.BudgetReader]
}

func newBudgetCollector(constLabels prometheus.Labels) *budgetCollector {
	return &budgetCollector{
		tokens: prometheus.NewDesc("httpretry_budget_tokens",
			"Tokens left in the retry budget; a retry needs one whole token.", nil, constLabels),
		shared: prometheus.NewDesc("httpretry_budget_shared",
			"1 while a budget shared through a store (redisretry) uses the shared bucket, 0 while it uses its local fallback.",
			nil, constLabels),
	}
}

// observe makes r the budget reported, unless one already is.
func (b *budgetCollector) observe(r metricsutil.BudgetReader) {
	b.reader.CompareAndSwap(nil, &r)
}

func (b *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- b.tokens
	ch <- b.shared
}

// Collect reads the budget. A budget whose reading fails (its store is
// unreachable) reports no tokens rather than a made-up value; its state
// says why.
func (b *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	r := b.reader.Load()
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), budgetReadTimeout)
	defer cancel()
	if tokens, err := r.Tokens(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(b.tokens, prometheus.GaugeValue, tokens)
	}
	if state, ok := r.State(); ok {
		v := 0.0
		if state == metricsutil.StateShared {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(b.shared, prometheus.GaugeValue, v)
	}
}

// BudgetStateChange counts a change of a shared budget's state in
// httpretry_budget_state_changes_total{state}: state is the new one,
// "shared" or "local" ("other" for any other string). Wire it to
// redisretry's hook:
//
//	OnStateChange: func(s redisretry.State) { metrics.BudgetStateChange(s.String()) },
func (c *Collector) BudgetStateChange(state string) {
	i := metricsutil.StateIndex(state)
	observerCounter(&c.stateChanges[i], c.budgetStates, metricsutil.States[i]).Inc()
}

// observerCounter returns the series of a one-label counter, creating it
// on first use.
func observerCounter(s *slot[prometheus.Counter], vec *prometheus.CounterVec, value string) prometheus.Counter {
	if v, ok := s.get(); ok {
		return v
	}
	return s.set(vec.WithLabelValues(value))
}
