package idempotency_test

import (
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/httpretry/httpretry/idempotency"
)

// overBothProtocols runs fn against h served on 127.0.0.1 over HTTP/1.1
// and over HTTP/2 (TLS), each with a client of its own.
func overBothProtocols(t *testing.T, newHandler func() http.Handler, fn func(t *testing.T, s *server)) {
	t.Helper()
	for _, h2 := range []bool{false, true} {
		name := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2]
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(newHandler())
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			if h2 {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			client := srv.Client()
			t.Cleanup(func() {
				client.CloseIdleConnections()
				srv.Close()
			})
			s := &server{url: srv.URL, client: client, events: &events{}}
			fn(t, s)
			if r := s.post(t, "proto", "x"); r.proto != name {
				t.Fatalf("protocol %s, want %s", r.proto, name)
			}
		})
	}
}

// TestTrailersAreRecordedAndReplayed: trailers declared with a Trailer
// field and set after the body, and trailers set with http.TrailerPrefix,
// reach the client as trailers on the first answer and on its replays.
func TestTrailersAreRecordedAndReplayed(t *testing.T) {
	newHandler := func() http.Handler {
		var runs atomic.Int32
		return idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := runs.Add(1)
			w.Header().Set("Trailer", "X-Checksum")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, "order "+strconv.Itoa(int(n)))
			w.Header().Set("X-Checksum", "sum-"+strconv.Itoa(int(n)))
			w.Header().Set(http.TrailerPrefix+"X-Items", "3")
		}), memory(), idempotency.Options{})
	}
	overBothProtocols(t, newHandler, func(t *testing.T, s *server) {
		for i := range 3 {
			r := s.post(t, "k", "x")
			expectStatus(t, "request "+strconv.Itoa(i), r, http.StatusCreated)
			if r.body != "order 1" || r.trailer.Get("X-Checksum") != "sum-1" || r.trailer.Get("X-Items") != "3" {
				t.Fatalf("request %d: body %q, trailers %v; want order 1 with X-Checksum sum-1 and X-Items 3", i, r.body, r.trailer)
			}
			if r.header.Get("X-Checksum") != "" || r.header.Get("X-Items") != "" {
				t.Fatalf("request %d: trailers sent as headers too: %v", i, r.header)
			}
			if replayed := r.header.Get(idempotency.ReplayedHeader) == "true"; replayed != (i > 0) {
				t.Fatalf("request %d: replayed %v", i, replayed)
			}
		}
	})
}

// TestHeadersSetAfterWriteHeaderMatchOnReplay: the first answer and its
// replays carry the same headers. A field set after WriteHeader goes out
// with a response held until the handler returns, so it is replayed; after
// a flush it does not go out, so it is not replayed either.
func TestHeadersSetAfterWriteHeaderMatchOnReplay(t *testing.T) {
	for _, flush := range []bool{false, true} {
		t.Run("flush="+strconv.FormatBool(flush), func(t *testing.T) {
			s := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Early", "e")
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, "head")
				if flush {
					w.(http.Flusher).Flush()
				}
				w.Header().Set("X-Late", "l")
				io.WriteString(w, "tail")
			}), memory(), idempotency.Options{})
			first := s.post(t, "k", "x")
			expectStatus(t, "first", first, http.StatusCreated)
			if got, want := first.header.Get("X-Late"), map[bool]string{false: "l", true: ""}[flush]; got != want {
				t.Fatalf("first: X-Late = %q, want %q", got, want)
			}
			replay := s.post(t, "k", "x")
			expectStatus(t, "replay", replay, http.StatusCreated)
			if replay.header.Get(idempotency.ReplayedHeader) != "true" || replay.body != "headtail" {
				t.Fatalf("replay: %q, replayed %q", replay.body, replay.header.Get(idempotency.ReplayedHeader))
			}
			for _, k := range []string{"X-Early", "X-Late"} {
				if got, want := replay.header.Get(k), first.header.Get(k); got != want {
					t.Fatalf("%s: replay %q, first answer %q", k, got, want)
				}
			}
		})
	}
}

