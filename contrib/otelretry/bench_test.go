package otelretry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// staticBase is an in-memory Base that allocates nothing: it returns the
// same 200 every time, so a benchmark counts only the layers above it.
type staticBase struct{ resp http.Response }

func (s *staticBase) RoundTrip(*http.Request) (*http.Response, error) {
	s.resp.Body = http.NoBody
	return &s.resp, nil
}

func newStaticBase() *staticBase {
	return &staticBase{resp: http.Response{StatusCode: 200, Header: http.Header{
		"Content-Type":   {"application/json"},
		"Content-Length": {"64"},
	}}}
}

// sdkMeterProvider is a real SDK provider with a reader that is never
// collected, as in a program between two scrapes.
func sdkMeterProvider(tb testing.TB) *sdkmetric.MeterProvider {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tb.Cleanup(func() { mp.Shutdown(context.Background()) })
	return mp
}

// BenchmarkRoundTrip compares, over an in-memory Base on the success
// path, the bare Transport; the Transport with hooks that do nothing (the
// root's cost of reporting); with this package's metrics through the SDK,
// traces off; and with Instrument's metrics and sampled spans.
func BenchmarkRoundTrip(b *testing.B) {
	cases := []struct {
		name string
		rt   func(b *testing.B) http.RoundTripper
	}{
		{"bare", func(*testing.B) http.RoundTripper { return &httpretry.Transport{Base: newStaticBase()} }},
		// The root's own cost of reporting to hooks, whatever they do.
		{"empty_hooks", func(*testing.B) http.RoundTripper {
			return &httpretry.Transport{Base: newStaticBase(),
				OnAttempt: func(*http.Request, httpretry.Attempt) {}, OnDone: func(*http.Request, httpretry.Outcome) {}}
		}},
		{"metrics", func(b *testing.B) http.RoundTripper {
			m, err := NewMetrics(Options{MeterProvider: sdkMeterProvider(b)})
			if err != nil {
				b.Fatal(err)
			}
			return &httpretry.Transport{Base: newStaticBase(), OnAttempt: m.OnAttempt, OnDone: m.OnDone}
		}},
		{"metrics_and_traces", func(b *testing.B) http.RoundTripper {
			tp := sdktrace.NewTracerProvider() // samples every span, exports none
			b.Cleanup(func() { tp.Shutdown(context.Background()) })
			rt, err := Instrument(&httpretry.Transport{Base: newStaticBase()},
				Options{MeterProvider: sdkMeterProvider(b), TracerProvider: tp})
			if err != nil {
				b.Fatal(err)
			}
			return rt
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			rt := c.rt(b)
			req := httptest.NewRequest("GET", "http://api.test/books/b1", nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.RoundTrip(req)
				if err != nil || resp.StatusCode != 200 {
					b.Fatal(resp, err)
				}
				resp.Body.Close()
			}
		})
	}
}

// cannedAttempt and cannedOutcome are a successful first attempt and its
// operation, with the connection fields a net/http Base reports.
var (
	cannedAttempt = httpretry.Attempt{Number: 1, Status: 200, Duration: 3 * time.Millisecond,
		Conn: httpretry.ConnReused, ConnWait: 20 * time.Microsecond, FirstByte: 3 * time.Millisecond}
	cannedOutcome = httpretry.Outcome{Attempts: 1, Reason: httpretry.Final, Status: 200, Elapsed: 3 * time.Millisecond}
)

// BenchmarkHooks measures this package's own share: the two hooks called
// directly with a canned success, as the Transport calls them.
func BenchmarkHooks(b *testing.B) {
	m, err := NewMetrics(Options{MeterProvider: sdkMeterProvider(b)})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("GET", "http://api.test/books/b1", nil)
	b.ReportAllocs()
	for b.Loop() {
		m.OnAttempt(req, cannedAttempt)
		m.OnDone(req, cannedOutcome)
	}
}

// TestHooksAllocations pins the benchmark's promise: once a label
// combination has been seen, recording a successful operation allocates
// nothing of this package's own, through the SDK.
func TestHooksAllocations(t *testing.T) {
	m, err := NewMetrics(Options{MeterProvider: sdkMeterProvider(t)})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "http://api.test/books/b1", nil)
	allocs := testing.AllocsPerRun(200, func() {
		m.OnAttempt(req, cannedAttempt)
		m.OnDone(req, cannedOutcome)
	})
	if allocs > 0 {
		t.Errorf("%v allocs per operation; want 0", allocs)
	}
}

// TestMetricsAddNoAllocationsToARoundTrip: a Transport reporting to Metrics allocates
// exactly what one reporting to hooks that do nothing allocates; whatever
// the root spends on reporting, this package adds nothing.
func TestMetricsAddNoAllocationsToARoundTrip(t *testing.T) {
	if raceEnabled {
		t.Skip("the root pools its connection traces; under -race pools drop items at random")
	}
	m, err := NewMetrics(Options{MeterProvider: sdkMeterProvider(t)})
	if err != nil {
		t.Fatal(err)
	}
	allocs := func(tr *httpretry.Transport) float64 {
		req := httptest.NewRequest("GET", "http://api.test/books/b1", nil)
		return testing.AllocsPerRun(200, func() {
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
	}
	empty := allocs(&httpretry.Transport{Base: newStaticBase(),
		OnAttempt: func(*http.Request, httpretry.Attempt) {}, OnDone: func(*http.Request, httpretry.Outcome) {}})
	metrics := allocs(&httpretry.Transport{Base: newStaticBase(), OnAttempt: m.OnAttempt, OnDone: m.OnDone})
	if metrics != empty {
		t.Errorf("%v allocs per RoundTrip with Metrics; want %v, as with empty hooks", metrics, empty)
	}
}
