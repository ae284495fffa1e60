package httpretry

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestAttemptReportsConnection: with OnAttempt set, each attempt reports
// whether it opened a new connection or reused one, and where its time
// went; a reused connection has no connect or TLS phase. Over plain HTTP
// and over TLS.
func TestAttemptReportsConnection(t *testing.T) {
	t.Parallel()
	for _, useTLS := range []bool{false, true} {
		name := "http"
		if useTLS {
			name = "https"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := newUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte("ok"))
			}))
			if useTLS {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			var log attemptLog
			tr := &Transport{Base: srv.Client().Transport, OnAttempt: log.onAttempt, DialTrace: true}
			for range 2 {
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL, nil))
				if err != nil {
					t.Fatal(err)
				}
				readBody(t, resp)
			}
			if len(log.attempts) != 2 {
				t.Fatalf("%d attempts reported; want 2", len(log.attempts))
			}
			first, second := log.attempts[0], log.attempts[1]
			if first.Conn != ConnNew || first.Connect <= 0 || first.ConnWait < first.Connect || first.FirstByte <= 0 {
				t.Errorf("first attempt %+v; want a new connection with its connect time inside its wait", first)
			}
			if useTLS != (first.TLSHandshake > 0) {
				t.Errorf("first attempt's TLS handshake took %v over %s", first.TLSHandshake, name)
			}
			if first.DNS != 0 {
				t.Errorf("DNS %v for an IP address; want 0", first.DNS)
			}
			if second.Conn != ConnReused || second.Connect != 0 || second.TLSHandshake != 0 || second.FirstByte <= 0 {
				t.Errorf("second attempt %+v; want a reused connection, no connect or TLS phase", second)
			}
			if first.FirstByte > first.Duration+time.Millisecond {
				t.Errorf("first byte after %v, past the attempt's %v", first.FirstByte, first.Duration)
			}
		})
	}
}

// TestDialPhasesOnlyWithDialTrace: without DialTrace an attempt still
// reports its connection, its wait for it and its first byte, but no DNS,
// connect or TLS phase: those run on net/http's dial goroutine, which may
// outlive the attempt, and are recorded only when asked for.
func TestDialPhasesOnlyWithDialTrace(t *testing.T) {
	t.Parallel()
	srv := newUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	}))
	srv.StartTLS()
	defer srv.Close()
	var log attemptLog
	tr := &Transport{Base: srv.Client().Transport, OnAttempt: log.onAttempt}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	a := log.attempts[0]
	if a.Conn != ConnNew || a.ConnWait <= 0 || a.FirstByte <= 0 {
		t.Errorf("attempt %+v; want a new connection with its wait and first byte", a)
	}
	if a.Connect != 0 || a.DNS != 0 || a.TLSHandshake != 0 {
		t.Errorf("connect %v, DNS %v, TLS %v without DialTrace; want 0", a.Connect, a.DNS, a.TLSHandshake)
	}
}

// TestAttemptConnUnknownWithoutNetHTTP: a Base that is not built on
// net/http reports no connection.
func TestAttemptConnUnknownWithoutNetHTTP(t *testing.T) {
	t.Parallel()
	var log attemptLog
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) { return response(r, 200, "ok"), nil })
	tr := &Transport{Base: base, OnAttempt: log.onAttempt}
	resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	if a := log.attempts[0]; a.Conn != ConnUnknown || a.ConnWait != 0 || a.FirstByte != 0 {
		t.Errorf("attempt %+v; want no connection facts", a)
	}
}

// TestCallerTraceStaysWithItsRequest: a ClientTrace the caller installed
// is called for its own requests, once per connection obtained, and never
// for another request the Transport sends later.
func TestCallerTraceStaysWithItsRequest(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	var got atomic.Int32
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { got.Add(1) }}
	var log attemptLog
	tr := &Transport{Base: srv.Client().Transport, OnAttempt: log.onAttempt}
	const rounds = 20
	for range rounds {
		for _, traced := range []bool{true, false} {
			ctx := context.Background()
			if traced {
				ctx = httptrace.WithClientTrace(ctx, trace)
			}
			resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			readBody(t, resp)
		}
	}
	if n := got.Load(); n != rounds {
		t.Errorf("the caller's GotConn ran %d times; want %d, once for each of its own requests", n, rounds)
	}
	if len(log.attempts) != 2*rounds || log.attempts[2*rounds-1].Conn != ConnReused {
		t.Errorf("%d attempts reported; want %d, the last on a reused connection", len(log.attempts), 2*rounds)
	}
}

