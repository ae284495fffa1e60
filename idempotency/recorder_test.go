package idempotency_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/httpretry/httpretry/idempotency"
)

// writer answers 201 with n bytes written in chunks of 100, declaring
// Content-Length when declare is set and flushing after the first chunk
// when flush is set.
func writer(n int, declare, flush bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if declare {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		}
		w.WriteHeader(http.StatusCreated)
		body := strings.Repeat("0123456789", n/10+1)[:n]
		for i := 0; i < n; i += 100 {
			io.WriteString(w, body[i:min(i+100, n)])
			if flush && i == 0 {
				w.(http.Flusher).Flush()
			}
		}
	})
}

func TestResponseBodyLimit(t *testing.T) {
	const limit = 1024
	cases := []struct {
		name      string
		size      int
		declare   bool
		flush     bool
		recorded  bool
		inTrailer bool // the marker comes as a trailer, not a header
	}{
		{"at_limit", limit, false, false, true, false},
		{"at_limit_declared", limit, true, false, true, false},
		{"empty", 0, false, false, true, false},
		{"over_limit", limit + 1, false, false, false, false},
		{"far_over_limit", 64 << 10, false, false, false, false},
		{"over_limit_declared", limit + 1, true, false, false, false},
		{"at_limit_flushed", limit, false, true, true, false},
		{"over_limit_flushed", limit + 1, false, true, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, writer(tc.size, tc.declare, tc.flush), memory(), idempotency.Options{MaxResponseBody: limit})
			first := s.post(t, "k", "x")
			expectStatus(t, "first", first, http.StatusCreated)
			if len(first.body) != tc.size {
				t.Fatalf("client read %d bytes, want %d", len(first.body), tc.size)
			}
			header, trailer := first.header.Get(idempotency.RecordedHeader), first.trailer.Get(idempotency.RecordedHeader)
			want := "false"
			if tc.recorded {
				want = ""
			}
			if got := map[bool]string{false: header, true: trailer}[tc.inTrailer]; got != want {
				t.Fatalf("marker (trailer: %v) = %q, want %q; header %q, trailer %q", tc.inTrailer, got, want, header, trailer)
			}
			second := s.post(t, "k", "x")
			expectStatus(t, "second", second, http.StatusCreated)
			replayed := second.header.Get(idempotency.ReplayedHeader) == "true"
			if replayed != tc.recorded {
				t.Fatalf("second request replayed = %v, want %v", replayed, tc.recorded)
			}
			if second.body != first.body {
				t.Fatalf("second body differs: %d bytes, want %d", len(second.body), len(first.body))
			}
			if tc.recorded && second.header.Get("Content-Length") != strconv.Itoa(tc.size) {
				t.Fatalf("replay Content-Length = %q, want %d", second.header.Get("Content-Length"), tc.size)
			}
			wantRuns := map[bool]int{true: 1, false: 2}[tc.recorded]
			if got := s.events.count(idempotency.KindExecuted); got != wantRuns {
				t.Fatalf("executions = %d, want %d", got, wantRuns)
			}
		})
	}
}

// A handler that returns without writing because its request's context
// ended — its client gave up — answered nothing: no empty 200 is recorded,
// the key is freed, and a retry runs the handler again.
func TestAbandonedHandlerThatWritesNothingRecordsNothing(t *testing.T) {
	runs := 0
	ev := &events{}
	h := idempotency.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.Header().Set("X-Run", strconv.Itoa(runs))
		<-r.Context().Done()
	}), memory(), idempotency.Options{OnEvent: ev.add})
	for i := 1; i <= 2; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the client is gone
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", strings.NewReader("x"))
		req.Header.Set(idempotency.KeyHeader, "k")
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, req)
		if rr.Header().Get(idempotency.RecordedHeader) != "false" || rr.Header().Get(idempotency.ReplayedHeader) != "" || rr.Header().Get("X-Run") != strconv.Itoa(i) {
			t.Fatalf("request %d: headers %v; want run %d, not recorded, not a replay", i, rr.Header(), i)
		}
	}
	if runs != 2 {
		t.Fatalf("runs = %d, want 2", runs)
	}
	if got := ev.count(idempotency.KindNotRecorded); got != 2 {
		t.Fatalf("not_recorded = %d, want 2", got)
	}
}

func TestInformationalResponsesPassThrough(t *testing.T) {
	s := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusAccepted)
		w.WriteHeader(http.StatusInternalServerError) // superfluous: ignored
		io.WriteString(w, "accepted")
	}), memory(), idempotency.Options{})
	expectStatus(t, "first", s.post(t, "k", "x"), http.StatusAccepted)
	r := s.post(t, "k", "x")
	expectStatus(t, "replay", r, http.StatusAccepted)
	if r.body != "accepted" || r.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("replay body %q, replayed %q", r.body, r.header.Get(idempotency.ReplayedHeader))
	}
}

