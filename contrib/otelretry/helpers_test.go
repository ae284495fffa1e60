package otelretry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/httpretry/httpretry/internal/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.Main(m)
}

const ms = time.Millisecond

// result is what a RoundTrip running in another goroutine returned.
type result struct {
	resp *http.Response
	err  error
}

// start runs rt.RoundTrip(req) in a goroutine, as fake-clock tests must.
func start(rt http.RoundTripper, req *http.Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		ch <- result{resp, err}
	}()
	return ch
}

// advance waits until the fake clock has at least n waiters, then moves
// it forward by d.
func advance(t *testing.T, fc *clockwork.FakeClock, n int, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := fc.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("waiting for %d clock waiters: %v", n, err)
	}
	fc.Advance(d)
}

// advanceAt waits until base has taken n requests and the clock has at
// least waiters waiters, then moves the clock forward by d. A request that
// hangs registers no waiter, so the hit count shows it is in flight.
func advanceAt(t *testing.T, fc *clockwork.FakeClock, base interface{ Hits() int }, n, waiters int, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); base.Hits() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for request %d: base has %d", n, base.Hits())
		}
		time.Sleep(100 * time.Microsecond) // a poll, not a timing assumption
	}
	advance(t, fc, waiters, d)
}

// await returns the result of a RoundTrip started with start.
func await(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("RoundTrip did not return")
		return result{}
	}
}

// closeResp drains and closes a response body, if any.
func closeResp(r result) {
	if r.resp != nil {
		io.Copy(io.Discard, r.resp.Body)
		r.resp.Body.Close()
	}
}

func newRequest(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// newReader returns a MeterProvider whose metrics a test collects
// through the returned reader.
func newReader(t *testing.T) (*sdkmetric.MeterProvider, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	return mp, reader
}

// collect renders every data point the reader holds as one line, sorted:
//
//	name{key=value,…} 3                                  (sums, gauges)
//	name{key=value,…} count=3 sum=0.3 buckets=[0 1 2 0]   (histograms)
//
// so that a test compares the whole set of series, with exact values.
func collect(t *testing.T, reader *sdkmetric.ManualReader) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			lines = append(lines, render(m)...)
		}
	}
	slices.Sort(lines)
	return lines
}

func render(m metricdata.Metrics) []string {
	var lines []string
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			lines = append(lines, fmt.Sprintf("%s{%s} %d", m.Name, attrs(p.Attributes.ToSlice()), p.Value))
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			lines = append(lines, fmt.Sprintf("%s{%s} %d", m.Name, attrs(p.Attributes.ToSlice()), p.Value))
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			lines = append(lines, fmt.Sprintf("%s{%s} %g", m.Name, attrs(p.Attributes.ToSlice()), p.Value))
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			lines = append(lines, fmt.Sprintf("%s{%s} count=%d sum=%d buckets=%v",
				m.Name, attrs(p.Attributes.ToSlice()), p.Count, p.Sum, p.BucketCounts))
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			lines = append(lines, fmt.Sprintf("%s{%s} count=%d sum=%.6g buckets=%v",
				m.Name, attrs(p.Attributes.ToSlice()), p.Count, p.Sum, p.BucketCounts))
		}
	default:
		lines = append(lines, fmt.Sprintf("%s: unexpected data %T", m.Name, m.Data))
	}
	return lines
}

// attrs renders attributes as key=value pairs in the set's (sorted) order.
func attrs(kvs []attribute.KeyValue) string {
	parts := make([]string, len(kvs))
	for i, kv := range kvs {
		parts[i] = string(kv.Key) + "=" + kv.Value.String()
	}
	return strings.Join(parts, ",")
}

// diffLines reports the lines only in got and only in want.
func diffLines(t *testing.T, got, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	if slices.Equal(got, want) {
		return
	}
	var b strings.Builder
	for _, g := range got {
		if !slices.Contains(want, g) {
			fmt.Fprintf(&b, "\n  + %s", g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			fmt.Fprintf(&b, "\n  - %s", w)
		}
	}
	t.Errorf("metrics differ (+ got, - want):%s", b.String())
}