// TestHiddenResendKeepsTheRequestSent: a request the Transport may not
// repeat reached the server on a reused connection, which the server
// closed without answering; net/http resent it on a new connection within
// the same attempt, and that dial was refused. The dial error does not
// prove the request unsent: the attempt had a connection, so the
// operation stops not_idempotent with the outcome unknown, and the
// request is not sent again.
func TestHiddenResendKeepsTheRequestSent(t *testing.T) {
	var hits atomic.Int32
	srv := newLoopbackServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			io.WriteString(w, "warm") // leaves the connection in the pool
			return
		}
		// Read, and then the connection is gone without an answer.
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	base := serverBase(t, srv)
	resp, err := base.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	// Every new connection is refused from now on; the pooled one is
	// still served.
	srv.Listener.Close()

	var o Outcome
	tr := &Transport{
		Base:       base,
		Jitter:     noJitter,
		Idempotent: func(*http.Request) bool { return false }, // this GET has side effects
	}
	_, err = tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", srv.URL+"/charge", nil))
	if err == nil {
		t.Fatal("got a response; want the resend's refused dial")
	}
	if got := hits.Load(); got != 2 {
		t.Errorf("server saw %d requests; want 2 (the warm-up and the GET)", got)
	}
	if o.Attempts != 1 || o.Reason != NotIdempotent || !errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("attempts %d, reason %q, err %v; want 1 attempt, not_idempotent, matching ErrOutcomeUnknown", o.Attempts, o.Reason, err)
	}
}

// TestAbandonedDialDoesNotReportIntoAnotherAttempt: an attempt over TLS
// that runs out of time while dialing leaves its dial running (net/http
// finishes it for the pool), and the dial's connect and TLS events arrive
// after the attempt was reported. They must not land in the report of a
// later attempt: a plain-HTTP attempt waiting for its own connection at
// that moment reports no TLS handshake.
func TestAbandonedDialDoesNotReportIntoAnotherAttempt(t *testing.T) {
	tlsSrv := newLoopbackServer(t, true, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	plainSrv := newLoopbackServer(t, false, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	// A's dial waits until A has given up, then connects; its TLS
	// handshake follows, on net/http's dial goroutine.
	aGaveUp, aVerified := make(chan struct{}), make(chan struct{})
	var verifiedOnce sync.Once
	aBase := serverBase(t, tlsSrv).Clone()
	t.Cleanup(aBase.CloseIdleConnections)
	aBase.TLSClientConfig = aBase.TLSClientConfig.Clone()
	aBase.TLSClientConfig.VerifyConnection = func(tls.ConnectionState) error {
		verifiedOnce.Do(func() { close(aVerified) })
		return nil
	}
	dialer := &net.Dialer{}
	aBase.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		<-aGaveUp
		return dialer.DialContext(ctx, network, addr)
	}
	var aLog attemptLog
	a := &Transport{Base: aBase, MaxAttempts: 1, AttemptTimeout: 50 * time.Millisecond, OnAttempt: aLog.onAttempt}
	if _, err := a.RoundTrip(newRequest(t, context.Background(), "GET", tlsSrv.URL, nil)); err == nil {
		t.Fatal("A's attempt got through; want it to time out while dialing")
	}

	// B's dial waits until A's late handshake is under way, so that A's
	// events fall inside B's wait for its connection.
	bBase := serverBase(t, plainSrv).Clone()
	t.Cleanup(bBase.CloseIdleConnections)
	var gaveUpOnce sync.Once
	bBase.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		gaveUpOnce.Do(func() { close(aGaveUp) })
		select {
		case <-aVerified:
		case <-time.After(5 * time.Second):
		}
		time.Sleep(20 * time.Millisecond) // let A's handshake report its end
		return dialer.DialContext(ctx, network, addr)
	}
	var bLog attemptLog
	b := &Transport{Base: bBase, OnAttempt: bLog.onAttempt}
	resp, err := b.RoundTrip(newRequest(t, context.Background(), "GET", plainSrv.URL, nil))
	if err != nil {
		t.Fatal(err)
	}
	readBody(t, resp)
	got := bLog.attempts[0]
	if got.Conn != ConnNew || got.TLSHandshake != 0 {
		t.Errorf("plain-HTTP attempt %+v; want a new connection without a TLS handshake", got)
	}
}
