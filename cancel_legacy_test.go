package httpretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestLegacyCancelClosedBeforeRoundTrip: a request whose deprecated Cancel
// channel is already closed stops as canceled after at most one attempt.
// Whether that attempt reaches the server is net/http's race: it ends in
// an error matching context.Canceled, or, when the server's 503 came
// first, that response is returned (the stop rules hand back the last
// response) and the Outcome says canceled; either way nothing is retried.
func TestLegacyCancelClosedBeforeRoundTrip(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := newLoopbackServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	tr := &Transport{Base: serverBase(t, srv), Jitter: noJitter}
	var out Outcome
	req := newRequest(t, WithOutcome(context.Background(), &out), "GET", srv.URL, nil)
	ch := make(chan struct{})
	close(ch)
	//lint:ignore SA1019 the deprecated channel is what is tested
	req.Cancel = ch
	resp, err := tr.RoundTrip(req)
	var e *Error
	switch {
	case err == nil:
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || out.Reason != Canceled || out.Attempts != 1 || hits.Load() != 1 {
			t.Errorf("status %d, reason %q after %d attempts and %d hits; want the one 503, canceled", resp.StatusCode, out.Reason, out.Attempts, hits.Load())
		}
	case !errors.As(err, &e) || e.Reason != Canceled || !errors.Is(err, context.Canceled) || e.Attempts > 1 || hits.Load() > 1:
		t.Errorf("%v after %d hits; want canceled after at most one attempt, matching context.Canceled", err, hits.Load())
	}
}

// TestLegacyCancelEndsBodyBuffering: closing the deprecated Request.Cancel
// channel while the Transport buffers a stalled request body (known
// length, no GetBody) before the first attempt ends RoundTrip promptly as
// canceled, as it ends an attempt or a wait: a bare http.Transport stops
// writing such a body when the channel closes. The body is closed once.
func TestLegacyCancelEndsBodyBuffering(t *testing.T) {
	realTime(t)
	t.Parallel()
	pr, pw := io.Pipe()
	defer pw.Close()
	body := &closeCounter{ReadCloser: pr}
	req := newRequest(t, context.Background(), "PUT", "http://127.0.0.1:1/upload", nil)
	req.Body, req.ContentLength, req.GetBody = body, 10, nil
	cancelCh := make(chan struct{})
	//lint:ignore SA1019 the deprecated channel is what is tested
	req.Cancel = cancelCh
	time.AfterFunc(100*time.Millisecond, func() { close(cancelCh) })
	tr := &Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Error("an attempt was made")
		return nil, errors.New("unexpected attempt")
	})}
	done := make(chan error, 1)
	go func() {
		_, err := tr.RoundTrip(req)
		done <- err
	}()
	select {
	case err := <-done:
		var e *Error
		if !errors.As(err, &e) || e.Reason != Canceled || !errors.Is(err, context.Canceled) {
			t.Errorf("%v; want canceled, matching context.Canceled", err)
		}
		if n := body.closes.Load(); n != 1 {
			t.Errorf("the body was closed %d times; want once", n)
		}
	case <-time.After(20 * time.Second):
		pw.CloseWithError(errors.New("test over")) // let RoundTrip return
		<-done
		t.Fatal("RoundTrip still buffers the body after Request.Cancel was closed")
	}
}

// TestLegacyCancelWhileReadIsBlocked: closing the deprecated Request.Cancel
// channel while a Read of a silent stream is blocked ends the Read with a
// cancellation, not an idle timeout.
func TestLegacyCancelWhileReadIsBlocked(t *testing.T) {
	realTime(t)
	t.Parallel()
	srv := newLoopbackServer(t, false, stallHandler(true))
	tr := &Transport{Base: serverBase(t, srv), IdleTimeout: time.Minute}
	req := newRequest(t, context.Background(), "GET", srv.URL+"/events", nil)
	cancelCh := make(chan struct{})
	//lint:ignore SA1019 the deprecated channel is what is tested
	req.Cancel = cancelCh
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	time.AfterFunc(100*time.Millisecond, func() { close(cancelCh) })
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, ErrIdleTimeout) {
			t.Errorf("read error %v; want a cancellation", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the Read still waits after Request.Cancel was closed")
	}
}