// TestOuterHeadersAreNotRecorded: a replay keeps the fields outer layers
// set for the replaying request (a request ID, CORS) and carries the
// fields the handler set.
func TestOuterHeadersAreNotRecorded(t *testing.T) {
	c := &counter{}
	inner := idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "/orders/1")
		w.Header().Add("Vary", "Accept")
		c.ServeHTTP(w, r)
	}), memory(), idempotency.Options{})
	var requests atomic.Int32
	url := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req-"+strconv.Itoa(int(requests.Add(1))))
		w.Header().Set("Access-Control-Allow-Origin", "https://shop.example")
		w.Header().Set("Vary", "Origin")
		inner.ServeHTTP(w, r)
	}))
	s := &server{url: url, client: &http.Client{Transport: &http.Transport{}}, events: &events{}}
	t.Cleanup(s.client.CloseIdleConnections)
	first := s.post(t, "k", "x")
	expectStatus(t, "first", first, http.StatusCreated)
	for i := 2; i <= 3; i++ {
		r := s.post(t, "k", "x")
		expectStatus(t, "replay", r, http.StatusCreated)
		if r.header.Get(idempotency.ReplayedHeader) != "true" || r.body != "run 1" {
			t.Fatalf("request %d: %q, replayed %q; want the replay", i, r.body, r.header.Get(idempotency.ReplayedHeader))
		}
		if got, want := r.header.Values("X-Request-Id"), []string{"req-" + strconv.Itoa(i)}; !slices.Equal(got, want) {
			t.Fatalf("request %d: X-Request-Id = %q, want %q (its own)", i, got, want)
		}
		if got := r.header.Get("Access-Control-Allow-Origin"); got != "https://shop.example" {
			t.Fatalf("request %d: CORS header %q", i, got)
		}
		for _, k := range []string{"Location", "Content-Type"} {
			if got, want := r.header.Get(k), first.header.Get(k); got != want {
				t.Fatalf("request %d: %s = %q, want %q as first answered", i, k, got, want)
			}
		}
		if got, want := r.header.Values("Vary"), first.header.Values("Vary"); !slices.Equal(got, want) {
			t.Fatalf("request %d: Vary = %q, want %q", i, got, want)
		}
	}
	if c.count() != 1 {
		t.Fatalf("runs = %d, want 1", c.count())
	}
}

// pushWriter is a ResponseWriter that supports server push.
type pushWriter struct {
	*httptest.ResponseRecorder
	pushed []string
}

func (w *pushWriter) Push(target string, _ *http.PushOptions) error {
	w.pushed = append(w.pushed, target)
	return nil
}

// TestPusherPassesThrough: the handler sees an http.Pusher when the
// client's writer is one, and its pushes reach it; otherwise Push reports
// http.ErrNotSupported.
func TestPusherPassesThrough(t *testing.T) {
	var pushErr error
	h := idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := w.(http.Pusher)
		if !ok {
			pushErr = errors.New("not a Pusher")
			return
		}
		pushErr = p.Push("/style.css", nil)
		w.WriteHeader(http.StatusCreated)
	}), memory(), idempotency.Options{})
	newReq := func(key string) *http.Request {
		req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader("x"))
		req.Header.Set(idempotency.KeyHeader, key)
		return req
	}
	w := &pushWriter{ResponseRecorder: httptest.NewRecorder()}
	h.ServeHTTP(w, newReq("a"))
	if pushErr != nil || !slices.Equal(w.pushed, []string{"/style.css"}) || w.Code != http.StatusCreated {
		t.Fatalf("push err %v, pushed %q, status %d; want /style.css pushed, 201", pushErr, w.pushed, w.Code)
	}
	h.ServeHTTP(httptest.NewRecorder(), newReq("b"))
	if !errors.Is(pushErr, http.ErrNotSupported) {
		t.Fatalf("push through a writer without push: %v, want http.ErrNotSupported", pushErr)
	}
}

