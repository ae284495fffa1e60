package main

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Targets of the throttle scenarios.
const (
	maxOutageLoad       = 0.25             // server hits per offered operation during the outage
	maxLocalFailure     = time.Millisecond // p99 of an operation the throttle refuses
	maxHealthyDelta     = 0.01             // healthy goodput against a single attempt's
	recoverTo           = 0.95             // of a single attempt's goodput …
	maxRecovery         = 2 * time.Second  // … within this after the server heals
	maxHitsPerAccepted  = 2.0              // in the brownout: K
	maxMetastable       = 10 * time.Second
	maxQuota429s        = 1 // per window per process
	maxHostDelta        = 0.01
	minHostRetriesRatio = 0.98
)

// outageMeasure is what the outage targets need of one run.
type outageMeasure struct {
	load         float64       // server hits per operation of the outage phase
	healthyDelta float64       // (goodput − single's) / single's, healthy phase
	recovery     time.Duration // until goodput ≥ recoverTo of single's
	recovered    bool
	refused      int           // operations the throttle refused in the outage
	refusedP99   time.Duration // their latency
	failedP50    time.Duration // of every failed operation of the outage
}

// measureOutage measures r against the single attempt's run of the same
// arrivals.
func measureOutage(r, single *trun) outageMeasure {
	st, ss := r.phaseStats(), single.phaseStats()
	m := outageMeasure{load: st[1].amp, failedP50: st[1].failLat.p50}
	if ss[0].goodput > 0 {
		m.healthyDelta = (st[0].goodput - ss[0].goodput) / ss[0].goodput
	}
	var lat []time.Duration
	for i, o := range r.ops {
		if o.phase == 1 && r.local[i] {
			lat = append(lat, o.latency)
		}
	}
	q := summarise(lat)
	m.refused, m.refusedP99 = q.n, q.p99
	heal := r.phases[0].dur + r.phases[1].dur
	n := int(total(r.phases) / bucket)
	i, ok := recoveredBy(okByArrival(r.ops, n), okByArrival(single.ops, n), int(heal/bucket), recoveryWindow, recoverTo)
	m.recovery, m.recovered = time.Duration(i)*bucket-heal, ok
	return m
}

// okByArrival returns the successful operations by the 100ms bucket of
// their arrival, over n buckets.
func okByArrival(ops []opResult, n int) []int64 {
	out := make([]int64, n)
	for _, o := range ops {
		if i := int(o.start / bucket); o.ok && i < n {
			out[i]++
		}
	}
	return out
}

// recoveredBy returns the first bucket i ≥ from whose window of w
// buckets holds at least frac of the reference's successes: the same
// arrivals, so the same operations. False if no complete window does.
func recoveredBy(good, ref []int64, from, w int, frac float64) (int, bool) {
	for i := from; i+w <= min(len(good), len(ref)); i++ {
		if float64(addUp(good[i:i+w])) >= frac*float64(addUp(ref[i:i+w])) {
			return i, true
		}
	}
	return 0, false
}

// brownoutMeasure is goodput in the brownout and server hits per
// accepted (successful) operation.
func brownoutMeasure(r *trun) (goodput, hitsPerAccepted float64) {
	s := r.phaseStats()[1]
	return s.goodput, float64(s.hits) / math.Max(1, float64(s.ok))
}

// findT returns the run of the policy with key, or nil.
func findT(runs []*trun, key string) *trun {
	for _, r := range runs {
		if r.policy.key == key {
			return r
		}
	}
	return nil
}

// outageLine is the printed line of the outage.
func outageLine(prefix string, m outageMeasure, others []string) string {
	s := fmt.Sprintf("%s load %.2fx, recovery %s, refused locally in %s (p99 of %d), healthy goodput %+.2f%%",
		prefix, m.load, recoveryText(m.recovery, m.recovered), ms(m.refusedP99), m.refused, 100*m.healthyDelta)
	return withOthers(s, others)
}

// withOthers appends the other policies' figures in parentheses.
func withOthers(s string, others []string) string {
	if len(others) == 0 {
		return s
	}
	return s + " (" + strings.Join(others, "; ") + ")"
}

