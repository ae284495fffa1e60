package otelretry

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
)

// TestInstrument: one call installs metrics and traces, keeps the hooks
// the Transport had (they run first), observes the budget the Transport
// would have created, and takes MaxAttempts and NewIdempotencyKey into
// account.
func TestInstrument(t *testing.T) {
	tp, rec := newRecorder(t)
	mp, reader := newReader(t)
	var calls []string
	tr := &httpretry.Transport{
		Base:              httptestutil.NewTransport(nil, httptestutil.Step{Err: httptestutil.ErrReset}, httptestutil.Step{Status: 201}),
		Clock:             clockwork.NewFakeClock(),
		MaxAttempts:       4,
		Jitter:            noJitter,
		NewIdempotencyKey: func() string { return "k1" },
		OnAttempt:         func(*http.Request, httpretry.Attempt) { calls = append(calls, "attempt") },
		OnDone:            func(*http.Request, httpretry.Outcome) { calls = append(calls, "done") },
	}
	rt, err := Instrument(tr, Options{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(newRequest(t, "POST", "http://api.test/orders", nil))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("RoundTrip = %v, %v; want 201", resp, err)
	}
	closeResp(result{resp: resp})
	if want := []string{"attempt", "attempt", "done"}; !slices.Equal(calls, want) {
		t.Errorf("earlier hooks called %v; want %v", calls, want)
	}
	if got := len(rec.Ended()); got != 1 {
		t.Errorf("got %d spans; want 1", got)
	}
	diffLines(t, collect(t, reader), []string{
		"httpretry.client.attempt.duration{error.type=connection_error,httpretry.attempt.result=connection_error,httpretry.connection=unknown," + route + "} count=1 sum=0 buckets=[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempt.duration{http.response.status_code=201,httpretry.attempt.result=success,httpretry.connection=unknown," + route + "} count=1 sum=0 buckets=[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempts.active{" + route + "} 0",
		"httpretry.client.attempts.started{" + post + ",httpretry.attempt.kind=initial," + route + "} 1",
		"httpretry.client.attempts.started{" + post + ",httpretry.attempt.kind=retry," + route + "} 1",
		"httpretry.client.attempts{error.type=connection_error," + post + ",httpretry.attempt.kind=initial,httpretry.attempt.result=connection_error," + route + "} 1",
		"httpretry.client.attempts{" + post + ",httpretry.attempt.kind=retry,httpretry.attempt.result=success," + route + "} 1",
		"httpretry.client.operation.duration{http.response.status_code=201,httpretry.outcome=success," + route + "} count=1 sum=0 buckets=[1 0 0 0 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.operation.wait{" + route + "} count=1 sum=0 buckets=[1 0 0 0 0 0 0 0 0 0 0 0 0 0]",
		"httpretry.client.attempt.successes{" + post + ",httpretry.attempt.kind=retry," + route + "} 1",
		"httpretry.client.budget.tokens{} 19",
		"httpretry.client.operation.attempts{" + route + "} count=1 sum=2 buckets=[0 1 0 0 0]",
		"httpretry.client.operations{" + post + ",httpretry.outcome=success,httpretry.stop_reason=final," + route + "} 1",
	})
	if _, err := Instrument(nil, Options{}); err == nil {
		t.Error("Instrument(nil) succeeded; want an error")
	}
}

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

// failOnce is a Base that answers every odd request with 503 and every
// even one with 200: each operation of a Transport over it retries once,
// after a wait of oneMs (a retry event marks only a wait above zero).
type failOnce struct{ hits atomic.Int64 }

func (b *failOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	status := http.StatusOK
	if b.hits.Add(1)%2 == 1 {
		status = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: status, Body: http.NoBody, Request: r}, nil
}

func oneMs(time.Duration) time.Duration { return time.Millisecond }

// TestInstrumentLeavesTheTransportAlone: Instrument changes no field of
// the Transport it is given; operations through that Transport run its own
// hooks and are neither counted nor traced, while those through the
// returned RoundTripper run the same hooks first and are counted once.
func TestInstrumentLeavesTheTransportAlone(t *testing.T) {
	tp, rec := newRecorder(t)
	mp, reader := newReader(t)
	var calls []string
	tr := &httpretry.Transport{
		Base:           &failOnce{},
		Jitter:         oneMs,
		OnAttemptStart: func(*http.Request, int) { calls = append(calls, "start") },
		OnAttempt:      func(*http.Request, httpretry.Attempt) { calls = append(calls, "attempt") },
		OnDone:         func(*http.Request, httpretry.Outcome) { calls = append(calls, "done") },
	}
	before := transportFields(tr)
	rt, err := Instrument(tr, Options{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	for name, was := range before {
		if got := transportFields(tr)[name]; !reflect.DeepEqual(got, was) {
			t.Errorf("Instrument changed the given Transport's %s", name)
		}
	}
	want := []string{"start", "attempt", "start", "attempt", "done"}
	resp, err := tr.RoundTrip(newRequest(t, "GET", "http://api.test/books/b1", nil))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("RoundTrip through the given Transport = %v, %v; want 200", resp, err)
	}
	closeResp(result{resp: resp})
	if !slices.Equal(calls, want) {
		t.Errorf("hooks through the given Transport: %v; want %v", calls, want)
	}
	if got := filter(collect(t, reader), "httpretry.client.operations"); len(got) != 0 || len(rec.Ended()) != 0 {
		t.Errorf("an operation through the given Transport was recorded: %v, %d spans", got, len(rec.Ended()))
	}
	calls = nil
	resp, err = rt.RoundTrip(newRequest(t, "GET", "http://api.test/books/b1", nil))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("RoundTrip through Instrument's Transport = %v, %v; want 200", resp, err)
	}
	closeResp(result{resp: resp})
	if !slices.Equal(calls, want) {
		t.Errorf("hooks through Instrument's Transport: %v; want %v", calls, want)
	}
	diffLines(t, filter(collect(t, reader), "httpretry.client.operations"), []string{
		"httpretry.client.operations{" + get + ",httpretry.outcome=success,httpretry.stop_reason=final," + route + "} 1",
	})
	spans := rec.Ended()
	if len(spans) != 1 || len(spans[0].Events()) != 1 {
		t.Fatalf("got %d spans (the first with its events); want 1, with 1 retry event", len(spans))
	}
	if tr.Budget != nil {
		t.Errorf("Instrument set the given Transport's Budget to %v; want it left nil", tr.Budget)
	}
}

// TestInstrumentTwiceCountsOnce: two Instrument calls on one Transport
// give two RoundTrippers that each count and trace their own operations
// once, retries included.
func TestInstrumentTwiceCountsOnce(t *testing.T) {
	tp, rec := newRecorder(t)
	mp, reader := newReader(t)
	var dones atomic.Int64
	tr := &httpretry.Transport{
		Base:   &failOnce{},
		Jitter: oneMs,
		OnDone: func(*http.Request, httpretry.Outcome) { dones.Add(1) },
	}
	opts := Options{TracerProvider: tp, MeterProvider: mp}
	a, err := Instrument(tr, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Instrument(tr, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range []http.RoundTripper{a, b, b} {
		resp, err := rt.RoundTrip(newRequest(t, "GET", "http://api.test/books/b1", nil))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("RoundTrip = %v, %v; want 200", resp, err)
		}
		closeResp(result{resp: resp})
	}
	if got := dones.Load(); got != 3 {
		t.Errorf("the given Transport's OnDone ran %d times for 3 operations", got)
	}
	lines := collect(t, reader)
	diffLines(t, filter(lines, "httpretry.client.operations"), []string{
		"httpretry.client.operations{" + get + ",httpretry.outcome=success,httpretry.stop_reason=final," + route + "} 3",
	})
	diffLines(t, filter(lines, "httpretry.client.attempts{"), []string{
		"httpretry.client.attempts{error.type=5xx," + get + ",httpretry.attempt.kind=initial,httpretry.attempt.result=5xx," + route + "} 3",
		"httpretry.client.attempts{" + get + ",httpretry.attempt.kind=retry,httpretry.attempt.result=success," + route + "} 3",
	})
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("got %d spans; want 3", len(spans))
	}
	for i, s := range spans {
		if got := len(s.Events()); got != 1 {
			t.Errorf("span %d has %d retry events; want 1", i, got)
		}
	}
}

// TestInstrumentWhileInUse: RoundTrippers instrumented from several
// goroutines while the given Transport serves requests on real loopback
// connections (HTTP/1.1 and HTTP/2): race-free under -race, and the
// metrics count exactly the operations of the instrumented ones.
func TestInstrumentWhileInUse(t *testing.T) {
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

			tp, rec := newRecorder(t)
			mp, reader := newReader(t)
			var dones atomic.Int64
			tr := &httpretry.Transport{Base: base, OnDone: func(*http.Request, httpretry.Outcome) { dones.Add(1) }}
			const workers, perWorker = 4, 25
			send := func(rt http.RoundTripper) error {
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
						errs <- send(tr)
					}
				})
				wg.Go(func() { // a RoundTripper instrumented meanwhile
					rt, err := Instrument(tr, Options{TracerProvider: tp, MeterProvider: mp})
					if err != nil {
						errs <- err
						return
					}
					for range perWorker {
						errs <- send(rt)
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
			var ops int64
			for _, l := range filter(collect(t, reader), "httpretry.client.operations{") {
				var n int64
				fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &n)
				ops += n
			}
			if want := int64(workers * perWorker); ops != want || len(rec.Ended()) != int(want) {
				t.Errorf("operations = %d, spans = %d; want %d each, those of the instrumented RoundTrippers only", ops, len(rec.Ended()), want)
			}
		})
	}
}
