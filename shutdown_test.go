package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestServerShutdownIsTransient: a server that shuts down with a GET in
// flight (HTTP/2: a GOAWAY frame, then the connection closed; HTTP/1.1:
// the connection closed) fails the attempt with an error that is
// transient, and the GET is sent again, to the server that took over.
func TestServerShutdownIsTransient(t *testing.T) {
	realTime(t)
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			inFlight := make(chan struct{})
			var once sync.Once
			old := newLoopbackServer(t, p.h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				once.Do(func() { close(inFlight) })
				<-r.Context().Done() // until the connection is closed under it
			}))
			var served atomic.Int32
			next := newLoopbackServer(t, p.h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				served.Add(1)
				io.WriteString(w, "ok")
			}))
			// The first connection goes to the server shutting down, every
			// later one to its successor, as behind a load balancer.
			base := serverBase(t, old).Clone()
			t.Cleanup(base.CloseIdleConnections)
			var dials atomic.Int32
			dialer := &net.Dialer{}
			base.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
				addr := next.Listener.Addr().String()
				if dials.Add(1) == 1 {
					addr = old.Listener.Addr().String()
				}
				return dialer.DialContext(ctx, network, addr)
			}
			if p.h2 {
				// A custom DialContext turns HTTP/2 off unless forced.
				base.ForceAttemptHTTP2 = true
			}

			shutdown := make(chan struct{})
			go func() {
				defer close(shutdown)
				<-inFlight
				// Shutdown sends HTTP/2's GOAWAY and then waits for the
				// stream, which never ends: the connection is closed
				// under it once the GOAWAY has had time to arrive.
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				old.Config.Shutdown(ctx)
				old.CloseClientConnections()
			}()

			var first error
			var o Outcome
			tr := &Transport{
				Base:    base,
				Jitter:  noJitter,
				Timeout: 10 * time.Second,
				OnAttempt: func(_ *http.Request, a Attempt) {
					if a.Number == 1 {
						first = a.Err
					}
				},
			}
			resp, err := tr.RoundTrip(newRequest(t, WithOutcome(context.Background(), &o), "GET", old.URL, nil))
			<-shutdown
			if err != nil {
				t.Fatalf("err %v after %d attempts (first: %v); want the GET sent again", err, o.Attempts, first)
			}
			if got := readBody(t, resp); got != "ok" || o.Attempts != 2 || served.Load() != 1 {
				t.Errorf("body %q, attempts %d, successor served %d; want ok after 2 attempts, 1 served", got, o.Attempts, served.Load())
			}
			if first == nil || !IsTransient(nil, first) {
				t.Errorf("first attempt's error %v; want a transient one", first)
			}
			if p.h2 && !strings.Contains(first.Error(), "GOAWAY") {
				t.Logf("first attempt's error %v: the connection closed before the GOAWAY was read", first)
			}
		})
	}
}

// goAwayError has the text of golang.org/x/net/http2's GoAwayError, which
// a Base built on that package returns in the same case.
type goAwayError struct{ lastStreamID uint32 }

func (e goAwayError) Error() string {
	return fmt.Sprintf("http2: server sent GOAWAY and closed the connection; LastStreamID=%v, ErrCode=NO_ERROR, debug=\"\"", e.lastStreamID)
}

// TestGoAwayCloseIsTransient: the error of a stream cut by a server's
// GOAWAY and close is transient, wrapped or not, from net/http or from
// golang.org/x/net/http2.
func TestGoAwayCloseIsTransient(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		goAwayError{lastStreamID: 1},
		&url.Error{Op: "Get", URL: "https://api.test/", Err: goAwayError{lastStreamID: 3}},
	} {
		if !IsTransient(nil, err) {
			t.Errorf("IsTransient(%v) = false; want true", err)
		}
	}
}

// TestShutdownDuringPostIsNotResent: an HTTP/2 server that shuts down
// (GOAWAY, then the close) while a POST without a key is being handled
// never sees it twice: the POST reached the server, so the operation ends
// with its answer or with ErrOutcomeUnknown, not with a second send.
func TestShutdownDuringPostIsNotResent(t *testing.T) {
	realTime(t)
	t.Parallel()
	var hits atomic.Int32
	inHandler := make(chan struct{}, 1)
	srv := newLoopbackServer(t, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		select {
		case inHandler <- struct{}{}:
		default:
		}
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
		}
		panic(http.ErrAbortHandler) // the server goes away without answering
	}))
	tr := &Transport{Base: serverBase(t, srv), Jitter: noJitter, BaseDelay: time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		<-inHandler
		srv.Config.Shutdown(ctx)
		srv.CloseClientConnections()
	}()
	resp, err := tr.RoundTrip(newRequest(t, ctx, "POST", srv.URL+"/pay", strings.NewReader("amount=1")))
	if err == nil {
		resp.Body.Close()
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the server handled the POST %d times; want once", n)
	}
	if err != nil && !errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("%v; want ErrOutcomeUnknown", err)
	}
}