// throttleLines returns one line per scenario that ran, and the targets
// they were checked against.
func throttleLines(res *tresults) ([]string, []target) {
	var lines []string
	var ts []target
	if s, t := findT(res.outage, keySingle), findT(res.outage, keyThrottle); s != nil && t != nil {
		m := measureOutage(t, s)
		var others []string
		for _, r := range res.outage {
			if r.policy.key != keyThrottle && r.policy.key != keySingle {
				o := measureOutage(r, s)
				others = append(others, fmt.Sprintf("%s: load %.2fx, recovery %s", r.policy.name, o.load, recoveryText(o.recovery, o.recovered)))
			}
		}
		lines = append(lines, outageLine("throttle: outage", m, others))
		ts = append(ts, outageTargets("outage", m)...)
	}
	if l, t, ok := brownoutLine(res.brownout); ok {
		lines = append(lines, l)
		ts = append(ts, t...)
	}
	if l, t, ok := metastableLine(res.meta); ok {
		lines = append(lines, l)
		ts = append(ts, t...)
	}
	if l, t, ok := hostsLine(res.hosts); ok {
		lines = append(lines, l)
		ts = append(ts, t...)
	}
	if l, t, ok := quotaLine(res.quota); ok {
		lines = append(lines, l)
		ts = append(ts, t...)
	}
	if l, t, ok := fleetLine(res); ok {
		lines = append(lines, l)
		ts = append(ts, t...)
	}
	if l, t, ok := sharedFleetLine(res.shared); ok {
		lines = append(lines, l)
		ts = append(ts, t...)
	}
	for _, line := range []func(*tresults) (string, []target, bool){proxyLine, lowRateLine, shedLine} {
		if l, t, ok := line(res); ok {
			lines = append(lines, l)
			ts = append(ts, t...)
		}
	}
	return lines, ts
}

// fleetLine reports the fleet's runs: the throttle's at fleetRate a
// process against a single attempt's over the same processes and
// arrivals, the other policies', and the throttle's over the outage's own
// arrivals, a few a second a process, against the outage's single
// attempt.
func fleetLine(res *tresults) (string, []target, bool) {
	s, t := findT(res.fleet, keySingle), findT(res.fleet, keyThrottle)
	if s == nil || t == nil {
		return "", nil, false
	}
	m := measureOutage(t, s)
	var others []string
	for _, r := range res.fleet {
		if r.policy.key != keyThrottle && r.policy.key != keySingle {
			o := measureOutage(r, s)
			others = append(others, fmt.Sprintf("%s: load %.2fx, recovery %s", r.policy.name, o.load, recoveryText(o.recovery, o.recovered)))
		}
	}
	if low, ls := findT(res.fleetLow, keyThrottle), findT(res.outage, keySingle); low != nil && ls != nil {
		o := measureOutage(low, ls)
		others = append(others, fmt.Sprintf("%s at %s a second each: load %.2fx, recovery %s",
			low.policy.name, perProcess(res.cfg.rate, res.cfg.fleet), o.load, recoveryText(o.recovery, o.recovered)))
	}
	prefix := fmt.Sprintf("fleet: P=%d outage", t.processes)
	l := outageLine(prefix, m, nil) + fmt.Sprintf(", %s operations a second each", perProcess(res.cfg.fleetRate*float64(res.cfg.fleet), res.cfg.fleet))
	return withOthers(l, others), outageTargets(fmt.Sprintf("fleet P=%d", t.processes), m), true
}

// perProcess formats a rate shared by n processes, per process.
func perProcess(rate float64, n int) string {
	return strconv.FormatFloat(rate/float64(max(n, 1)), 'g', 3, 64)
}

// brownoutLine reports the brownout runs.
func brownoutLine(runs []*trun) (string, []target, bool) {
	s, t := findT(runs, keySingle), findT(runs, keyThrottle)
	if s == nil || t == nil {
		return "", nil, false
	}
	g, h := brownoutMeasure(t)
	sg, _ := brownoutMeasure(s)
	var others []string
	for _, r := range runs {
		if r.policy.key != keyThrottle {
			og, oh := brownoutMeasure(r)
			others = append(others, fmt.Sprintf("%s: %.1f/s, %.2f hits per accepted", r.policy.name, og, oh))
		}
	}
	l := withOthers(fmt.Sprintf("brownout: goodput %.1f/s vs single attempt's %.1f/s, %.2f hits per accepted request", g, sg, h), others)
	return l, []target{
		{name: "brownout: goodput ≥ single attempt's", measured: fmt.Sprintf("%.1f/s vs %.1f/s", g, sg), met: g >= sg},
		{name: "brownout: server hits per accepted request ≤ 2", measured: fmt.Sprintf("%.2f", h), met: h <= maxHitsPerAccepted},
	}, true
}

