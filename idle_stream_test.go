package httpretry

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The tests in this file hold IdleTimeout to what a read timeout means:
// it bounds how long one blocking wait for the server's bytes lasts, and
// never counts time in which the caller was not reading. Each runs over
// real loopback servers speaking HTTP/1.1 and HTTP/2 (TLS).

// checkProto fails the test when resp was not carried by the protocol the
// subtest is about.
func checkProto(t *testing.T, resp *http.Response, h2 bool) {
	t.Helper()
	if want := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != want {
		t.Fatalf("response over %s; want HTTP/%d", resp.Proto, want)
	}
}

// timedReader measures the longest single Read of r: how long the caller
// itself waited for bytes. Only a wait of IdleTimeout or more may end in
// an idle timeout.
type timedReader struct {
	r       io.Reader
	longest time.Duration
}

func (tr *timedReader) Read(p []byte) (int, error) {
	start := time.Now()
	n, err := tr.r.Read(p)
	tr.longest = max(tr.longest, time.Since(start))
	return n, err
}

// headersInTime returns the response of do, an operation against a
// loopback server that sends its headers at once, for a test about what
// happens after the headers. On a busy machine those headers can come
// later than a short IdleTimeout in every attempt: that is the machine's
// load, not what the test is about, so such an operation is tried again,
// up to three times, and the test is skipped, saying why, if none got its
// headers. Any error other than an idle timeout fails the test.
func headersInTime(t *testing.T, do func() (*http.Response, error)) *http.Response {
	t.Helper()
	var err error
	for range 3 {
		var resp *http.Response
		if resp, err = do(); err == nil {
			return resp
		}
		if !errors.Is(err, ErrIdleTimeout) {
			t.Fatalf("%v; want a response", err)
		}
	}
	t.Skipf("the machine delayed the headers past IdleTimeout in three operations: %v", err)
	return nil
}

// TestSlowConsumerIsNotAStalledServer: a server that sends 100 events, one
// every 20ms, to a caller that twice stops reading for 1.5s, several times
// IdleTimeout (400ms), while the stream still flows, is not silent: the
// bytes wait in the connection while nobody reads, and the whole stream
// arrives, then EOF.
func TestSlowConsumerIsNotAStalledServer(t *testing.T) {
	realTime(t)
	if testing.Short() {
		t.Skip("the caller pauses for seconds of real time")
	}
	t.Parallel()
	const (
		idle   = 400 * time.Millisecond
		events = 100
		pause  = 1500 * time.Millisecond
	)
	for _, p := range protocols {
		h2 := p.h2
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := newLoopbackServer(t, h2, sseHandler(events, 20*time.Millisecond, false, nil))
			tr := &Transport{Base: srv.Client().Transport, IdleTimeout: idle}
			resp := headersInTime(t, func() (*http.Response, error) {
				return tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/events", nil))
			})
			defer resp.Body.Close()
			checkProto(t, resp, h2)
			body := &timedReader{r: resp.Body}
			sc := bufio.NewScanner(body)
			got := 0
			for sc.Scan() {
				if sc.Text() == "" {
					continue
				}
				if want := fmt.Sprintf("data: %d", got); sc.Text() != want {
					t.Fatalf("event %q; want %q", sc.Text(), want)
				}
				got++
				if got == 1 || got == 50 {
					time.Sleep(pause) // busy elsewhere: no Read pending
				}
			}
			switch err := sc.Err(); {
			case err == nil && got == events:
			case errors.Is(err, ErrIdleTimeout) && body.longest >= idle:
				t.Logf("the machine stalled one Read for %v: the stream ended after %d events", body.longest, got)
			default:
				t.Errorf("%d events, then %v (longest Read %v); want %d events and EOF", got, err, body.longest, events)
			}
		})
	}
}

// TestCompleteBodyIsNotExpiredBeforeRead: a 256 KiB body the server sent
// at once is read whole by a caller that starts reading three times
// IdleTimeout after the headers.
func TestCompleteBodyIsNotExpiredBeforeRead(t *testing.T) {
	realTime(t)
	t.Parallel()
	const idle = 200 * time.Millisecond
	payload := make([]byte, 256<<10)
	for i := range payload {
		payload[i] = byte(i % 251)
	}
	for _, p := range protocols {
		h2 := p.h2
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := newLoopbackServer(t, h2, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
				w.Write(payload)
			}))
			tr := &Transport{Base: srv.Client().Transport, IdleTimeout: idle}
			resp := headersInTime(t, func() (*http.Response, error) {
				return tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/big", nil))
			})
			defer resp.Body.Close()
			checkProto(t, resp, h2)
			time.Sleep(3 * idle) // the caller is not reading yet
			body := &timedReader{r: resp.Body}
			got, err := io.ReadAll(body)
			switch {
			case err == nil && bytes.Equal(got, payload):
			case errors.Is(err, ErrIdleTimeout) && body.longest >= idle:
				t.Logf("the machine stalled one Read for %v: %d bytes read", body.longest, len(got))
			default:
				t.Errorf("read %d bytes (equal: %v), then %v (longest Read %v); want all %d", len(got), bytes.Equal(got, payload), err, body.longest, len(payload))
			}
		})
	}
}

