package httpretry

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry/httptestutil"
)

// TestIdleBeforeHeadersIsRetried: an attempt whose response headers do
// not arrive within IdleTimeout fails as a transient idle timeout and is
// retried.
func TestIdleBeforeHeadersIsRetried(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Action: httptestutil.Hang}, httptestutil.Step{Status: 200, Body: "ok"})
	var log attemptLog
	tr := &Transport{Base: base, Clock: fc, IdleTimeout: 10 * time.Second, Jitter: noJitter, OnAttempt: log.onAttempt}
	ch := start(tr, newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	advanceAt(t, fc, base, 1, 1, 10*time.Second) // the idle watch is the only waiter, once the request hangs
	r := await(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := readBody(t, r.resp); got != "ok" || base.Hits() != 2 {
		t.Errorf("body %q after %d hits; want ok after 2", got, base.Hits())
	}
	if a := log.attempts; len(a) != 2 || !errors.Is(a[0].Err, ErrIdleTimeout) {
		t.Fatalf("attempts %+v; want the first to end in ErrIdleTimeout", a)
	}
}

// TestIdleAfterHeadersFailsTheRead: once RoundTrip has returned, a body
// that goes quiet for IdleTimeout fails its Read with an error that
// matches ErrIdleTimeout and is a timeout.
func TestIdleAfterHeadersFailsTheRead(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := httptestutil.NewTransport(fc, httptestutil.Step{Action: httptestutil.Trickle, Body: "abc", Interval: time.Minute})
	tr := &Transport{Base: base, Clock: fc, IdleTimeout: 10 * time.Second}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	advance(t, fc, 2, 10*time.Second) // the idle watch and the trickle's first byte
	err = <-done
	var te interface{ Timeout() bool }
	if !errors.Is(err, ErrIdleTimeout) || !errors.As(err, &te) || !te.Timeout() {
		t.Fatalf("read error %v; want ErrIdleTimeout, a timeout", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "httpretry: response idle timeout: ") || strings.Contains(msg, "api.test") {
		t.Errorf("read error %q; want it to say it is an idle timeout, without the URL", msg)
	}
}

// sseHandler sends n events, one every gap, then, when stall is set,
// holds the response open without a byte until the client leaves, and
// reports that on left.
func sseHandler(n int, gap time.Duration, stall bool, left chan<- struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, "data: %d\n\n", i)
			rc.Flush()
			if i < n-1 || stall {
				select {
				case <-time.After(gap):
				case <-r.Context().Done():
					return
				}
			}
		}
		if stall {
			<-r.Context().Done()
			left <- struct{}{}
		}
	})
}

// TestIdleTimeoutOnRealStreams: over HTTP/1.1 and HTTP/2, a stream of
// server-sent events that flows for 2s with gaps of 100ms survives an
// IdleTimeout of 300ms, however long it runs; one that stalls fails
// within IdleTimeout (plus a timer's lateness, measured beside it) and
// its connection is released, as the server sees.
func TestIdleTimeoutOnRealStreams(t *testing.T) {
	t.Parallel()
	const idle = 300 * time.Millisecond
	for _, h2 := range []bool{false, true} {
		name := "HTTP/1.1"
		if h2 {
			name = "HTTP/2"
		}
		t.Run(name+"/flowing", func(t *testing.T) {
			t.Parallel()
			srv := newStreamServer(t, h2, sseHandler(20, 100*time.Millisecond, false, nil))
			tr := &Transport{Base: srv.Client().Transport, IdleTimeout: idle}
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/events", nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			// Count events and the longest silence the client saw. On a
			// busy machine the client may be descheduled for longer than
			// IdleTimeout; only then may the stream fail.
			events, last, longest := 0, time.Now(), time.Duration(0)
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				now := time.Now()
				longest, last = max(longest, now.Sub(last)), now
				if len(sc.Text()) > 0 {
					events++
				}
			}
			longest = max(longest, time.Since(last))
			switch err := sc.Err(); {
			case err == nil && events == 20:
			case errors.Is(err, ErrIdleTimeout) && longest >= idle:
				t.Logf("the machine stalled the client for %v: the stream ended after %d events", longest, events)
			default:
				t.Errorf("%d events, %v, longest silence %v; want 20 events and EOF while bytes flow", events, err, longest)
			}
		})
		t.Run(name+"/stalled", func(t *testing.T) {
			t.Parallel()
			left := make(chan struct{}, 1)
			srv := newStreamServer(t, h2, sseHandler(2, 100*time.Millisecond, true, left))
			tr := &Transport{Base: srv.Client().Transport, IdleTimeout: idle}
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/events", nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := make([]byte, 64)
			var last time.Time
			var lateness chan time.Duration
			for {
				n, err := resp.Body.Read(buf)
				if n > 0 {
					// A bare timer started with the last byte measures how
					// late timers fire on this machine now.
					at, ch := time.Now(), make(chan time.Duration, 1)
					time.AfterFunc(idle, func() { ch <- time.Since(at) - idle })
					last, lateness = at, ch
				}
				if err != nil {
					took := time.Since(last)
					if !errors.Is(err, ErrIdleTimeout) {
						t.Fatalf("read error %v; want ErrIdleTimeout", err)
					}
					late := <-lateness
					if took < idle || took > idle+50*time.Millisecond+late {
						t.Errorf("failed %v after the last byte; want within %v + 50ms (+%v of timer lateness)", took, idle, late)
					}
					break
				}
			}
			select {
			case <-left:
			case <-time.After(5 * time.Second):
				t.Error("the server never saw the client leave: the connection was not released")
			}
		})
	}
}

// newStreamServer starts a loopback server speaking HTTP/2 over TLS, or
// HTTP/1.1, closed with the test.
func newStreamServer(t *testing.T, h2 bool, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// emptyReadBody returns no bytes and no error on its first Read, after
// first of clock's time has passed, then blocks until its request's
// context ends.
type emptyReadBody struct {
	ctx   context.Context
	clock clockwork.Clock
	first time.Duration
	reads int
}

func (b *emptyReadBody) Read([]byte) (int, error) {
	b.reads++
	if b.reads == 1 {
		<-b.clock.After(b.first)
		return 0, nil
	}
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

func (b *emptyReadBody) Close() error { return nil }

// TestEmptyReadIsNoProgress: a Read that brings no bytes does not restart
// the idle period: the next Read waits only for what is left of it.
func TestEmptyReadIsNoProgress(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClock()
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp := response(r, 200, "")
		resp.Body, resp.ContentLength = &emptyReadBody{ctx: r.Context(), clock: fc, first: 6 * time.Second}, -1
		return resp, nil
	})
	tr := &Transport{Base: base, Clock: fc, IdleTimeout: 10 * time.Second}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	done := make(chan error, 2)
	go func() {
		n, err := resp.Body.Read(make([]byte, 8))
		if n != 0 || err != nil {
			done <- fmt.Errorf("first read: %d, %v; want 0, nil", n, err)
			return
		}
		_, err = resp.Body.Read(make([]byte, 8))
		done <- err
	}()
	advance(t, fc, 2, 6*time.Second) // the idle watch and the empty read
	// 10s of blocked reads: the idle period, counted across both, is over.
	advance(t, fc, 1, 4*time.Second)
	select {
	case err := <-done:
		if !errors.Is(err, ErrIdleTimeout) {
			t.Errorf("read error %v; want ErrIdleTimeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the read still waits: an empty read restarted the idle period")
	}
}
