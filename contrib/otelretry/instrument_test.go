package otelretry

import (
	"net/http"
	"slices"
	"testing"

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
