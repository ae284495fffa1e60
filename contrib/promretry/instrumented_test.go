package promretry

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/httpretry/httpretry"
)

// transportFields returns t's exported fields by name: functions (and
// interfaces holding one) as their code pointers, everything else as
// itself, so that a hook replaced by a closure shows as a different value.
func transportFields(t *httpretry.Transport) map[string]any {
	v := reflect.ValueOf(t).Elem()
	out := map[string]any{}
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		if f.Kind() == reflect.Interface && !f.IsNil() {
			f = f.Elem()
		}
		if f.Kind() == reflect.Func {
			out[sf.Name] = f.Pointer()
			continue
		}
		out[sf.Name] = f.Interface()
	}
	return out
}

// TestInstrumentedLeavesTheTransportAlone: Instrumented changes no field of
// the Transport it is given; requests through that Transport run its own
// hooks and count nothing, while requests through the returned one run the
// same hooks first and count once.
func TestInstrumentedLeavesTheTransportAlone(t *testing.T) {
	var calls []string
	tr := &httpretry.Transport{
		Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
		}),
		OnAttemptStart: func(*http.Request, int) { calls = append(calls, "start") },
		OnAttempt:      func(*http.Request, httpretry.Attempt) { calls = append(calls, "attempt") },
		OnDone:         func(*http.Request, httpretry.Outcome) { calls = append(calls, "done") },
	}
	before := transportFields(tr)
	c, reg := newCollector(t, Options{DialPhases: true})
	it := c.Instrumented(tr)
	if it == tr {
		t.Fatal("Instrumented returned the Transport it was given")
	}
	if got := transportFields(tr); !reflect.DeepEqual(got, before) {
		for name, was := range before {
			if !reflect.DeepEqual(got[name], was) {
				t.Errorf("Instrumented changed the given Transport's %s", name)
			}
		}
	}
	if !it.DialTrace {
		t.Error("with DialPhases, the instrumented Transport's DialTrace is false")
	}
	if it.EffectiveBudget() != tr.EffectiveBudget() {
		t.Error("the instrumented Transport has a budget of its own; want the one the given Transport uses")
	}

	send := func(rt http.RoundTripper) {
		t.Helper()
		resp, err := rt.RoundTrip(httptest.NewRequest("GET", "http://api.test/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send(tr)
	if got, want := strings.Join(calls, ","), "start,attempt,done"; got != want {
		t.Errorf("hooks through the given Transport: %s; want %s", got, want)
	}
	if got := sum(samples(scrape(t, reg)), "httpretry_operations_total"); got != 0 {
		t.Errorf("operations through the given Transport counted: %v; want 0", got)
	}
	calls = nil
	send(it)
	if got, want := strings.Join(calls, ","), "start,attempt,done"; got != want {
		t.Errorf("hooks through the instrumented Transport: %s; want %s", got, want)
	}
	all := samples(scrape(t, reg))
	if got := sum(all, "httpretry_operations_total"); got != 1 {
		t.Errorf("operations = %v; want 1", got)
	}
	if got := sum(all, "httpretry_attempts_started_total"); got != 1 {
		t.Errorf("attempts started = %v; want 1", got)
	}
	if got := all["httpretry_budget_tokens"]; got != httpretry.DefaultBudgetCapacity {
		t.Errorf("budget tokens = %v; want the default budget's %v", got, httpretry.DefaultBudgetCapacity)
	}
	if c.Instrumented(nil) != nil {
		t.Error("Instrumented(nil) is not nil")
	}
}

// TestInstrumentedTwiceCountsOnce: two Instrumented calls on one
// Transport give two Transports that each count their own operations
// once, and the hooks of the given Transport run once per attempt.
func TestInstrumentedTwiceCountsOnce(t *testing.T) {
	var dones atomic.Int64
	tr := &httpretry.Transport{
		Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
		}),
		OnDone: func(*http.Request, httpretry.Outcome) { dones.Add(1) },
	}
	c, reg := newCollector(t, Options{})
	a, b := c.Instrumented(tr), c.Instrumented(tr)
	for _, rt := range []http.RoundTripper{a, b, b} {
		resp, err := rt.RoundTrip(httptest.NewRequest("POST", "http://api.test/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got := dones.Load(); got != 3 {
		t.Errorf("the given Transport's OnDone ran %d times for 3 operations", got)
	}
	all := samples(scrape(t, reg))
	checkFamily(t, all, "httpretry_operations_total", map[string]float64{
		`httpretry_operations_total{method="POST",outcome="success",reason="final",route="api.test"}`: 3,
	})
	if got := sum(all, "httpretry_attempts_total"); got != 3 {
		t.Errorf("attempts = %v; want 3", got)
	}
	if got := sum(all, "httpretry_attempts_in_flight"); got != 0 {
		t.Errorf("attempts in flight = %v; want 0", got)
	}
}

// TestInstrumentedWhileInUse: Transports instrumented from several
// goroutines while the given one serves requests on real loopback
// connections (HTTP/1.1 and HTTP/2): race-free under -race, and the
// Collector counts exactly the operations of the instrumented Transports.
func TestInstrumentedWhileInUse(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		name := "HTTP/1.1"
		if h2 {
			name = "HTTP/2"
		}
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte("ok"))
			}))
			srv.EnableHTTP2 = h2
			srv.StartTLS()
			defer srv.Close()
			base := srv.Client().Transport.(*http.Transport)
			defer base.CloseIdleConnections()

			var dones atomic.Int64
			tr := &httpretry.Transport{Base: base, OnDone: func(*http.Request, httpretry.Outcome) { dones.Add(1) }}
			c, reg := newCollector(t, Options{DialPhases: true})
			const workers, perWorker = 4, 25
			get := func(rt http.RoundTripper) error {
				resp, err := (&http.Client{Transport: rt}).Get(srv.URL + "/books/b1")
				if err != nil {
					return err
				}
				return resp.Body.Close()
			}
			var wg sync.WaitGroup
			errs := make(chan error, 2*workers*perWorker)
			for range workers {
				wg.Go(func() { // the given Transport, in use throughout
					for range perWorker {
						errs <- get(tr)
					}
				})
				wg.Go(func() { // a Transport instrumented meanwhile
					it := c.Instrumented(tr)
					for range perWorker {
						errs <- get(it)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if got, want := dones.Load(), int64(2*workers*perWorker); got != want {
				t.Errorf("the given Transport's OnDone ran %d times; want %d", got, want)
			}
			if tr.DialTrace {
				t.Error("Instrumented set the given Transport's DialTrace")
			}
			all := samples(scrape(t, reg))
			if got, want := sum(all, "httpretry_operations_total"), float64(workers*perWorker); got != want {
				t.Errorf("operations = %v; want %v, those of the instrumented Transports only", got, want)
			}
		})
	}
}