func TestHijackedResponseIsNotRecorded(t *testing.T) {
	runs := 0
	hijacker := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nraw ok")
		brw.Flush()
	})
	ev := &events{}
	protected := idempotency.Handler(hijacker, memory(), idempotency.Options{OnEvent: ev.add})
	// The client has its answer before the middleware frees the key: wait
	// for the server side to finish before the next request.
	served := make(chan struct{}, 2)
	url := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protected.ServeHTTP(w, r)
		served <- struct{}{}
	}))
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("x"))
		req.Header.Set(idempotency.KeyHeader, "k")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "raw ok" || resp.Header.Get(idempotency.ReplayedHeader) != "" {
			t.Fatalf("request %d: %d %q, replayed %q; want the handler's raw answer", i, resp.StatusCode, b, resp.Header.Get(idempotency.ReplayedHeader))
		}
		<-served
	}
	if runs != 2 || ev.count(idempotency.KindNotRecorded) != 2 {
		t.Fatalf("runs = %d, not_recorded = %d; want 2, 2", runs, ev.count(idempotency.KindNotRecorded))
	}
}

func TestOverHTTP2(t *testing.T) {
	cases := []struct {
		name             string
		size             int
		flush            bool
		header, trailer  string
		replayedOnSecond bool
	}{
		{"recorded", 1000, false, "", "", true},
		{"over_limit", 4096, false, "false", "", false},
		{"over_limit_flushed", 4096, true, "", "false", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(idempotency.Handler(writer(tc.size, false, tc.flush), memory(),
				idempotency.Options{MaxResponseBody: 1024}))
			srv.EnableHTTP2 = true
			srv.StartTLS()
			client := srv.Client()
			t.Cleanup(func() {
				client.CloseIdleConnections()
				srv.Close()
			})
			s := &server{url: srv.URL, client: client, events: &events{}}
			first := s.post(t, "k", "x")
			expectStatus(t, "first", first, http.StatusCreated)
			if first.proto != "HTTP/2.0" {
				t.Fatalf("protocol %s, want HTTP/2.0", first.proto)
			}
			if first.header.Get(idempotency.RecordedHeader) != tc.header || first.trailer.Get(idempotency.RecordedHeader) != tc.trailer {
				t.Fatalf("header %q, trailer %q; want %q, %q", first.header.Get(idempotency.RecordedHeader),
					first.trailer.Get(idempotency.RecordedHeader), tc.header, tc.trailer)
			}
			if len(first.body) != tc.size {
				t.Fatalf("read %d bytes, want %d", len(first.body), tc.size)
			}
			second := s.post(t, "k", "x")
			if got := second.header.Get(idempotency.ReplayedHeader) == "true"; got != tc.replayedOnSecond || second.body != first.body {
				t.Fatalf("second: replayed %v (want %v), %d bytes", got, tc.replayedOnSecond, len(second.body))
			}
		})
	}
}

// TestSilentSuccessIsReplayedNotRunAgain: a handler that does its work and
// returns without writing, while its client still waits, answered the
// implicit 200 net/http sends. That is its outcome: a retry (the reply was
// lost on the way) gets it replayed, with the headers the handler set, and
// the operation does not run a second time. Only a handler whose request's
// context had ended — its client gave up — records nothing.
func TestSilentSuccessIsReplayedNotRunAgain(t *testing.T) {
	var runs atomic.Int32
	s := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		w.Header().Set("Location", "/orders/"+strconv.Itoa(int(n)))
	}), memory(), idempotency.Options{})
	first := s.post(t, "k", "x")
	expectStatus(t, "first", first, http.StatusOK)
	if got := first.header.Get(idempotency.RecordedHeader); got != "" {
		t.Fatalf("first: %s = %q, want none (recorded)", idempotency.RecordedHeader, got)
	}
	retry := s.post(t, "k", "x")
	expectStatus(t, "retry", retry, http.StatusOK)
	if retry.header.Get(idempotency.ReplayedHeader) != "true" || retry.header.Get("Location") != "/orders/1" || retry.body != "" {
		t.Fatalf("retry: replayed %q, Location %q, body %q; want the replay of run 1", retry.header.Get(idempotency.ReplayedHeader), retry.header.Get("Location"), retry.body)
	}
	if got := runs.Load(); got != 1 {
		t.Fatalf("runs = %d, want 1", got)
	}
}

// TestWritesBeyondDeclaredContentLengthFailAsInNetHTTP: a handler that
// declares Content-Length and then writes more gets http.ErrContentLength
// for the write that goes beyond it, as from net/http's own writer. The
// response that goes out — the declared bytes — is what is recorded: the
// first answer is complete, and its replay carries the same bytes, never
// ones the client was not sent.
func TestWritesBeyondDeclaredContentLengthFailAsInNetHTTP(t *testing.T) {
	errs := make(chan error, 2)
	s := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		w.WriteHeader(http.StatusCreated)
		_, err1 := io.WriteString(w, "01234")
		_, err2 := io.WriteString(w, "56789")
		errs <- err1
		errs <- err2
	}), memory(), idempotency.Options{})
	first := s.post(t, "k", "x")
	if err1, err2 := <-errs, <-errs; err1 != nil || !errors.Is(err2, http.ErrContentLength) {
		t.Fatalf("handler's writes: %v, %v; want nil, http.ErrContentLength", err1, err2)
	}
	expectStatus(t, "first", first, http.StatusCreated)
	if first.body != "01234" {
		t.Fatalf("first: body %q, want 01234", first.body)
	}
	replay := s.post(t, "k", "x")
	expectStatus(t, "replay", replay, http.StatusCreated)
	if replay.body != "01234" || replay.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Fatalf("replay: body %q, replayed %q; want 01234, replayed", replay.body, replay.header.Get(idempotency.ReplayedHeader))
	}
}
