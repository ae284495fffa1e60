package httpretry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/httpretry/httpretry/throttle"
	"github.com/jonboulle/clockwork"
)

// TestQuotaHedgeThatCannotBeSentReturnsItsRequestToTheQuota: a hedge
// takes a request from the quota with its budget token; when no body can
// be made for it (GetBody fails) it is not sent, and the budget and the
// extra-load cap get their tokens back. The quota must get its request
// back too: here the server's window of 4 still has 2 left after the
// hedged operation, and the next two operations must both be sent.
func TestQuotaHedgeThatCannotBeSentReturnsItsRequestToTheQuota(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := newPacedServer(fc, 4, time.Minute)
	release := make(chan struct{})
	srv.answer = func(r *http.Request, hit int) (int, error) {
		if r.Method == http.MethodPut {
			<-release // the first attempt is still running when the hedge is due
		}
		return 0, nil
	}
	tr := &Transport{Base: srv, Clock: fc, Throttle: &throttle.Throttle{Rand: admitAll},
		Hedging: &Hedging{Delay: 10 * time.Millisecond}}
	get := func() (*http.Response, error) {
		return tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	}
	resp, err := get() // 3 left
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first: %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	var bodies atomic.Int32
	req := newRequest(t, context.Background(), "PUT", "http://api.test/", bytes.NewReader([]byte("x")))
	req.GetBody = func() (io.ReadCloser, error) {
		bodies.Add(1)
		return nil, errors.New("no body for a second attempt")
	}
	var o Outcome
	ch := start(tr, req.WithContext(WithOutcome(req.Context(), &o)))
	for deadline := time.Now().Add(5 * time.Second); srv.Hits() < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the first attempt was not sent")
		}
		time.Sleep(100 * time.Microsecond) // a poll, not a timing assumption
	}
	advance(t, fc, 1, 10*time.Millisecond)
	for deadline := time.Now().Add(5 * time.Second); bodies.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no hedge was asked for a body")
		}
		time.Sleep(100 * time.Microsecond) // a poll, not a timing assumption
	}
	close(release)
	r := await(t, ch)
	if r.err != nil || r.resp.StatusCode != 200 || o.Hedges != 0 {
		t.Fatalf("hedged: %v, %v, %d hedges; want the first attempt's 200, no hedge sent", r.resp, r.err, o.Hedges)
	}
	r.resp.Body.Close()
	if srv.left() != 2 {
		t.Fatalf("the server has %d left; want 2", srv.left())
	}
	for i := range 2 {
		resp, err := get()
		if err != nil {
			t.Fatalf("operation %d of the 2 the server's window still admits: %v; want it sent", i+1, err)
		}
		resp.Body.Close()
	}
}

// failingBody is a request body whose reads fail.
type failingBody struct{}

func (failingBody) Read([]byte) (int, error) { return 0, errors.New("the body's source failed") }
func (failingBody) Close() error             { return nil }

// TestQuotaOperationThatFailsBeforeItsAttemptReturnsItsRequestToTheQuota:
// an operation admitted by the quota that then fails before any attempt
// (its body cannot be read into memory for retries) sent nothing: its
// request goes back to the quota. The server's window of 2 still has 1
// left, and the next operation must be sent, not refused locally.
func TestQuotaOperationThatFailsBeforeItsAttemptReturnsItsRequestToTheQuota(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	srv := newPacedServer(fc, 2, time.Minute)
	tr := &Transport{Base: srv, Clock: fc, Throttle: &throttle.Throttle{Rand: admitAll}}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil)) // 1 left
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first: %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	req := newRequest(t, context.Background(), "PUT", "http://api.test/", nil)
	req.Body, req.ContentLength = failingBody{}, 5
	var o Outcome
	_, err = tr.RoundTrip(req.WithContext(WithOutcome(req.Context(), &o)))
	if err == nil || o.Attempts != 0 || srv.Hits() != 1 {
		t.Fatalf("the unreadable body: %v after %d attempts, %d sent; want an error before any attempt", err, o.Attempts, srv.Hits())
	}
	resp, err = tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatalf("with 1 left at the server, nothing sent since: %v; want it sent", err)
	}
	resp.Body.Close()
}
