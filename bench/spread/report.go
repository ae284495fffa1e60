package main

import (
	"fmt"
	"io"
	"time"
)

// Targets of the spread line.
const (
	targetElsewhere = 99.0
	targetSuccess   = 99.9
)

// report writes the table of runs and the spread line, and reports
// whether every target was met.
func report(w io.Writer, runs []*run, rate float64, duration time.Duration) bool {
	fmt.Fprintf(w, "Four backends on 127.0.0.2-127.0.0.5 behind one hostname; %.0f operations a second for %v per run, the same arrivals for every policy; MaxAttempts 2, Timeout 3 s, a budget that refuses no retry; with the slow backend (1 s), hedges after 50 ms. The backend that fails or goes slow is the one that got the most of 20 operations sent first, one by one: one the client is connected to. \"today\": one pooled *http.Transport whose dialer picks one of the addresses at random for each new connection.\n\n", rate, duration)
	fmt.Fprintln(w, "| protocol | backends | policy | ops | success | p99 ms | second attempts | of those, on another address | connections | TLS errors |")
	fmt.Fprintln(w, "|---|---|---|--:|--:|--:|--:|--:|--:|--:|")
	var retried, retriedElsewhere, hedged, hedgedElsewhere, failingOps, failingOK int
	var tlsErrs int64
	for _, r := range runs {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %d | %d | %s | %d | %d |\n",
			r.proto, r.fault, r.policy, r.ops, percent(r.ok, r.ops), r.p99.Milliseconds(), r.second, percent(r.elsewhere, r.second), r.conns, r.tlsErrs)
		if !r.spread {
			continue
		}
		tlsErrs += r.tlsErrs
		if r.fault == "1 slow" {
			hedged += r.second
			hedgedElsewhere += r.elsewhere
			continue
		}
		retried += r.second
		retriedElsewhere += r.elsewhere
		failingOps += r.ops
		failingOK += r.ok
	}
	x, y, z := pct(retriedElsewhere, retried), pct(hedgedElsewhere, hedged), pct(failingOK, failingOps)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Over the spread runs: %d retried operations, %d hedged ones, %d operations with one backend failing.\n\n", retried, hedged, failingOps)
	fmt.Fprintf(w, "spread: retries on another address %s%%, hedges on another address %s%%, success %s%% with 1 of 4 backends failing, TLS errors %d\n",
		num(x), num(y), num(z), tlsErrs)
	return retried > 0 && hedged > 0 && x >= targetElsewhere && y >= targetElsewhere && z >= targetSuccess && tlsErrs == 0
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

func percent(n, of int) string {
	if of == 0 {
		return "—"
	}
	return num(pct(n, of)) + "%"
}

// num writes a percentage with one decimal, or none when it is whole.
func num(v float64) string {
	if v == float64(int(v)) {
		return fmt.Sprintf("%d", int(v))
	}
	return fmt.Sprintf("%.1f", v)
}