// slowBody is a request body of n chunks of 1 KiB, one every gap.
type slowBody struct {
	n, sent int
	gap     time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.sent == b.n {
		return 0, io.EOF
	}
	if b.sent > 0 {
		time.Sleep(b.gap) // a slow producer, as a file on a slow disk
	}
	b.sent++
	return copy(p, bytes.Repeat([]byte{'u'}, min(len(p), 1<<10))), nil
}

func (b *slowBody) Close() error { return nil }

// uploadServer reads each request body to its end and records how many
// bytes of it arrived, cut or whole.
type uploadServer struct {
	mu    sync.Mutex
	sizes []int64
}

func (s *uploadServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.sizes = append(s.sizes, n)
	s.mu.Unlock()
	if err == nil {
		fmt.Fprint(w, n)
	}
}

func (s *uploadServer) uploads() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.sizes...)
}

// TestUploadIsNotSilence: an upload whose body flows for 1.2s (1 KiB every
// 40ms) is not cut by an IdleTimeout of 300ms: before the response
// headers, the idle period starts when the request has been written. The
// server sees every upload whole; none is cut while it flows.
func TestUploadIsNotSilence(t *testing.T) {
	realTime(t)
	if testing.Short() {
		t.Skip("the upload flows for a second of real time")
	}
	t.Parallel()
	const (
		idle   = 300 * time.Millisecond
		chunks = 30
	)
	for _, p := range protocols {
		h2 := p.h2
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			var up uploadServer
			srv := newLoopbackServer(t, h2, &up)
			newBody := func() (io.ReadCloser, error) { return &slowBody{n: chunks, gap: 40 * time.Millisecond}, nil }
			var o Outcome
			req := newRequest(t, WithOutcome(context.Background(), &o), "PUT", srv.URL+"/upload", nil)
			req.Body, _ = newBody()
			req.GetBody, req.ContentLength = newBody, chunks<<10
			tr := &Transport{Base: srv.Client().Transport, IdleTimeout: idle}
			resp, err := tr.RoundTrip(req)
			// On a busy machine a response may come later than IdleTimeout
			// after the upload, and be retried, in every attempt; an upload
			// is never cut.
			switch {
			case err == nil:
				checkProto(t, resp, h2)
				if got := readBody(t, resp); resp.StatusCode != 200 || got != strconv.Itoa(chunks<<10) {
					t.Errorf("%d %q; want 200 %d", resp.StatusCode, got, chunks<<10)
				}
			case errors.Is(err, ErrIdleTimeout):
				t.Logf("the machine delayed every response past IdleTimeout: %v after %d attempts (%s)", err, o.Attempts, o.Reason)
			default:
				t.Fatalf("%v after %d attempts (%s); server saw uploads of %v bytes", err, o.Attempts, o.Reason, up.uploads())
			}
			for i, n := range up.uploads() {
				if n != chunks<<10 {
					t.Errorf("upload %d: the server received %d bytes; want %d: an attempt was cut while its body flowed", i+1, n, chunks<<10)
				}
			}
		})
	}
}

// silenceTrace measures, through the caller's own httptrace hooks and
// OnAttempt, each attempt's longest wait for its response headers without
// receiving anything: from the request written, or the last 1xx response,
// to the next 1xx or the attempt's end. It also counts the 1xx responses
// the caller's trace saw in each attempt, and whether IdleTimeout cut it.
type silenceTrace struct {
	mu       sync.Mutex
	last     time.Time
	longest  time.Duration
	interim  int
	attempts []attemptSilence
}

// attemptSilence is what silenceTrace saw of one attempt.
type attemptSilence struct {
	longest time.Duration // the longest silence
	interim int           // the 1xx responses
	idle    bool          // the attempt ended in ErrIdleTimeout
}

// heard records a moment the server was heard from: the request written
// starts the first silence, each 1xx ends one and starts the next.
func (s *silenceTrace) heard(interim bool) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.last.IsZero() {
		s.longest = max(s.longest, now.Sub(s.last))
	}
	s.last = now
	if interim {
		s.interim++
	}
}

