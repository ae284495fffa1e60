package httpretry

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The tests in this file attack the core's edges with real servers: a
// server shutting down under a POST, bodies that lie about their length or
// sit exactly at BufferResponse's limit, the deprecated Request.Cancel
// channel, and many concurrent operations sharing pooled traces.

// TestShutdownDuringPostIsNotResent: an HTTP/2 server that shuts down
// (GOAWAY, then the close) while a POST without a key is being handled
// never sees it twice: the POST reached the server, so the operation ends
// with its answer or with ErrOutcomeUnknown, not with a second send.
func TestShutdownDuringPostIsNotResent(t *testing.T) {
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

// rawServer serves each connection with handle on 127.0.0.1, after
// reading one request's header.
func rawServer(t *testing.T, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				handle(c)
			})
		}
	})
	return "http://" + ln.Addr().String()
}

// TestBufferedBodyLengthLies: with BufferResponse, a body that announces
// more than it sends before the server closes is a transient failure,
// retried, and never returned as complete; one that sends more than it
// announces is returned with exactly the announced bytes.
func TestBufferedBodyLengthLies(t *testing.T) {
	t.Parallel()
	t.Run("shorter", func(t *testing.T) {
		t.Parallel()
		var hits atomic.Int32
		url := rawServer(t, func(c net.Conn) {
			if hits.Add(1) < 2 {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n0123456789")
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 20\r\nConnection: close\r\n\r\n01234567890123456789")
		})
		tr := &Transport{Base: &http.Transport{}, BufferResponse: 1 << 10, Jitter: noJitter}
		defer tr.CloseIdleConnections()
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", url, nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := readBody(t, resp); got != "01234567890123456789" || hits.Load() != 2 {
			t.Errorf("%q after %d hits; want the whole body from the second", got, hits.Load())
		}
	})
	t.Run("longer", func(t *testing.T) {
		t.Parallel()
		url := rawServer(t, func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n0123456789")
		})
		tr := &Transport{Base: &http.Transport{}, BufferResponse: 1 << 10}
		defer tr.CloseIdleConnections()
		resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", url, nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := readBody(t, resp); got != "01234" || resp.ContentLength != 5 {
			t.Errorf("%q (ContentLength %d); want the 5 announced bytes", got, resp.ContentLength)
		}
	})
}

// TestBufferedBodyAtTheLimit: a body of exactly BufferResponse bytes is
// held in memory with its trailers, known length or not; one byte more is
// returned streaming, whole, trailers included at its EOF.
func TestBufferedBodyAtTheLimit(t *testing.T) {
	t.Parallel()
	const limit = 4 << 10
	for _, p := range protocols {
		for _, tc := range []struct {
			name  string
			size  int
			known bool
		}{
			{"at limit, known length", limit, true},
			{"at limit, unknown length", limit, false},
			{"one over, known length", limit + 1, true},
			{"one over, unknown length", limit + 1, false},
		} {
			h2 := p.h2
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				payload := strings.Repeat("x", tc.size)
				srv := newLoopbackServer(t, h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Trailer", "Checksum")
					if tc.known {
						w.Header().Set("Content-Length", fmt.Sprint(tc.size))
					}
					io.WriteString(w, payload[:tc.size/2])
					http.NewResponseController(w).Flush()
					io.WriteString(w, payload[tc.size/2:])
					w.Header().Set("Checksum", "abc123")
				}))
				base := serverBase(t, srv)
				// What a bare read gets: an HTTP/1.1 body with a
				// Content-Length cannot carry trailers.
				bare, err := base.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL, nil))
				if err != nil {
					t.Fatal(err)
				}
				readBody(t, bare)
				want := bare.Trailer.Get("Checksum")
				if h2 || !tc.known {
					if want != "abc123" {
						t.Fatalf("a bare read got trailer %q; want abc123", want)
					}
				}
				tr := &Transport{Base: base, BufferResponse: limit}
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL, nil))
				if err != nil {
					t.Fatal(err)
				}
				checkProto(t, resp, h2)
				if got := readBody(t, resp); got != payload {
					t.Errorf("read %d bytes; want %d", len(got), len(payload))
				}
				if c := resp.Trailer.Get("Checksum"); c != want {
					t.Errorf("trailer Checksum %q; want %q, as a bare read", c, want)
				}
			})
		}
	}
}