// outageTargets checks the outage's four targets.
func outageTargets(name string, m outageMeasure) []target {
	return []target{
		{name: name + ": server load during the outage ≤ 0.25× offered", measured: fmt.Sprintf("%.3f×", m.load), met: m.load <= maxOutageLoad},
		{name: name + ": refused operations fail locally in < 1 ms (p99)", measured: fmt.Sprintf("%s over %d refused; every failed p50 %s", ms(m.refusedP99), m.refused, ms(m.failedP50)),
			met: m.refused > 0 && m.refusedP99 < maxLocalFailure},
		{name: name + ": healthy goodput within 1% of single attempt's", measured: fmt.Sprintf("%+.2f%%", 100*m.healthyDelta), met: math.Abs(m.healthyDelta) <= maxHealthyDelta},
		{name: name + ": ≥ 95% of single attempt's goodput within 2 s of healing", measured: recoveryText(m.recovery, m.recovered), met: m.recovered && m.recovery <= maxRecovery},
	}
}

// metastableLine reports the metastable runs.
func metastableLine(runs []*metaRun) (string, []target, bool) {
	var t *metaRun
	var others []string
	stuck := true // naive and budget-only stay overloaded
	for _, r := range runs {
		if r.policy.key == keyThrottle {
			t = r
			continue
		}
		others = append(others, r.policy.name+": "+recoveryText(r.recovered, r.ok))
		if (r.policy.key == keyBudget || r.policy.key == keyNaive) && r.ok {
			stuck = false
		}
	}
	if t == nil {
		return "", nil, false
	}
	l := withOthers("metastable: recovered in "+recoveryText(t.recovered, t.ok), others)
	return l, []target{
		{name: "metastable: naive retries and budget only stay overloaded after the trigger", measured: strings.Join(others, "; "), met: stuck},
		{name: "metastable: the throttle returns to full goodput within 10 s, no operator", measured: recoveryText(t.recovered, t.ok), met: t.ok && t.recovered <= maxMetastable},
	}, true
}

// hostsLine reports the healthy host's goodput and retries with the
// other host down, against the same policy's run with both healthy.
func hostsLine(runs []*hostsRun) (string, []target, bool) {
	type cmp struct {
		delta            float64
		retries, refRetr int64
	}
	by := map[string]*cmp{}
	var order []string
	for _, r := range runs {
		if !r.down {
			continue
		}
		for _, ref := range runs {
			if ref.down || ref.policy.key != r.policy.key {
				continue
			}
			_, ok, retr := r.healthyHost(1)
			_, rok, rretr := ref.healthyHost(1)
			by[r.policy.key] = &cmp{delta: (float64(ok) - float64(rok)) / math.Max(1, float64(rok)), retries: retr, refRetr: rretr}
			order = append(order, r.policy.key)
		}
	}
	t, ok := by[keyThrottle]
	if !ok {
		return "", nil, false
	}
	var others []string
	for _, k := range order {
		if k != keyThrottle {
			c := by[k]
			others = append(others, fmt.Sprintf("%s: %+.2f%%, retries %d vs %d", throttlePolicy(k, 0).name, 100*c.delta, c.retries, c.refRetr))
		}
	}
	l := withOthers(fmt.Sprintf("two-hosts: healthy host goodput %+.2f%%, retries %d vs %d with the other host down", 100*t.delta, t.retries, t.refRetr), others)
	return l, []target{{
		name:     "two-hosts: healthy host's goodput (within 1%) and retries (≥ 98%) untouched by the other's outage",
		measured: fmt.Sprintf("%+.2f%%, retries %d vs %d", 100*t.delta, t.retries, t.refRetr),
		met:      math.Abs(t.delta) <= maxHostDelta && float64(t.retries) >= minHostRetriesRatio*float64(t.refRetr),
	}}, true
}

// quotaLine reports the 429s per window.
func quotaLine(runs []*quotaRun) (string, []target, bool) {
	var parts, others []string
	var ts []target
	for _, r := range runs {
		w := worst(r.rejected)
		good := float64(sumInts(r.accepted)) / math.Max(1, float64(len(r.accepted)))
		if r.policy.key != keyThrottle {
			others = append(others, fmt.Sprintf("%s, %s: at most %d", r.policy.name, r.headers, w))
			continue
		}
		parts = append(parts, fmt.Sprintf("%d (%s, %.0f accepted per window)", w, r.headers, good))
		ts = append(ts, target{name: fmt.Sprintf("quota, %s headers: 429s per window ≤ 1 per process", r.headers),
			measured: fmt.Sprintf("at most %d, windows %v", w, r.rejected), met: w <= maxQuota429s && len(r.rejected) > 0})
	}
	if len(parts) == 0 {
		return "", nil, false
	}
	return withOthers("quota: 429s per window at most "+strings.Join(parts, ", "), others), ts, true
}