// end closes the attempt: its last silence lasted until now.
func (s *silenceTrace) end(_ *http.Request, a Attempt) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.last.IsZero() {
		s.longest = max(s.longest, now.Sub(s.last))
	}
	s.attempts = append(s.attempts, attemptSilence{s.longest, s.interim, errors.Is(a.Err, ErrIdleTimeout)})
	s.last, s.longest, s.interim = time.Time{}, 0, 0
}

func (s *silenceTrace) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { s.heard(false) },
		Got1xxResponse: func(int, textproto.MIMEHeader) error {
			s.heard(true)
			return nil
		},
	}
}

// TestInterimResponsesAreProgress: a server that sends 103 Early Hints
// every 50ms for 1.2s before its final answer is not silent for an
// IdleTimeout of 300ms: no attempt is cut by it unless the caller's own
// trace saw a silence of at least half of IdleTimeout — a hint the
// machine delayed, which the Transport may then count as silence. On a
// busy machine every attempt may be cut so; on a quiet one the first
// succeeds, and its trace saw every hint. Had a 1xx not restarted the
// idle timer, the attempt would be cut 300ms after the request was
// written, in a silence of 50ms.
func TestInterimResponsesAreProgress(t *testing.T) {
	realTime(t)
	if testing.Short() {
		t.Skip("the server hints for a second of real time")
	}
	t.Parallel()
	const (
		idle  = 300 * time.Millisecond
		gap   = 50 * time.Millisecond
		hints = 24
	)
	for _, p := range protocols {
		h2 := p.h2
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int32
			srv := newLoopbackServer(t, h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				for range hints {
					w.Header().Set("Link", "</app.css>; rel=preload; as=style")
					w.WriteHeader(http.StatusEarlyHints)
					select {
					case <-time.After(gap):
					case <-r.Context().Done():
						return
					}
				}
				w.WriteHeader(http.StatusOK)
				io.WriteString(w, "ok")
			}))
			var st silenceTrace
			ctx := httptrace.WithClientTrace(context.Background(), st.trace())
			tr := &Transport{Base: srv.Client().Transport, IdleTimeout: idle, OnAttempt: st.end}
			resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", srv.URL+"/page", nil))
			st.mu.Lock()
			attempts := slices.Clone(st.attempts)
			st.mu.Unlock()
			for i, a := range attempts {
				if a.idle && a.longest < idle/2 {
					t.Errorf("attempt %d was cut by IdleTimeout (%v) after %d hints, the longest silence %v: each hint must restart the idle timer", i+1, idle, a.interim, a.longest)
				}
			}
			if err != nil {
				if !errors.Is(err, ErrIdleTimeout) {
					t.Fatalf("%v after %d requests (%+v); want a response, or an idle timeout after silences the machine caused", err, hits.Load(), attempts)
				}
				if !t.Failed() {
					t.Logf("the machine delayed hints in every attempt: %v (%+v)", err, attempts)
				}
				return
			}
			checkProto(t, resp, h2)
			if got := readBody(t, resp); resp.StatusCode != 200 || got != "ok" {
				t.Errorf("%d %q; want 200 ok", resp.StatusCode, got)
			}
			if n := len(attempts); n == 0 || int(hits.Load()) != n || attempts[n-1].interim != hints {
				t.Errorf("%d requests, the caller's trace saw %+v; want one request per attempt and %d hints in the last", hits.Load(), attempts, hints)
			} else if n > 1 {
				t.Logf("the machine delayed a hint: %d attempts (%+v)", n, attempts)
			}
		})
	}
}

// stallHandler sends the headers and one event when events is set, then
// holds the response open without a byte until the client leaves.
func stallHandler(events bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if events {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: 0\n\n")
			http.NewResponseController(w).Flush()
		}
		<-r.Context().Done()
	})
}

// checkIdleError fails the test unless err is an idle timeout, a timeout,
// and not a cancellation: the caller canceled nothing.
func checkIdleError(t *testing.T, err error) {
	t.Helper()
	var te interface{ Timeout() bool }
	if !errors.Is(err, ErrIdleTimeout) || !errors.As(err, &te) || !te.Timeout() {
		t.Errorf("error %v; want one matching ErrIdleTimeout, a timeout", err)
	}
	if errors.Is(err, context.Canceled) {
		t.Errorf("error %v matches context.Canceled; the caller canceled nothing", err)
	}
}

