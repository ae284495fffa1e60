package httpretry

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync/atomic"
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
// well within twice IdleTimeout (plus a timer's lateness, measured beside it) and
// its connection is released, as the server sees.
func TestIdleTimeoutOnRealStreams(t *testing.T) {
	secondsOfRealTime(t)
	t.Parallel()
	const idle = 300 * time.Millisecond
	for _, h2 := range []bool{false, true} {
		name := "HTTP/1.1"
		if h2 {
			name = "HTTP/2"
		}
		t.Run(name+"/flowing", func(t *testing.T) {
			t.Parallel()
			srv := newLoopbackServer(t, h2, sseHandler(20, 100*time.Millisecond, false, nil))
			tr := &Transport{Base: srv.Client().Transport, IdleTimeout: idle}
			resp := headersInTime(t, func() (*http.Response, error) {
				return tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/events", nil))
			})
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
			// One leave per request the server ran: at most three
			// operations (headersInTime) of three attempts.
			left := make(chan struct{}, 9)
			var hits atomic.Int32
			stalling := sseHandler(2, 100*time.Millisecond, true, left)
			srv := newLoopbackServer(t, h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				stalling.ServeHTTP(w, r)
			}))
			tr := &Transport{Base: srv.Client().Transport, IdleTimeout: idle}
			resp := headersInTime(t, func() (*http.Response, error) {
				return tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/events", nil))
			})
			defer resp.Body.Close()
			buf := make([]byte, 64)
			var last time.Time
			var lastRead time.Duration // how long the Read that brought the last bytes waited
			var lateness chan time.Duration
			for {
				began := time.Now()
				n, err := resp.Body.Read(buf)
				if n > 0 {
					// A bare timer started with the last byte measures how
					// late timers fire on this machine now.
					at, ch := time.Now(), make(chan time.Duration, 1)
					time.AfterFunc(idle, func() { ch <- time.Since(at) - idle })
					last, lateness, lastRead = at, ch, at.Sub(began)
				}
				if err != nil {
					took := time.Since(last)
					if !errors.Is(err, ErrIdleTimeout) {
						t.Fatalf("read error %v; want ErrIdleTimeout", err)
					}
					late := <-lateness
					switch {
					case took < idle && lastRead >= idle:
						// A busy machine delayed the server's last event until
						// IdleTimeout had passed: the timer fired as those
						// bytes arrived, and the Read returned them first.
						t.Logf("the Read of the last bytes waited %v; the idle timeout followed %v later", lastRead, took)
					case took < idle || took > 2*idle+late:
						// The instant is held by the fake-clock tests; on a
						// real stream the bound only has to tell the idle
						// timer from anything else ending the stream, with
						// room for a busy machine's scheduling beyond the
						// lateness the bare timer saw.
						t.Errorf("failed %v after the last byte (whose Read waited %v); want within twice %v (+%v of timer lateness)", took, lastRead, idle, late)
					}
					break
				}
			}
			// A connection never released is never seen to close: the
			// bound is generous, for a busy machine.
			for range hits.Load() {
				select {
				case <-left:
				case <-time.After(30 * time.Second):
					t.Fatal("the server never saw the client leave: the connection was not released")
				}
			}
		})
	}
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

// TestIdleBeforeHeadersCountsOnlyTheServersSilence drives a Base that
// reports its progress through httptrace, as *http.Transport does, on a
// fake clock: hours spent getting a connection and sending the body,
// before and after a 100 Continue, do not count; the idle period starts
// when the request has been written and every 1xx response restarts it;
// silence for IdleTimeout after the last one ends the attempt with an
// idle timeout, not a cancellation.
func TestIdleBeforeHeadersCountsOnlyTheServersSilence(t *testing.T) {
	t.Parallel()
	const idle = 10 * time.Second
	fc := clockwork.NewFakeClock()
	said, next := make(chan int), make(chan struct{})
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		// As net/http does, a hook is called only when set.
		tr := httptrace.ContextClientTrace(r.Context())
		if tr == nil {
			tr = &httptrace.ClientTrace{}
		}
		interim := func(code int) func() {
			return func() {
				if tr.Got1xxResponse != nil {
					tr.Got1xxResponse(code, nil)
				}
			}
		}
		events := []func(){
			func() {
				if tr.GetConn != nil {
					tr.GetConn("api.test:80")
				}
			},
			interim(http.StatusContinue),
			func() {
				if tr.WroteRequest != nil {
					tr.WroteRequest(httptrace.WroteRequestInfo{})
				}
			},
			interim(http.StatusEarlyHints),
			interim(http.StatusEarlyHints),
		}
		for i, event := range events {
			event()
			said <- i
			select {
			case <-next:
			case <-r.Context().Done():
				return nil, r.Context().Err() // as HTTP/2 reports a cut
			}
		}
		return response(r, 200, "ok"), nil
	})
	var log attemptLog
	tr := &Transport{Base: base, Clock: fc, IdleTimeout: idle, MaxAttempts: 1, OnAttempt: log.onAttempt}
	ch := start(tr, newRequest(t, context.Background(), "PUT", "http://api.test/", strings.NewReader("body")))
	for i := range 5 {
		select {
		case got := <-said:
			if got != i {
				t.Fatalf("base at event %d; want %d", got, i)
			}
		case r := <-ch:
			t.Fatalf("RoundTrip returned %v before event %d", r.err, i)
		}
		if i < 2 {
			// Getting a connection, then uploading after 100 Continue:
			// no timer runs.
			if timerArmed(fc) {
				t.Fatalf("a timer runs at event %d, before the request was written", i)
			}
			fc.Advance(time.Hour)
		} else {
			// Written, then two 1xx: the watch is armed, and not yet over.
			advance(t, fc, 1, idle-time.Millisecond)
		}
		if i < 4 {
			next <- struct{}{}
		}
	}
	advance(t, fc, 1, time.Millisecond) // IdleTimeout since the last 1xx
	r := await(t, ch)
	checkIdleError(t, r.err)
	if a := log.attempts; len(a) != 1 || !errors.Is(a[0].Err, ErrIdleTimeout) {
		t.Errorf("attempts %+v; want one, ended by ErrIdleTimeout", a)
	}
}

