package promretry

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/idempotency"
)

// TestDashboard checks dashboard.json against the metrics a Collector
// really exports: every metric a query names exists, every label it
// selects or groups by is one of that metric's labels, and the panels the
// dashboard promises are there.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}

	labels := exportedLabels(t)
	metricRE := regexp.MustCompile(`httpretry_[a-z_]+`)
	selectorRE := regexp.MustCompile(`([a-z_]+)\s*(=~|!=|!~|=)\s*"`)
	byRE := regexp.MustCompile(`by \(([a-z_, ]+)\)`)
	titles := make(map[string]bool)
	for _, p := range dash.Panels {
		titles[p.Title] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			expr := target.Expr
			if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "{") != strings.Count(expr, "}") {
				t.Errorf("panel %q: unbalanced query %s", p.Title, expr)
			}
			// job and namespace come from the scrape target, client from
			// ConstLabels: none is a label the Collector exports itself.
			allowed := map[string]bool{"le": true, "job": true, "namespace": true, "client": true}
			for _, name := range metricRE.FindAllString(expr, -1) {
				ls, ok := labels[name]
				if !ok {
					t.Errorf("panel %q: no metric %s", p.Title, name)
				}
				for _, l := range ls {
					allowed[l] = true
				}
			}
			for _, m := range selectorRE.FindAllStringSubmatch(expr, -1) {
				if !allowed[m[1]] {
					t.Errorf("panel %q: label %q in %s", p.Title, m[1], expr)
				}
			}
			for _, m := range byRE.FindAllStringSubmatch(expr, -1) {
				for _, l := range strings.Split(m[1], ",") {
					if !allowed[strings.TrimSpace(l)] {
						t.Errorf("panel %q: grouping by %q in %s", p.Title, l, expr)
					}
				}
			}
		}
	}
	for _, want := range []string{
		"Requests (operations) by outcome", "First-attempt and final success", "Retry attempts", "Retry success",
		"Timeouts", "Deadline exhausted", "Idempotent replays", "Stop reasons (other than final)",
		"Attempts per operation", "Wait time per operation", "Attempt latency: new vs reused connections",
		"Retry budget tokens", "Attempts by result", "Waits before retries by cause",
		"Operation latency by outcome (p99)", "Attempts in flight", "Budget: shared (1) or local fallback (0)",
		"Route overflows",
	} {
		if !titles[want] {
			t.Errorf("no panel %q", want)
		}
	}
}

// TestDashboardUnits: every panel states its unit, and every query is
// drawn on an axis of its own unit: a panel mixing a rate and a ratio, or
// seconds and a rate, gives the second its own unit and axis with an
// override.
func TestDashboardUnits(t *testing.T) {
	data, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	type override struct {
		Matcher    struct{ ID, Options string }
		Properties []struct {
			ID    string
			Value any
		}
	}
	var dash struct {
		Panels []struct {
			Title       string
			Targets     []struct{ Expr, RefID string }
			FieldConfig struct {
				Defaults  struct{ Unit string }
				Overrides []override
			}
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	// The units each kind of query may be drawn in.
	fits := map[string][]string{
		"seconds": {"s"},
		"rate":    {"ops", "reqps"},
		"ratio":   {"percentunit", "none"},
		"count":   {"none"},
	}
	for _, p := range dash.Panels {
		if p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("panel %q states no unit", p.Title)
		}
		for _, target := range p.Targets {
			unit := p.FieldConfig.Defaults.Unit
			for _, o := range p.FieldConfig.Overrides {
				if o.Matcher.ID == "byFrameRefID" && o.Matcher.Options == target.RefID {
					for _, prop := range o.Properties {
						if prop.ID == "unit" {
							unit, _ = prop.Value.(string)
						}
					}
				}
			}
			kind := queryKind(target.Expr)
			if !slices.Contains(fits[kind], unit) {
				t.Errorf("panel %q: query %s (%s) drawn in unit %q", p.Title, target.RefID, kind, unit)
			}
		}
	}
}

// queryKind says what a dashboard query measures.
func queryKind(expr string) string {
	switch {
	case strings.Contains(expr, " / "):
		return "ratio"
	case strings.Contains(expr, "histogram_quantile") && strings.Contains(expr, "_seconds_bucket"),
		strings.Contains(expr, "rate(") && strings.Contains(expr, "_seconds_sum"):
		return "seconds"
	case strings.Contains(expr, "histogram_quantile"):
		return "count"
	case strings.Contains(expr, "rate("):
		return "rate"
	}
	return "count"
}

// exportedLabels records one of everything and returns, for each sample
// name in the exposition (histograms as _bucket, _sum and _count), its
// label names.
func exportedLabels(t *testing.T) map[string][]string {
	t.Helper()
	c, reg := newCollector(t, Options{Budget: &sharedBudget{tokens: 1}})
	req := httptest.NewRequest("GET", "http://api.test/", nil)
	c.OnAttemptStart(req, 1)
	c.OnAttempt(req, httpretry.Attempt{Number: 1, Status: 503, Duration: time.Millisecond, ConnWait: time.Millisecond, Wait: time.Second})
	c.OnWait(req, httpretry.Wait{After: 1, Waited: time.Second})
	c.OnAttempt(req, httpretry.Attempt{Number: 2, Err: httpretry.ErrAttemptTimeout})
	c.OnDone(req, httpretry.Outcome{Attempts: 1, Reason: httpretry.Final, Status: 200})
	c.IdempotencyEvent(string(idempotency.KindReplayed))
	out := make(map[string][]string)
	for key := range samples(scrape(t, reg)) {
		name, rest, _ := strings.Cut(key, "{")
		var ls []string
		for _, pair := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
			if l, _, ok := strings.Cut(pair, "="); ok {
				ls = append(ls, l)
			}
		}
		out[name] = ls
	}
	return out
}