// TestTrailersWithDeclaredLengthMatchOnReplay: a handler that declares
// Content-Length and a trailer, and sets the trailer after its body, gets
// the same fields on its first answer as on its replays, over HTTP/1.1
// (where a declared length would keep net/http from sending trailers) and
// HTTP/2: the trailer arrives each time, and so does the whole body.
func TestTrailersWithDeclaredLengthMatchOnReplay(t *testing.T) {
	newHandler := func() http.Handler {
		return idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "X-Checksum")
			w.Header().Set("Content-Length", "7")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, "order 1")
			w.Header().Set("X-Checksum", "sum-1")
		}), memory(), idempotency.Options{})
	}
	overBothProtocols(t, newHandler, func(t *testing.T, s *server) {
		for i := range 3 {
			r := s.post(t, "k", "x")
			expectStatus(t, "request "+strconv.Itoa(i), r, http.StatusCreated)
			if r.body != "order 1" || r.trailer.Get("X-Checksum") != "sum-1" {
				t.Fatalf("request %d: body %q, trailers %v; want order 1 with X-Checksum sum-1", i, r.body, r.trailer)
			}
			if replayed := r.header.Get(idempotency.ReplayedHeader) == "true"; replayed != (i > 0) {
				t.Fatalf("request %d: replayed %v", i, replayed)
			}
		}
	})
}

// TestSniffedContentTypeMatchesOnReplay: a handler that sets no
// Content-Type gets one from net/http, sniffed from the first bytes it
// sends. The replay carries the same Content-Type as the first answer —
// whether the response was held to the end or flushed before its body
// (then it went out without one) — over HTTP/1.1 and HTTP/2.
func TestSniffedContentTypeMatchesOnReplay(t *testing.T) {
	for _, flush := range []bool{false, true} {
		t.Run(map[bool]string{false: "held", true: "flushed"}[flush], func(t *testing.T) {
			newHandler := func() http.Handler {
				return idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if flush {
						w.(http.Flusher).Flush()
					}
					io.WriteString(w, "<html><body>order 1</body></html>")
				}), memory(), idempotency.Options{})
			}
			overBothProtocols(t, newHandler, func(t *testing.T, s *server) {
				first := s.post(t, "k", "x")
				expectStatus(t, "first", first, http.StatusOK)
				for i := range 2 {
					r := s.post(t, "k", "x")
					expectStatus(t, "replay", r, http.StatusOK)
					if r.header.Get(idempotency.ReplayedHeader) != "true" || r.body != first.body {
						t.Fatalf("replay %d: %q, replayed %q", i, r.body, r.header.Get(idempotency.ReplayedHeader))
					}
					if got, want := r.header.Values("Content-Type"), first.header.Values("Content-Type"); !slices.Equal(got, want) {
						t.Fatalf("replay %d: Content-Type %q, first answer's %q", i, got, want)
					}
				}
			})
		})
	}
}

// TestFlushedTrailersWithDeclaredLengthMatchOnReplay: as
// TestTrailersWithDeclaredLengthMatchOnReplay, for a handler that flushes
// part of its body first: its first answer carries the trailer over
// HTTP/1.1 too, as its replays do.
func TestFlushedTrailersWithDeclaredLengthMatchOnReplay(t *testing.T) {
	newHandler := func() http.Handler {
		return idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "X-Checksum")
			w.Header().Set("Content-Length", "7")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, "ord")
			w.(http.Flusher).Flush()
			io.WriteString(w, "er 1")
			w.Header().Set("X-Checksum", "sum-1")
		}), memory(), idempotency.Options{})
	}
	overBothProtocols(t, newHandler, func(t *testing.T, s *server) {
		for i := range 3 {
			r := s.post(t, "k", "x")
			expectStatus(t, "request "+strconv.Itoa(i), r, http.StatusCreated)
			if r.body != "order 1" || r.trailer.Get("X-Checksum") != "sum-1" {
				t.Fatalf("request %d: body %q, trailers %v; want order 1 with X-Checksum sum-1", i, r.body, r.trailer)
			}
			if replayed := r.header.Get(idempotency.ReplayedHeader) == "true"; replayed != (i > 0) {
				t.Fatalf("request %d: replayed %v", i, replayed)
			}
		}
	})
}