// timerArmed reports whether fc has a waiter now, without waiting.
func timerArmed(fc *clockwork.FakeClock) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return fc.BlockUntilContext(ctx, 1) == nil
}

// chanBody is a response body whose bytes come from ch, and whose Read
// fails when its request's context ends.
type chanBody struct {
	ctx context.Context
	ch  chan string
}

func (b *chanBody) Read(p []byte) (int, error) {
	select {
	case s := <-b.ch:
		return copy(p, s), nil
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	}
}

func (b *chanBody) Close() error { return nil }

// TestIdleClockStopsWhileCallerHoldsNoRead: after the headers, the idle
// period runs only while a Read is blocked. Hours in which the caller
// holds no Read do not count; a blocked Read that gets its bytes just
// before IdleTimeout succeeds; one that waits IdleTimeout fails.
func TestIdleClockStopsWhileCallerHoldsNoRead(t *testing.T) {
	t.Parallel()
	const idle = 10 * time.Second
	fc := clockwork.NewFakeClock()
	data := make(chan string)
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp := response(r, 200, "")
		resp.Body, resp.ContentLength = &chanBody{ctx: r.Context(), ch: data}, -1
		return resp, nil
	})
	tr := &Transport{Base: base, Clock: fc, IdleTimeout: idle}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	type read struct {
		s   string
		err error
	}
	reads := make(chan read, 1)
	readOnce := func() {
		go func() {
			buf := make([]byte, 8)
			n, err := resp.Body.Read(buf)
			reads <- read{string(buf[:n]), err}
		}()
	}
	for _, s := range []string{"a", "b"} {
		fc.Advance(time.Hour) // the caller holds no Read
		readOnce()
		advance(t, fc, 1, idle-time.Millisecond) // the Read is blocked, the watch armed
		data <- s
		if r := <-reads; r.s != s || r.err != nil {
			t.Fatalf("read %q, %v; want %q, nil", r.s, r.err, s)
		}
	}
	fc.Advance(time.Hour)
	readOnce()
	advance(t, fc, 1, idle)
	select {
	case r := <-reads:
		checkIdleError(t, r.err)
	case <-time.After(5 * time.Second):
		t.Fatal("the Read still waits after IdleTimeout")
	}
}

// TestIdleWatchIgnoresStaleFiring: a firing of the timer that was set for
// an earlier period — the timer fired just as a Read returned, and the
// next Read re-armed it before the callback ran — or that comes after the
// watch was disarmed, does not end the attempt; one at the end of the
// armed period does.
func TestIdleWatchIgnoresStaleFiring(t *testing.T) {
	t.Parallel()
	const idle = 10 * time.Second
	fc := clockwork.NewFakeClock()
	ctx, w := watchIdle(context.Background(), fc, idle)
	defer w.stop()
	w.headers()
	cut := func() bool {
		select {
		case <-ctx.Done():
			return true
		default:
			return false
		}
	}
	w.expire() // disarmed: the headers arrived
	if cut() {
		t.Fatal("a firing after the headers, with no Read blocked, ended the attempt")
	}
	w.arm(phaseBody)
	fc.Advance(idle - time.Second)
	w.expire() // left over from an earlier period: this one has a second to go
	if cut() {
		t.Fatal("a stale firing ended the attempt before its period was over")
	}
	fc.Advance(time.Second)
	w.expire()
	if !cut() || !errors.Is(context.Cause(ctx), ErrIdleTimeout) {
		t.Fatalf("cause %v at the end of the period; want the idle timeout", context.Cause(ctx))
	}
}

// TestInterimResponsesAreBoundedByTheirHeaderBytes: 1xx responses to one
// send may carry at most 10 MiB of headers in all, each field counted as
// its name, its value and 32 bytes, as net/http counts them: exactly the
// bound is allowed, an empty field more fails the attempt.
func TestInterimResponsesAreBoundedByTheirHeaderBytes(t *testing.T) {
	t.Parallel()
	_, w := watchIdle(context.Background(), clockwork.NewFakeClock(), time.Minute)
	defer w.stop()
	// One field of name "K" and a value that makes it 1 MiB with the
	// overhead: ten of them reach the bound exactly.
	field := textproto.MIMEHeader{"K": {strings.Repeat("v", 1<<20-1-headerFieldOverhead)}}
	for i := range 10 {
		if err := w.got1xx(http.StatusContinue, field); err != nil {
			t.Fatalf("1xx %d, %d MiB of headers in all: %v; want it allowed", i+1, i+1, err)
		}
	}
	if err := w.got1xx(http.StatusContinue, textproto.MIMEHeader{"": {""}}); err == nil {
		t.Fatalf("a 1xx past 10 MiB of headers allowed; want %v", errTooMany1xx)
	}
}
