package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// hedgeReport renders the hedging results as markdown tables followed by
// one line per target.
func hedgeReport(res *hedgeResults) string {
	var b strings.Builder
	c := res.cfg
	fmt.Fprintf(&b, "## Hedging: %.0f ops/s for %v per run, the same seeded arrivals (seed %d) for every policy, deadline %v per operation\n\n",
		c.rate, c.duration, c.seed, c.deadline)
	fmt.Fprintf(&b, "Command: `%s`. Latency is the caller's, until the body was read; extra requests are server requests beyond one per operation; "+
		"canceled attempts are requests whose caller gave up before the server answered; connections are those the server accepted; hedges refused are those httpretry's Outcomes report refused by the budget or the extra-load cap.\n\n", res.command)
	fmt.Fprintf(&b, "### Independent slowness: 5 ms, 1%% of attempts 1 s\n\n")
	tailTable(&b, res.independent)
	fmt.Fprintf(&b, "\n### Correlated slowness: 5 ms for %v, every request 300 ms for %v, then %d slots of mean %v (%.0f%% of capacity)\n\n",
		c.duration/4, c.duration/4, c.slots, c.busyMean, 100*c.rate*c.busyMean.Seconds()/float64(c.slots))
	tailTable(&b, res.correlated)
	fmt.Fprintf(&b, "\n### Zero configuration: fixed delays over the independent server\n\n")
	tailTable(&b, append(res.sweep, findHedge(res.independent, "adaptive")))
	fmt.Fprintf(&b, "\nPolicies:\n\n")
	for _, p := range hedgePolicies(c.fixed) {
		fmt.Fprintf(&b, "- %s: %s\n", p.name, p.desc)
	}
	b.WriteString("\n")
	for _, l := range hedgeLines(res) {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// tailTable writes one row per run.
func tailTable(b *strings.Builder, runs []*hedgeRun) {
	b.WriteString("| policy | ops | failed | p50 ms | p99 ms | p99.9 ms | max ms | extra requests | canceled attempts | connections | hedges refused |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range runs {
		if r == nil {
			continue
		}
		t := r.summary()
		fmt.Fprintf(b, "| %s | %d | %d | %s |\n", t.label, t.n, t.failed, tailCells(t))
	}
}

// tailCells are a run's measured columns, separated by " | ".
func tailCells(t tail) string {
	refused := "—"
	if t.refused >= 0 {
		refused = strconv.FormatInt(t.refused, 10)
	}
	return fmt.Sprintf("%s | %s | %s | %s | %.1f%% | %d | %d | %s",
		msCell(t.p50), msCell(t.p99), msCell(t.p999), msCell(t.max), t.extra, t.canceled, t.conns, refused)
}

// hedgeLines returns one line per target, from the runs there are.
func hedgeLines(res *hedgeResults) []string {
	var lines []string
	single, adaptive := findHedge(res.independent, "single"), findHedge(res.independent, "adaptive")
	if single != nil && adaptive != nil {
		var peers []tail
		for _, k := range []string{"failsafe", "hedgedhttp"} {
			if r := findHedge(res.independent, k); r != nil {
				peers = append(peers, r.summary())
			}
		}
		lines = append(lines, independentLine(single.summary(), adaptive.summary(), peers))
	}
	cs, ca := findHedge(res.correlated, "single"), findHedge(res.correlated, "adaptive")
	if cs != nil && ca != nil {
		lines = append(lines, correlatedLine(cs.summary(), ca.summary()))
	}
	if adaptive != nil && len(res.sweep) > 0 && res.shift != nil {
		a := adaptive.summary()
		var fixed []tail
		for _, r := range res.sweep {
			fixed = append(fixed, r.summary())
		}
		i := bestFixed(fixed, max(2, a.extra))
		if i < 0 {
			lines = append(lines, fmt.Sprintf("hedging: zero-config no fixed delay of the sweep at or under %.1f%% extra requests; target NOT met", max(2, a.extra)))
			return lines
		}
		after, settled, ok := convergence(res.shift.delays, delayEvery, res.shiftAt, 0.2, int(2*time.Second/delayEvery))
		lines = append(lines, zeroConfigLine(a, fixed[i], res.sweepDelays[i], after, settled, ok))
	}
	return lines
}
