package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// totals are the counters the demo reads back from the metrics.
type totals struct {
	operations, succeeded       float64 // operations, and those with outcome="success"
	initial, initialSucceeded   float64 // initial attempts, and those that succeeded
	retries, retriesSucceeded   float64 // retry attempts, and those that succeeded
	timeouts                    float64 // attempts cut by their time limit
	budgetTokens                float64
	reasons, outcomes, idemKind map[string]float64
	conns                       map[string]float64 // attempts by connection use
	results                     map[string]float64 // attempts by result
	waits                       map[string]float64 // waits before a retry by cause
}

// readTotals sums the demo's metric families, keyed by name.
func readTotals(fams map[string]*dto.MetricFamily) totals {
	t := totals{reasons: map[string]float64{}, outcomes: map[string]float64{}, idemKind: map[string]float64{},
		conns: map[string]float64{}, results: map[string]float64{}, waits: map[string]float64{}}
	each := func(name string, f func(labels map[string]string, v float64)) {
		for _, m := range fams[name].GetMetric() {
			labels := make(map[string]string)
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			f(labels, m.GetCounter().GetValue()+m.GetGauge().GetValue()+float64(m.GetHistogram().GetSampleCount()))
		}
	}
	each("httpretry_operations_total", func(l map[string]string, v float64) {
		t.operations += v
		t.reasons[l["reason"]] += v
		t.outcomes[l["outcome"]] += v
	})
	t.succeeded = t.outcomes["success"]
	each("httpretry_attempts_total", func(l map[string]string, v float64) {
		t.results[l["result"]] += v
		if l["kind"] == "initial" {
			t.initial += v
		} else {
			t.retries += v
		}
	})
	each("httpretry_attempt_successes_total", func(l map[string]string, v float64) {
		if l["kind"] == "initial" {
			t.initialSucceeded += v
		} else {
			t.retriesSucceeded += v
		}
	})
	each("httpretry_attempt_timeouts_total", func(_ map[string]string, v float64) { t.timeouts += v })
	each("httpretry_budget_tokens", func(_ map[string]string, v float64) { t.budgetTokens = v })
	each("httpretry_attempt_duration_seconds", func(l map[string]string, v float64) { t.conns[l["conn"]] += v })
	each("httpretry_retry_wait_seconds", func(l map[string]string, v float64) { t.waits[l["cause"]] += v })
	each("httpretry_idempotency_events_total", func(l map[string]string, v float64) { t.idemKind[l["kind"]] += v })
	return t
}

// sample is one point of the time series: the rates over one interval.
type sample struct {
	at                  time.Duration // end of the interval, since the start
	phase               string
	operations          float64
	firstAttemptSuccess float64 // initial attempts that succeeded / initial attempts
	finalSuccess        float64 // operations that succeeded / operations
	retriesPerOp        float64
	budgetTokens        float64
	// Shares of the attempts that ended in the interval, by result: why
	// first attempts fail.
	attempts5xx, attemptsTimeout float64
}

// between returns the sample for the interval from prev to cur.
func between(prev, cur totals, at time.Duration, phase string) sample {
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	ops := cur.operations - prev.operations
	attempts := 0.0
	for r, n := range cur.results {
		attempts += n - prev.results[r]
	}
	return sample{
		at:                  at,
		phase:               phase,
		operations:          ops,
		firstAttemptSuccess: ratio(cur.initialSucceeded-prev.initialSucceeded, cur.initial-prev.initial),
		finalSuccess:        ratio(cur.succeeded-prev.succeeded, ops),
		retriesPerOp:        ratio(cur.retries-prev.retries, ops),
		budgetTokens:        cur.budgetTokens,
		attempts5xx:         ratio(cur.results["5xx"]-prev.results["5xx"], attempts),
		attemptsTimeout:     ratio(cur.results["timeout"]-prev.results["timeout"], attempts),
	}
}

// writeCSV writes the samples with a header line.
func writeCSV(w io.Writer, samples []sample) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"seconds", "phase", "operations", "first_attempt_success", "final_success", "retries_per_operation", "budget_tokens",
		"attempts_5xx", "attempts_timeout"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	for _, s := range samples {
		cw.Write([]string{f(s.at.Seconds()), s.phase, f(s.operations), f(s.firstAttemptSuccess), f(s.finalSuccess), f(s.retriesPerOp), f(s.budgetTokens),
			f(s.attempts5xx), f(s.attemptsTimeout)})
	}
	cw.Flush()
	return cw.Error()
}

// readCSV reads samples written by writeCSV.
func readCSV(r io.Reader) ([]sample, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("empty CSV")
	}
	var out []sample
	for i, row := range rows[1:] {
		if len(row) != 9 {
			return nil, fmt.Errorf("line %d: %d fields, want 9", i+2, len(row))
		}
		var v [8]float64
		for j, k := range []int{0, 2, 3, 4, 5, 6, 7, 8} {
			if v[j], err = strconv.ParseFloat(row[k], 64); err != nil {
				return nil, fmt.Errorf("line %d: %w", i+2, err)
			}
		}
		out = append(out, sample{
			at: time.Duration(v[0] * float64(time.Second)), phase: row[1], operations: v[1],
			firstAttemptSuccess: v[2], finalSuccess: v[3], retriesPerOp: v[4], budgetTokens: v[5],
			attempts5xx: v[6], attemptsTimeout: v[7],
		})
	}
	return out, nil
}