// TestLegacyCancelClosedBeforeRoundTrip: a request whose deprecated Cancel
// channel is already closed stops as canceled, with an error matching
// context.Canceled, after at most one attempt that the server never
// answers with work done.
func TestLegacyCancelClosedBeforeRoundTrip(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := newLoopbackServer(t, false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	tr := &Transport{Base: serverBase(t, srv), Jitter: noJitter}
	req := newRequest(t, context.Background(), "GET", srv.URL, nil)
	ch := make(chan struct{})
	close(ch)
	//lint:ignore SA1019 the deprecated channel is what is tested
	req.Cancel = ch
	resp, err := tr.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	var e *Error
	if !errors.As(err, &e) || e.Reason != Canceled || !errors.Is(err, context.Canceled) || e.Attempts > 1 || hits.Load() > 1 {
		t.Errorf("%v after %d hits; want canceled after at most one attempt, matching context.Canceled", err, hits.Load())
	}
}

// TestConcurrentObservedOperations: many concurrent operations of one
// Transport, idempotent and not, with OnAttempt, IdleTimeout and
// Propagate, against a server that fails a third of them twice, report every
// attempt of their own and no other (each attempt's Retry-Attempt header
// is the count OnAttempt saw), under -race.
func TestConcurrentObservedOperations(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	for _, p := range protocols {
		h2 := p.h2
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := newLoopbackServer(t, h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				// A third of the operations fail their first two attempts.
				if op, _ := strconv.Atoi(r.Header.Get("X-Op")); op%3 == 0 && r.Header.Get(AttemptHeader) < "3" {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.Header().Set("X-Attempt", r.Header.Get(AttemptHeader))
				io.WriteString(w, r.Header.Get("X-Op"))
			}))
			type seen struct {
				mu       sync.Mutex
				attempts int
			}
			tr := &Transport{Base: serverBase(t, srv), Jitter: noJitter, BaseDelay: time.Millisecond,
				IdleTimeout: 5 * time.Second, Propagate: true, Timeout: 20 * time.Second,
				Budget: Unlimited, MaxAttempts: 5,
				NewIdempotencyKey: RandomKey,
				OnAttempt: func(req *http.Request, a Attempt) {
					s := req.Context().Value(seenKey{}).(*seen)
					s.mu.Lock()
					s.attempts++
					s.mu.Unlock()
				}}
			var wg sync.WaitGroup
			for i := range 64 {
				wg.Go(func() {
					s := &seen{}
					method := "GET"
					if i%2 == 1 {
						method = "POST"
					}
					ctx := context.WithValue(context.Background(), seenKey{}, s)
					req := newRequest(t, ctx, method, srv.URL, strings.NewReader("b"))
					req.Header.Set("X-Op", fmt.Sprint(i))
					resp, err := tr.RoundTrip(req)
					if err != nil {
						t.Errorf("op %d: %v", i, err)
						return
					}
					defer resp.Body.Close()
					body, err := io.ReadAll(resp.Body)
					if err != nil || string(body) != fmt.Sprint(i) {
						t.Errorf("op %d: body %q, %v", i, body, err)
					}
					s.mu.Lock()
					defer s.mu.Unlock()
					if got := resp.Header.Get("X-Attempt"); got != fmt.Sprint(s.attempts) {
						t.Errorf("op %d: answered attempt %s; OnAttempt saw %d", i, got, s.attempts)
					}
				})
			}
			wg.Wait()
		})
	}
}

type seenKey struct{}

// TestExpectContinueKeepAliveRefusal: a server that answers a PUT with
// "Expect: 100-continue" 503 before asking for the body, and keeps the
// connection open, makes net/http send the body after the answer (to keep
// the connection usable), racing the retry. Whichever way the race goes
// the outcome is one docs/rules.md allows: the PUT sent again whole, or the
// 503 returned with body_not_rewindable; never a second attempt with part
// of the body.
func TestExpectContinueKeepAliveRefusal(t *testing.T) {
	t.Parallel()
	const payload = "the only copy of this upload"
	for round := range 20 {
		var hits atomic.Int32
		received := make(chan string, 4)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				wg.Go(func() {
					defer c.Close()
					c.SetDeadline(time.Now().Add(10 * time.Second))
					br := bufio.NewReader(c)
					for {
						req, err := http.ReadRequest(br)
						if err != nil {
							return
						}
						if hits.Add(1) == 1 {
							io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
							if _, err := io.Copy(io.Discard, req.Body); err != nil {
								return
							}
							continue
						}
						b, err := io.ReadAll(req.Body)
						if err != nil {
							return
						}
						received <- string(b)
						io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
					}
				})
			}
		})
		base := &http.Transport{ExpectContinueTimeout: 10 * time.Second}
		var o Outcome
		tr := &Transport{Base: base, Jitter: noJitter}
		body := newCountingBody(payload)
		req := newRequest(t, WithOutcome(context.Background(), &o), "PUT", "http://"+ln.Addr().String(), io.NopCloser(nil))
		req.Body, req.ContentLength = body, -1
		req.Header.Set("Expect", "100-continue")
		resp, err := tr.RoundTrip(req)
		if err == nil {
			readBody(t, resp)
		}
		base.CloseIdleConnections()
		ln.Close()
		wg.Wait()
		close(received)
		switch {
		case err == nil && resp.StatusCode == 200 && o.Attempts == 2:
			if got := <-received; got != payload {
				t.Fatalf("round %d: the second attempt carried %q; want %q", round, got, payload)
			}
		case err == nil && resp.StatusCode == 503 && o.Reason == BodyNotRewindable && hits.Load() == 1:
		default:
			t.Fatalf("round %d: %v, outcome %+v, %d hits; want the PUT sent again whole or body_not_rewindable", round, err, o, hits.Load())
		}
	}
}

// TestLegacyCancelEndsBodyBuffering: closing the deprecated Request.Cancel
// channel while the Transport buffers a stalled request body (known
// length, no GetBody) before the first attempt ends RoundTrip promptly as
// canceled, as it ends an attempt or a wait: a bare http.Transport stops
// writing such a body when the channel closes. The body is closed once.
func TestLegacyCancelEndsBodyBuffering(t *testing.T) {
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

// closeCounter counts the Close calls of a ReadCloser.
type closeCounter struct {
	io.ReadCloser
	closes atomic.Int32
}

func (c *closeCounter) Close() error {
	c.closes.Add(1)
	return c.ReadCloser.Close()
}
