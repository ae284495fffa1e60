package promretry

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/httpretry/httpretry/internal/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.Main(m)
}

// guard bounds how long a test waits for something that should happen at
// once; it only turns a hang into a failure, never decides a verdict.
const guard = 30 * time.Second

// newCollector returns a Collector registered with a fresh registry.
func newCollector(t *testing.T, opts Options) (*Collector, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c, err := New(reg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, reg
}

// scrape fetches reg's exposition from a real promhttp handler over
// loopback, in the text format, and parses it with expfmt.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	client := srv.Client()
	defer client.CloseIdleConnections()
	req, err := http.NewRequest("GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Ask for the plain text format, so that expfmt's text parser reads
	// exactly what a Prometheus server would.
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %s: %s", resp.Status, b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the exposition: %v", err)
	}
	return fams
}

// samples flattens metric families into one value per sample, keyed
// like the exposition: `name{a="x",b="y"}` with labels sorted by name,
// and for histograms the _count, _sum and _bucket samples (le last).
func samples(fams map[string]*dto.MetricFamily) map[string]float64 {
	out := make(map[string]float64)
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			labels := labelString(m.GetLabel())
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name+labels] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name+labels] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out[name+"_count"+labels] = float64(h.GetSampleCount())
				out[name+"_sum"+labels] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					le := fmt.Sprintf(`le="%g"`, b.GetUpperBound())
					out[name+"_bucket"+withLabel(labels, le)] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

func labelString(pairs []*dto.LabelPair) string {
	if len(pairs) == 0 {
		return ""
	}
	parts := make([]string, 0, len(pairs))
	for _, p := range pairs {
		parts = append(parts, fmt.Sprintf("%s=%q", p.GetName(), p.GetValue()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// withLabel adds pair to a label string, keeping the pairs sorted.
func withLabel(labels, pair string) string {
	parts := []string{pair}
	if labels != "" {
		parts = append(parts, strings.Split(labels[1:len(labels)-1], ",")...)
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// family returns the samples whose key starts with prefix (a metric name,
// possibly with _count, _sum or _bucket).
func family(all map[string]float64, prefix string) map[string]float64 {
	out := make(map[string]float64)
	for k, v := range all {
		if name, _, _ := strings.Cut(k, "{"); name == prefix {
			out[k] = v
		}
	}
	return out
}

// checkFamily fails unless the samples named name are exactly want.
func checkFamily(t *testing.T, all map[string]float64, name string, want map[string]float64) {
	t.Helper()
	got := family(all, name)
	if maps.Equal(got, want) {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if w, ok := want[k]; !ok || w != got[k] {
			t.Errorf("%s = %v; want %v (present: %v)", k, got[k], w, ok)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[k]; !ok {
			t.Errorf("%s missing; want %v", k, want[k])
		}
	}
}

// sum adds the samples named name whose keys contain every one of the
// label pairs given (e.g. `kind="retry"`).
func sum(all map[string]float64, name string, pairs ...string) float64 {
	total := 0.0
next:
	for k, v := range family(all, name) {
		for _, p := range pairs {
			if !strings.Contains(k, p) {
				continue next
			}
		}
		total += v
	}
	return total
}

// result is what a RoundTrip running in another goroutine returned.
type result struct {
	resp *http.Response
	err  error
}

// start runs rt.RoundTrip(req) in a goroutine, so that a test can drive a
// fake clock while RoundTrip waits on it.
func start(rt http.RoundTripper, req *http.Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		ch <- result{resp, err}
	}()
	return ch
}

// await returns the result of a RoundTrip started with start.
func await(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(guard):
		t.Fatal("RoundTrip did not return")
		return result{}
	}
}

// advance waits until the fake clock has at least n waiters, then moves
// it forward by d.
func advance(t *testing.T, fc *clockwork.FakeClock, n int, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := fc.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("waiting for %d clock waiters: %v", n, err)
	}
	fc.Advance(d)
}

// advanceAt waits until base has taken n requests and the fake clock has
// at least waiters waiters, then moves the clock forward by d: a hanging
// request registers no waiter, so its arrival is what shows it in flight.
func advanceAt(t *testing.T, fc *clockwork.FakeClock, base interface{ Hits() int }, n, waiters int, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(guard); base.Hits() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for request %d: base has %d", n, base.Hits())
		}
		time.Sleep(100 * time.Microsecond) // a poll, not a timing assumption
	}
	advance(t, fc, waiters, d)
}

// identity is a Jitter that waits the whole backoff window, so that waits
// are exact.
func identity(window time.Duration) time.Duration { return window }

// noJitter is a Jitter that never waits.
func noJitter(time.Duration) time.Duration { return 0 }
