package promretry

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/httpretry/httpretry"
	"github.com/prometheus/client_golang/prometheus"
)

func TestNewRegistersAllOrNothing(t *testing.T) {
	reg := prometheus.NewRegistry()
	// A foreign metric that takes the name of the last metric New
	// registers, with other labels.
	reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "httpretry_idempotency_events_total", Help: "x"}, []string{"a"}))
	_, err := New(reg, Options{})
	var already prometheus.AlreadyRegisteredError
	if err == nil || !strings.HasPrefix(err.Error(), "promretry: ") || errors.As(err, &already) {
		t.Fatalf("New over a taken name: err = %v; want a promretry error about the conflict", err)
	}
	// Had the failed New left its first metrics registered, a second one
	// would stop at them, as already registered.
	_, err = New(reg, Options{})
	if err == nil || errors.As(err, &already) {
		t.Fatalf("second New: err = %v; want the same conflict again", err)
	}
}

func TestNewTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(reg, Options{}); err != nil {
		t.Fatal(err)
	}
	_, err := New(reg, Options{})
	var already prometheus.AlreadyRegisteredError
	if !errors.As(err, &already) || !strings.Contains(err.Error(), "ConstLabels") {
		t.Fatalf("second New: err = %v; want AlreadyRegisteredError with advice", err)
	}
	// Const labels tell two clients apart in one registry, when every
	// Collector there has the same label names.
	reg = prometheus.NewRegistry()
	a, err := New(reg, Options{ConstLabels: prometheus.Labels{"client": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(reg, Options{ConstLabels: prometheus.Labels{"client": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "http://api.test/", nil)
	o := httpretry.Outcome{Attempts: 1, Reason: httpretry.Final, Status: 200}
	a.OnDone(req, o)
	b.OnDone(req, o)
	b.OnDone(req, o)
	checkFamily(t, samples(scrape(t, reg)), "httpretry_operations_total", map[string]float64{
		`httpretry_operations_total{client="a",method="GET",outcome="success",reason="final",route="api.test"}`: 1,
		`httpretry_operations_total{client="b",method="GET",outcome="success",reason="final",route="api.test"}`: 2,
	})
}

func TestNewRejectsTooManyAttemptBuckets(t *testing.T) {
	if _, err := New(prometheus.NewRegistry(), Options{MaxAttempts: 101}); err == nil {
		t.Fatal("MaxAttempts 101 accepted")
	}
}

func TestAttemptBuckets(t *testing.T) {
	c, reg := newCollector(t, Options{MaxAttempts: 5})
	c.OnDone(httptest.NewRequest("GET", "http://api.test/", nil), httpretry.Outcome{Attempts: 4, Reason: httpretry.Final, Status: 200})
	checkFamily(t, samples(scrape(t, reg)), "httpretry_operation_attempts_bucket", map[string]float64{
		`httpretry_operation_attempts_bucket{le="1",route="api.test"}`:    0,
		`httpretry_operation_attempts_bucket{le="2",route="api.test"}`:    0,
		`httpretry_operation_attempts_bucket{le="3",route="api.test"}`:    0,
		`httpretry_operation_attempts_bucket{le="4",route="api.test"}`:    1,
		`httpretry_operation_attempts_bucket{le="5",route="api.test"}`:    1,
		`httpretry_operation_attempts_bucket{le="+Inf",route="api.test"}`: 1,
	})
}

// TestInstrumentChains checks that Instrument keeps the hooks a Transport
// already had, calling them first, with the same values.
func TestInstrumentChains(t *testing.T) {
	var calls []string
	tr := &httpretry.Transport{
		Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
		}),
		OnAttempt: func(_ *http.Request, a httpretry.Attempt) { calls = append(calls, "user attempt") },
		OnDone:    func(_ *http.Request, o httpretry.Outcome) { calls = append(calls, "user done") },
	}
	c, reg := newCollector(t, Options{})
	c.Instrument(tr)
	c.Instrument(nil) // ignored
	resp, err := tr.RoundTrip(httptest.NewRequest("GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, want := strings.Join(calls, ","), "user attempt,user done"; got != want {
		t.Errorf("user hooks = %s; want %s", got, want)
	}
	all := samples(scrape(t, reg))
	if got := sum(all, "httpretry_attempts_total"); got != 1 {
		t.Errorf("attempts = %v; want 1", got)
	}
	if got := sum(all, "httpretry_operations_total"); got != 1 {
		t.Errorf("operations = %v; want 1", got)
	}
}

func TestInstrumentWithoutHooks(t *testing.T) {
	tr := &httpretry.Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 201, Body: http.NoBody, Request: r}, nil
	})}
	c, reg := newCollector(t, Options{})
	c.Instrument(tr)
	resp, err := tr.RoundTrip(httptest.NewRequest("POST", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	checkFamily(t, samples(scrape(t, reg)), "httpretry_operations_total", map[string]float64{
		`httpretry_operations_total{method="POST",outcome="success",reason="final",route="api.test"}`: 1,
	})
}

// TestOnDoneUnknownOutcome checks that OnDone, used without Instrument,
// counts an unknown outcome exactly when the Outcome says so.
func TestOnDoneUnknownOutcome(t *testing.T) {
	for _, tt := range []struct {
		name    string
		unknown bool
		want    string
	}{
		{"the Transport says unknown", true, "unknown"},
		{"the Transport knows", false, "error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, reg := newCollector(t, Options{})
			o := httpretry.Outcome{Attempts: 1, Reason: httpretry.NotIdempotent, Err: errors.New("connection reset"), Unknown: tt.unknown}
			c.OnDone(httptest.NewRequest("POST", "http://api.test/", nil), o)
			checkFamily(t, samples(scrape(t, reg)), "httpretry_operations_total", map[string]float64{
				`httpretry_operations_total{method="POST",outcome="` + tt.want + `",reason="not_idempotent",route="api.test"}`: 1,
			})
		})
	}
}

func TestBudgetGauge(t *testing.T) {
	b := httpretry.NewTokenBucket(3, 0)
	_, reg := newCollector(t, Options{Budget: b})
	if got := samples(scrape(t, reg))["httpretry_budget_tokens"]; got != 3 {
		t.Errorf("tokens = %v; want 3", got)
	}
	b.Withdraw(t.Context())
	if got := samples(scrape(t, reg))["httpretry_budget_tokens"]; got != 2 {
		t.Errorf("tokens = %v; want 2", got)
	}
	// Without a Budget there is no gauge.
	_, reg = newCollector(t, Options{})
	if _, ok := scrape(t, reg)["httpretry_budget_tokens"]; ok {
		t.Error("a gauge without a Budget")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAttemptBucketsReachTheTransportsMaxAttempts: a Collector created
// without Options.MaxAttempts, installed on a Transport allowed 5
// attempts, still has a bucket for each attempt count the Transport can
// reach, so that the p99 of attempts per operation is not capped at 3.
func TestAttemptBucketsReachTheTransportsMaxAttempts(t *testing.T) {
	c, reg := newCollector(t, Options{})
	tr := &httpretry.Transport{MaxAttempts: 5, Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})}
	c.Instrument(tr)
	c.OnDone(httptest.NewRequest("GET", "http://api.test/", nil), httpretry.Outcome{Attempts: 5, Reason: httpretry.AttemptsExhausted, Status: 503})
	all := samples(scrape(t, reg))
	if got := all[`httpretry_operation_attempts_bucket{le="5",route="api.test"}`]; got != 1 {
		t.Errorf(`httpretry_operation_attempts_bucket{le="5"} = %v; want 1`, got)
	}
}
