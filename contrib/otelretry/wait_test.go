package otelretry

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/httptestutil"
	"github.com/jonboulle/clockwork"
)

// TestRetryWaitIsTheTimeWaited: through Instrument, a wait of 2 s
// (Retry-After) and 100 ms of jitter that the caller cuts short after
// half a second counts in httpretry.client.retry.wait for the time
// actually waited, the server's part first, as it does in
// httpretry.client.operation.wait: the two agree.
func TestRetryWaitIsTheTimeWaited(t *testing.T) {
	fc := clockwork.NewFakeClock()
	mp, reader := newReader(t)
	tr := &httpretry.Transport{Clock: fc, BaseDelay: 100 * ms, Jitter: fullWindow,
		Base: httptestutil.NewTransport(fc, httptestutil.Step{Status: 429, RetryAfter: "2"})}
	rt, err := Instrument(tr, Options{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", "http://api.test/quota", nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := start(rt, req)
	advance(t, fc, 1, 500*time.Millisecond)
	cancel()
	if r := await(t, ch); r.err == nil {
		closeResp(r)
		t.Fatal("a canceled wait returned a response")
	}
	lines := collect(t, reader)
	diffLines(t, filter(lines, "httpretry.client.retry.wait"), []string{
		"httpretry.client.retry.wait{httpretry.wait.cause=retry_after," + route + "} count=1 sum=0.5 buckets=[0 0 0 0 0 1 0 0 0 0 0 0 0 0]",
	})
	diffLines(t, filter(lines, "httpretry.client.operation.wait"), []string{
		"httpretry.client.operation.wait{" + route + "} count=1 sum=0.5 buckets=[0 0 0 0 0 1 0 0 0 0 0 0 0 0]",
	})
}