func sumInts(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}

// throttleReport returns throttle.md.
func throttleReport(res *tresults) string {
	var b strings.Builder
	c := res.cfg
	fmt.Fprintf(&b, "# Overload: throttle, per-host budgets and quota pacing — results\n\n")
	fmt.Fprintf(&b, "Generated by `%s` (from `bench/`) on %s, %s/%s, %d CPUs, %s; the run took %s.\n\n",
		res.command, res.started.Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), res.wall.Round(time.Second))
	lines, ts := throttleLines(res)
	b.WriteString("```\n" + strings.Join(lines, "\n") + "\n```\n\n")
	if len(ts) > 0 {
		b.WriteString("## Targets\n\n| target | measured | met |\n|---|---|---|\n")
		for _, t := range ts {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", t.name, t.measured, yesNo(t.met))
		}
		b.WriteString("\n")
	}
	if len(res.outage) > 0 {
		fmt.Fprintf(&b, "## Outage\n\nThe shedding server (C = %d, S = %v), λ = %.0f/s Poisson, %v deadline: healthy for %v, every request 503 for %v, healthy for %v.\n\n",
			c.capacity, c.service, c.rate, c.deadline, c.healthy, c.outage, c.healthy)
		b.WriteString("![server hits per second, outage](throttle-outage.svg)\n\n")
		outageTable(&b, res.outage, findT(res.outage, keySingle))
	}
	if len(res.brownout) > 0 {
		fmt.Fprintf(&b, "## Brownout\n\nThe same server for %v serving at most %.0f requests a second (a token bucket saving up %v of it; every other request 503 at once): half the offered load.\n\n",
			c.brownout, c.rate/2, pacedBurst)
		b.WriteString("| policy | goodput/s | hits | hits per accepted | refused locally |\n|---|---|---|---|---|\n")
		for _, r := range res.brownout {
			g, h := brownoutMeasure(r)
			fmt.Fprintf(&b, "| %s | %.1f | %d | %.2f | %d |\n", r.policy.name, g, r.phaseStats()[1].hits, h, countLocal(r, 1))
		}
		b.WriteString("\n")
	}
	if len(res.meta) > 0 {
		metaSection(&b, res)
	}
	if len(res.hosts) > 0 {
		fmt.Fprintf(&b, "## Two hosts\n\nOne client, its operations dealt in turn to two hosts. The healthy one answers 503 to the first attempt of one operation in %d; "+
			"the other is down (every request 503) for the middle %v, or, in the reference run, never.\n\n", c.hostFail, c.healthy)
		b.WriteString("| policy | other host | healthy host ops | succeeded | retries |\n|---|---|---|---|---|\n")
		for _, r := range res.hosts {
			ops, ok, retr := r.healthyHost(1)
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %d |\n", r.policy.name, map[bool]string{true: "down", false: "healthy"}[r.down], ops, ok, retr)
		}
		b.WriteString("\n")
	}
	if len(res.quota) > 0 {
		q := c.quota
		fmt.Fprintf(&b, "## Quota\n\nA server that grants %d requests per %v window (aligned to the epoch) and answers 429, without Retry-After, beyond it; "+
			"every answer states the quota in headers. Offered %.0f/s for %v; complete windows only.\n\n", q.limit, q.window, q.rate, q.dur)
		b.WriteString("| policy | headers | 429s by window | 200s by window | refused locally |\n|---|---|---|---|---|\n")
		for _, r := range res.quota {
			n := 0
			for _, o := range r.ops {
				if o.local {
					n++
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %v | %v | %d |\n", r.policy.name, r.headers, r.rejected, r.accepted, n)
		}
		b.WriteString("\n")
	}
	if len(res.fleet) > 0 {
		fmt.Fprintf(&b, "## Fleet\n\nThe outage, over P = %d processes, each with its own Transport, each calling %s times a second (%.0f a second in all, dealt in turn), "+
			"against a server that serves %d requests at once; recovery against the single attempt of these processes.\n\n",
			c.fleet, perProcess(c.fleetRate*float64(c.fleet), c.fleet), c.fleetRate*float64(c.fleet), fleetCapacity(c))
		outageTable(&b, res.fleet, findT(res.fleet, keySingle))
	}
	if len(res.fleetLow) > 0 {
		fmt.Fprintf(&b, "The outage's own arrivals, %.0f a second, dealt in turn to the same %d processes, %s a second each; recovery against the outage's single attempt. "+
			"A process that calls this rarely learns of the heal only from an attempt it still sends (see docs/overload.md).\n\n",
			c.rate, c.fleet, perProcess(c.rate, c.fleet))
		outageTable(&b, res.fleetLow, findT(res.outage, keySingle))
	}
	sharedSection(&b, res.shared)
	b.WriteString("## Policies\n\n")
	for _, k := range []string{keySingle, keyNaive, keyBudget, keyThrottle, keyNoMin, keyFailsafe} {
		p := throttlePolicy(k, 0)
		fmt.Fprintf(&b, "- **%s**: %s.\n", p.name, p.desc)
	}
	fmt.Fprintf(&b, "\nIn the metastable scenario every policy's attempts also time out after %v.\n", c.meta.attemptTimeout)
	return b.String()
}

// countLocal returns the operations of phase i a throttle refused.
func countLocal(r *trun, i int) int {
	n := 0
	for j, o := range r.ops {
		if o.phase == i && r.local[j] {
			n++
		}
	}
	return n
}

// outageTable writes a line per run of the outage; recovery is measured
// against single, a single attempt's run of the same arrivals (none: not
// measured).
func outageTable(b *strings.Builder, runs []*trun, single *trun) {
	b.WriteString("| policy | processes | outage load | refused locally | refused p99 | failed p50 | healthy goodput/s | recovery goodput/s | recovery to 95% of single |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		st := r.phaseStats()
		rec := "–"
		if single != nil {
			m := measureOutage(r, single)
			rec = recoveryText(m.recovery, m.recovered)
		}
		q := localQuantiles(r, 1)
		fmt.Fprintf(b, "| %s | %d | %.3f× | %d | %s | %s | %.1f | %.1f | %s |\n", r.policy.name, r.processes, st[1].amp, q.n, ms(q.p99),
			ms(st[1].failLat.p50), st[0].goodput, st[2].goodput, rec)
	}
	b.WriteString("\n")
}

// localQuantiles summarises the latency of the refused operations of
// phase i.
func localQuantiles(r *trun, i int) quantiles {
	var lat []time.Duration
	for j, o := range r.ops {
		if o.phase == i && r.local[j] {
			lat = append(lat, o.latency)
		}
	}
	return summarise(lat)
}

// metaSection writes the metastable scenario's section.
func metaSection(b *strings.Builder, res *tresults) {
	m := res.cfg.meta
	fmt.Fprintf(b, "## Metastable overload\n\nA server whose FIFO queue keeps work callers abandoned: %d workers of %v each (%.0f/s), queue up to %d, "+
		"λ = %.0f/s (utilisation %.2f). Every policy's attempts time out after %v, operations after %v. "+
		"Healthy for %v; then %.0f%% of the workers for %v (the trigger); then full capacity again for %v. "+
		"*Recovered*: from the trigger's end until every following %v window's success ratio is at least %.0f%% of the healthy phase's.\n\n",
		m.workers, m.service.Round(100*time.Microsecond), m.capacity(), m.queue, m.rate, m.rate/m.capacity(), m.attemptTimeout, m.deadline,
		m.healthy, 100*m.dropTo, m.trigger, m.after, m.window, 100*m.recoverFrac)
	b.WriteString("![goodput per second, metastable overload](metastable.svg)\n\n")
	b.WriteString("| policy | recovered | hits after the trigger | wasted work after the trigger | queue at the end | goodput after the trigger/s | refused locally |\n|---|---|---|---|---|---|---|\n")
	for _, r := range res.meta {
		from := int((r.phases[0].dur + r.phases[1].dur) / bucket)
		to := int(total(r.phases) / bucket)
		ok, local := 0, 0
		for _, o := range r.ops {
			if o.phase == 2 && o.ok {
				ok++
			}
			if o.phase == 2 && o.local {
				local++
			}
		}
		fmt.Fprintf(b, "| %s | %s | %d | %d | %d | %.1f | %d |\n", r.policy.name, recoveryText(r.recovered, r.ok),
			addUp(r.hitsAt[from:to]), addUp(r.wastedAt[from:to]), r.queueAt[to-1], float64(ok)/r.phases[2].dur.Seconds(), local)
	}
	b.WriteString("\n")
}