// TestIdleTimeoutIsNotCancellation: the error of a body Read after an idle
// timeout, and RoundTrip's error after attempts that all went quiet before
// their headers, match ErrIdleTimeout and are timeouts, never
// context.Canceled.
func TestIdleTimeoutIsNotCancellation(t *testing.T) {
	realTime(t)
	t.Parallel()
	const idle = 150 * time.Millisecond
	for _, p := range protocols {
		h2 := p.h2
		t.Run(p.name+"/read", func(t *testing.T) {
			t.Parallel()
			srv := newLoopbackServer(t, h2, stallHandler(true))
			tr := &Transport{Base: srv.Client().Transport, IdleTimeout: idle}
			resp := headersInTime(t, func() (*http.Response, error) {
				return tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/events", nil))
			})
			defer resp.Body.Close()
			checkProto(t, resp, h2)
			got, err := io.ReadAll(resp.Body)
			if string(got) != "data: 0\n\n" {
				t.Errorf("read %q before the stall; want the first event", got)
			}
			checkIdleError(t, err)
		})
		t.Run(p.name+"/round_trip", func(t *testing.T) {
			t.Parallel()
			srv := newLoopbackServer(t, h2, stallHandler(false))
			tr := &Transport{Base: srv.Client().Transport, IdleTimeout: idle, MaxAttempts: 2, Jitter: noJitter}
			client := &http.Client{Transport: tr}
			resp, err := client.Do(newRequest(t, context.Background(), "GET", srv.URL+"/slow", nil))
			if err == nil {
				resp.Body.Close()
				t.Fatalf("got %d; want an error", resp.StatusCode)
			}
			checkIdleError(t, err)
			var uerr *url.Error
			var e *Error
			if !errors.As(err, &uerr) || !uerr.Timeout() {
				t.Errorf("error %v; want a *url.Error whose Timeout is true", err)
			}
			if !errors.As(err, &e) || e.Reason != AttemptsExhausted || e.Attempts != 2 || !e.Timeout() {
				t.Errorf("error %v; want an *Error: attempts_exhausted after 2 attempts, a timeout", err)
			}
		})
	}
}

// TestIdleBodyCloseDuringRead: closing the body while a Read is blocked
// ends that Read promptly with an error that is not an idle timeout (the
// caller closed it; the server was silent for less than IdleTimeout), and
// nothing races.
func TestIdleBodyCloseDuringRead(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		h2 := p.h2
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := newLoopbackServer(t, h2, stallHandler(true))
			tr := &Transport{Base: srv.Client().Transport, IdleTimeout: time.Minute}
			resp := headersInTime(t, func() (*http.Response, error) {
				return tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/events", nil))
			})
			checkProto(t, resp, h2)
			done := make(chan error, 1)
			go func() {
				_, err := io.ReadAll(resp.Body)
				done <- err
			}()
			time.Sleep(50 * time.Millisecond) // let the Read block; either order is fine
			resp.Body.Close()
			select {
			case err := <-done:
				if err == nil || errors.Is(err, ErrIdleTimeout) {
					t.Errorf("read error %v after Close; want a closed body's error, not an idle timeout", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the Read still waits after Close")
			}
		})
	}
}

// TestIdleTimerRacesRead: with IdleTimeout as short as the gaps between
// a server's events, the timer fires around the moment Reads return, and
// the caller closes the body at some point. Every outcome docs/rules.md
// allows is accepted — the whole stream and EOF, or a prefix of it and an
// idle timeout, or the closed body's error — but the bytes read are
// always a prefix of what was sent, and nothing panics or races.
func TestIdleTimerRacesRead(t *testing.T) {
	realTime(t)
	t.Parallel()
	const events = 200
	var want bytes.Buffer
	for i := range events {
		fmt.Fprintf(&want, "data: %d\n\n", i)
	}
	for _, p := range protocols {
		h2 := p.h2
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := newLoopbackServer(t, h2, sseHandler(events, time.Millisecond, false, nil))
			for round := range 10 {
				tr := &Transport{Base: srv.Client().Transport, IdleTimeout: time.Millisecond, MaxAttempts: 1}
				resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/events", nil))
				if err != nil {
					if !errors.Is(err, ErrIdleTimeout) {
						t.Fatalf("round %d: %v; want a response or an idle timeout", round, err)
					}
					continue
				}
				closed := make(chan struct{})
				go func() {
					time.Sleep(time.Duration(round) * 20 * time.Millisecond)
					resp.Body.Close()
					close(closed)
				}()
				got, err := io.ReadAll(resp.Body)
				<-closed
				if !bytes.HasPrefix(want.Bytes(), got) {
					t.Fatalf("round %d: read %q, not a prefix of the stream", round, got)
				}
				if err == nil && len(got) != want.Len() {
					t.Errorf("round %d: EOF after %d of %d bytes", round, len(got), want.Len())
				}
			}
		})
	}
}
