package httpretry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
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
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
// reports its connection, its wait for it, its TLS handshake and its first
// byte, but no DNS or connect phase.
func TestDialPhasesOnlyWithDialTrace(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	if a.Conn != ConnNew || a.ConnWait <= 0 || a.TLSHandshake <= 0 || a.FirstByte <= 0 {
		t.Errorf("attempt %+v; want a new connection with its wait, TLS handshake and first byte", a)
	}
	if a.Connect != 0 || a.DNS != 0 {
		t.Errorf("connect %v, DNS %v without DialTrace; want 0", a.Connect, a.DNS)
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
