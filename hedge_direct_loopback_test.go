package httpretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// directHedgedServer starts a loopback server over HTTP/1.1 or, with
// TLS, HTTP/2, and a Transport with fixed-delay Hedging and nothing else,
// whose first attempt is sent directly.
func directHedgedServer(t *testing.T, h2 bool, delay time.Duration, handler http.HandlerFunc) (*httptest.Server, *Transport) {
	t.Helper()
	srv := httptest.NewUnstartedServer(handler)
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	base := srv.Client().Transport.(*http.Transport)
	t.Cleanup(base.CloseIdleConnections)
	return srv, &Transport{Base: base, MaxAttempts: 2, Hedging: &Hedging{Delay: delay}}
}

type callerKey struct{}

// TestDirectHedgedAnswerCarriesTheRequestSent: a hedged operation whose
// first attempt, sent directly, answers before the hedge delay returns a
// response whose Request is the request sent: the caller's URL and
// header, and a context through which the caller's values are reached;
// closing the body ends that context. Reading after Close fails, and a
// second Close is harmless. Over HTTP/1.1 and HTTP/2.
func TestDirectHedgedAnswerCarriesTheRequestSent(t *testing.T) {
	realTime(t)
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			t.Parallel()
			srv, tr := directHedgedServer(t, h2, time.Hour, func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, r.Header.Get("X-Caller")+" "+r.Proto)
			})
			ctx := context.WithValue(context.Background(), callerKey{}, "mine")
			req := newRequest(t, ctx, http.MethodGet, srv.URL+"/path?q=1", nil)
			req.Header.Set("X-Caller", "c1")
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got := resp.Request
			if got.URL.String() != req.URL.String() || got.Header.Get("X-Caller") != "c1" || got.Method != http.MethodGet {
				t.Errorf("resp.Request: %s %s %v; want the request sent", got.Method, got.URL, got.Header)
			}
			if v := got.Context().Value(callerKey{}); v != "mine" {
				t.Errorf("resp.Request's context value: %v; want the caller's", v)
			}
			b, err := io.ReadAll(resp.Body)
			if want := "c1 " + map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2]; err != nil || string(b) != want {
				t.Errorf("body %q, %v; want %q", b, err, want)
			}
			if err := resp.Body.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			select {
			case <-got.Context().Done():
			case <-time.After(hangGuardBody):
				t.Error("the attempt's context did not end with the body's Close")
			}
			if n, err := resp.Body.Read(make([]byte, 1)); n != 0 || err == nil {
				t.Errorf("Read after Close: %d, %v; want an error", n, err)
			}
			resp.Body.Close()
			if req.Context().Err() != nil {
				t.Error("the caller's context ended with the body")
			}
		})
	}
}

// TestDirectHedgedFirstAttemptIsCanceledWhenTheHedgeWins: the first
// attempt, sent directly, hangs past the hedge delay; the hedge answers.
// The server sees the first attempt's request end (its context done)
// once the hedge's answer is returned, the caller's context is
// untouched, and the answer is the hedge's. Over HTTP/1.1 and HTTP/2.
func TestDirectHedgedFirstAttemptIsCanceledWhenTheHedgeWins(t *testing.T) {
	realTime(t)
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			t.Parallel()
			var n atomic.Int32
			firstEnded := make(chan struct{})
			srv, tr := directHedgedServer(t, h2, 5*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 1 {
					<-r.Context().Done()
					close(firstEnded)
					return
				}
				io.WriteString(w, "hedge")
			})
			req := newRequest(t, context.Background(), http.MethodGet, srv.URL, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(b) != "hedge" {
				t.Errorf("body %q, %v; want the hedge's", b, err)
			}
			select {
			case <-firstEnded:
			case <-time.After(hangGuardBody):
				t.Fatal("the server never saw the first attempt end")
			}
			if req.Context().Err() != nil {
				t.Error("the caller's context ended")
			}
		})
	}
}

// TestDirectHedgedBodyEndsWithTheCallersContext: the first attempt, sent
// directly, answers before the hedge delay with a body that trickles;
// the caller cancels its context while reading it. The read fails with
// the caller's cancel, Close returns, and the server sees its request
// end. Over HTTP/1.1 and HTTP/2.
func TestDirectHedgedBodyEndsWithTheCallersContext(t *testing.T) {
	realTime(t)
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			t.Parallel()
			serverEnded := make(chan struct{})
			srv, tr := directHedgedServer(t, h2, time.Hour, func(w http.ResponseWriter, r *http.Request) {
				defer close(serverEnded)
				io.WriteString(w, "part")
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, srv.URL, nil))
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4)
			if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "part" {
				t.Fatalf("first part %q, %v", buf, err)
			}
			cancel()
			_, err = io.ReadAll(resp.Body)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("read after the caller's cancel: %v; want context.Canceled", err)
			}
			resp.Body.Close()
			resp.Body.Close()
			select {
			case <-serverEnded:
			case <-time.After(hangGuardBody):
				t.Fatal("the server never saw the request end")
			}
		})
	}
}
