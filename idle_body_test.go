package httpretry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The tests in this file hold IdleTimeout from the caller's side and the
// server's: interim floods, readers that go through io.Copy, decoders and
// files, and a caller that cancels or runs out of time while a Read waits.

// TestInterimFloodStaysBounded: a server that answers with 103 Early Hints
// as fast as it can, and never with a final response, fails the attempt as
// it does over a bare http.Transport (which bounds the total size of 1xx
// headers). Installing IdleTimeout's 1xx hook must not lift that bound:
// without Timeout nothing else would ever end the attempt.
func TestInterimFloodStaysBounded(t *testing.T) {
	secondsOfRealTime(t)
	t.Parallel()
	for _, p := range protocols {
		h2 := p.h2
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := newLoopbackServer(t, h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// Large hints reach the bound in few responses.
				w.Header().Set("Link", "</app.css?v="+strings.Repeat("0", 4<<10)+">; rel=preload; as=style")
				for r.Context().Err() == nil {
					w.WriteHeader(http.StatusEarlyHints)
				}
			}))
			base := serverBase(t, srv)
			// The caller's own deadline is far off: only a bound on the
			// flood ends the attempt before it.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			bare, err := base.RoundTrip(newRequest(t, ctx, "GET", srv.URL+"/flood", nil))
			if err == nil {
				bare.Body.Close()
				t.Fatalf("bare transport: %d; want the flood refused", bare.StatusCode)
			}
			if ctx.Err() != nil {
				t.Fatalf("bare transport ran until the caller's deadline: %v", err)
			}
			tr := &Transport{Base: base, IdleTimeout: time.Second, MaxAttempts: 1}
			resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", srv.URL+"/flood", nil))
			if err == nil {
				resp.Body.Close()
				t.Fatalf("%d; want the flood refused", resp.StatusCode)
			}
			if ctx.Err() != nil {
				t.Errorf("the attempt ran until the caller's deadline: %v; want it refused as a bare transport refuses it", err)
			}
		})
	}
}

// stepHandler sends the headers, then n chunks of size bytes, one every gap,
// then ends.
func stepHandler(n, size int, gap time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, size)
		for i := range chunk {
			chunk[i] = 'a' + byte(i%26)
		}
		rc := http.NewResponseController(w)
		w.WriteHeader(http.StatusOK)
		rc.Flush()
		for range n {
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			}
			w.Write(chunk)
			rc.Flush()
		}
	})
}

// TestIdleBodyThroughReaderFrom: io.Copy into a file (an io.ReaderFrom,
// which may splice) still reads through the watched body: a stream with
// gaps shorter than IdleTimeout arrives whole, and a stall longer than
// IdleTimeout ends the copy with an idle timeout.
func TestIdleBodyThroughReaderFrom(t *testing.T) {
	realTime(t)
	t.Parallel()
	for _, p := range protocols {
		h2 := p.h2
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := newLoopbackServer(t, h2, stepHandler(10, 1000, 20*time.Millisecond))
			tr := &Transport{Base: serverBase(t, srv), IdleTimeout: 2 * time.Second}
			resp := headersInTime(t, func() (*http.Response, error) {
				return tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/file", nil))
			})
			defer resp.Body.Close()
			checkProto(t, resp, h2)
			f, err := os.Create(filepath.Join(t.TempDir(), "body"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			n, err := io.Copy(f, resp.Body)
			if err != nil || n != 10000 {
				t.Errorf("copied %d bytes, %v; want 10000 and no error", n, err)
			}
		})
		t.Run(p.name+"/stall", func(t *testing.T) {
			t.Parallel()
			srv := newLoopbackServer(t, h2, stallHandler(true))
			tr := &Transport{Base: serverBase(t, srv), IdleTimeout: 200 * time.Millisecond}
			resp := headersInTime(t, func() (*http.Response, error) {
				return tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/file", nil))
			})
			defer resp.Body.Close()
			f, err := os.Create(filepath.Join(t.TempDir(), "body"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			n, err := io.Copy(f, resp.Body)
			if n != int64(len("data: 0\n\n")) {
				t.Errorf("copied %d bytes before the stall; want the first event", n)
			}
			checkIdleError(t, err)
		})
	}
}

// TestIdleBodyThroughDecoderAndClientTimeout: a JSON stream decoded
// through an http.Client with a Timeout of its own, one value every 30ms,
// read by a caller that sleeps longer than IdleTimeout after each value,
// arrives whole.
func TestIdleBodyThroughDecoderAndClientTimeout(t *testing.T) {
	realTime(t)
	if testing.Short() {
		t.Skip("the caller pauses for seconds of real time")
	}
	t.Parallel()
	const values = 8
	for _, p := range protocols {
		h2 := p.h2
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := newLoopbackServer(t, h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rc := http.NewResponseController(w)
				for i := range values {
					fmt.Fprintf(w, "{\"n\":%d}\n", i)
					rc.Flush()
					time.Sleep(30 * time.Millisecond)
				}
			}))
			client := &http.Client{
				Transport: &Transport{Base: serverBase(t, srv), IdleTimeout: 150 * time.Millisecond},
				Timeout:   time.Minute,
			}
			resp := headersInTime(t, func() (*http.Response, error) {
				return client.Get(srv.URL + "/json")
			})
			defer resp.Body.Close()
			checkProto(t, resp, h2)
			body := &timedReader{r: resp.Body}
			dec := json.NewDecoder(body)
			got := 0
			for {
				var v struct{ N int }
				err := dec.Decode(&v)
				if err == io.EOF {
					break
				}
				if err != nil {
					if errors.Is(err, ErrIdleTimeout) && body.longest >= 150*time.Millisecond {
						t.Logf("the machine stalled one Read for %v", body.longest)
						return
					}
					t.Fatalf("after %d values: %v (longest Read %v)", got, err, body.longest)
				}
				if v.N != got {
					t.Fatalf("value %d; want %d", v.N, got)
				}
				got++
				time.Sleep(400 * time.Millisecond)
			}
			if got != values {
				t.Errorf("%d values; want %d", got, values)
			}
		})
	}
}

// TestCallerEndsWhileReadIsBlocked: with an IdleTimeout far off, a caller
// that cancels its context, or whose deadline passes, while a Read of a
// silent stream is blocked, gets its own error from the Read:
// context.Canceled or context.DeadlineExceeded, never ErrIdleTimeout.
func TestCallerEndsWhileReadIsBlocked(t *testing.T) {
	realTime(t)
	t.Parallel()
	for _, p := range protocols {
		h2 := p.h2
		for _, deadline := range []bool{false, true} {
			name := p.name + "/cancel"
			if deadline {
				name = p.name + "/deadline"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				srv := newLoopbackServer(t, h2, stallHandler(true))
				var ctx context.Context
				var cancel context.CancelFunc
				if deadline {
					ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
				} else {
					ctx, cancel = context.WithCancel(context.Background())
				}
				defer cancel()
				tr := &Transport{Base: serverBase(t, srv), IdleTimeout: time.Minute}
				resp, err := tr.RoundTrip(newRequest(t, ctx, "GET", srv.URL+"/events", nil))
				if err != nil {
					t.Skipf("the machine took the whole deadline before the headers: %v", err)
				}
				defer resp.Body.Close()
				if !deadline {
					time.AfterFunc(100*time.Millisecond, cancel)
				}
				_, err = io.ReadAll(resp.Body)
				want := context.Canceled
				if deadline {
					want = context.DeadlineExceeded
				}
				if !errors.Is(err, want) || errors.Is(err, ErrIdleTimeout) {
					t.Errorf("read error %v; want %v, not an idle timeout", err, want)
				}
			})
		}
	}
}

// TestIdleWithBaseWithoutTrace: a Base that reports no httptrace events
// and never answers is cut after IdleTimeout, and each attempt's error is
// an idle timeout.
func TestIdleWithBaseWithoutTrace(t *testing.T) {
	realTime(t)
	t.Parallel()
	var hits atomic.Int32
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		hits.Add(1)
		<-r.Context().Done()
		return nil, context.Cause(r.Context())
	})
	tr := &Transport{Base: base, IdleTimeout: 100 * time.Millisecond, MaxAttempts: 2, Jitter: noJitter}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := tr.RoundTrip(newRequest(t, ctx, "GET", "http://127.0.0.1:1/", nil))
	checkIdleError(t, err)
	var e *Error
	if !errors.As(err, &e) || e.Reason != AttemptsExhausted || hits.Load() != 2 {
		t.Errorf("%v after %d hits; want attempts_exhausted after 2", err, hits.Load())
	}
	if ctx.Err() != nil {
		t.Error("the attempts ran until the caller's deadline")
	}
}

// TestTimeoutWhileReadIsBlocked: with IdleTimeout far off, the operation's
// Timeout passing while a Read of a silent stream is blocked ends the Read
// with a timeout that matches context.DeadlineExceeded, not ErrIdleTimeout.
func TestTimeoutWhileReadIsBlocked(t *testing.T) {
	secondsOfRealTime(t)
	t.Parallel()
	for _, p := range protocols {
		h2 := p.h2
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := newLoopbackServer(t, h2, stallHandler(true))
			tr := &Transport{Base: serverBase(t, srv), IdleTimeout: time.Minute, Timeout: 2 * time.Second}
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/events", nil))
			if err != nil {
				t.Skipf("the machine took the whole Timeout before the headers: %v", err)
			}
			defer resp.Body.Close()
			_, err = io.ReadAll(resp.Body)
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrIdleTimeout) || errors.Is(err, context.Canceled) {
				t.Errorf("read error %v; want context.DeadlineExceeded alone", err)
			}
		})
	}
}

// TestBufferedStallIsRetriedAsIdle: with BufferResponse, a body that stalls
// for IdleTimeout midway fails its attempt, which is retried; when every
// attempt stalls, the operation ends attempts_exhausted with an idle
// timeout that is not a cancellation.
func TestBufferedStallIsRetriedAsIdle(t *testing.T) {
	realTime(t)
	t.Parallel()
	for _, p := range protocols {
		h2 := p.h2
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int32
			srv := newLoopbackServer(t, h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				stallHandler(true).ServeHTTP(w, r)
			}))
			tr := &Transport{Base: serverBase(t, srv), IdleTimeout: 150 * time.Millisecond,
				BufferResponse: 1 << 20, MaxAttempts: 2, Jitter: noJitter}
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/events", nil))
			if err == nil {
				resp.Body.Close()
				t.Fatalf("%d; want an error", resp.StatusCode)
			}
			checkIdleError(t, err)
			var e *Error
			if !errors.As(err, &e) || e.Reason != AttemptsExhausted || hits.Load() != 2 {
				t.Errorf("%v after %d hits; want attempts_exhausted after 2", err, hits.Load())
			}
		})
	}
}

// TestIdleBodyAfterTheEnd: once a body has been closed, or has failed with
// an idle timeout, further Reads return at once: after Close an error that
// is not an idle timeout, after the timeout the idle timeout again.
func TestIdleBodyAfterTheEnd(t *testing.T) {
	realTime(t)
	t.Parallel()
	for _, p := range protocols {
		h2 := p.h2
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := newLoopbackServer(t, h2, stallHandler(true))
			tr := &Transport{Base: serverBase(t, srv), IdleTimeout: 150 * time.Millisecond, MaxAttempts: 1}
			closed := headersInTime(t, func() (*http.Response, error) {
				return tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/events", nil))
			})
			closed.Body.Close()
			if _, err := closed.Body.Read(make([]byte, 8)); err == nil || errors.Is(err, ErrIdleTimeout) {
				t.Errorf("Read after Close: %v; want a closed body's error", err)
			}
			idled := headersInTime(t, func() (*http.Response, error) {
				return tr.RoundTrip(newRequest(t, context.Background(), "GET", srv.URL+"/events", nil))
			})
			defer idled.Body.Close()
			_, err := io.ReadAll(idled.Body)
			checkIdleError(t, err)
			for range 3 {
				_, err := idled.Body.Read(make([]byte, 8))
				checkIdleError(t, err)
			}
		})
	}
}

// TestIdleEmptyBodyReleasedAtOnce: a response without a body (http.NoBody,
// as for a 204 or a HEAD) has nothing to go quiet: with IdleTimeout, as
// without it, RoundTrip releases the attempt's context before it returns,
// and the caller gets http.NoBody, not a body it must close to release it.
func TestIdleEmptyBodyReleasedAtOnce(t *testing.T) {
	t.Parallel()
	for _, idle := range []time.Duration{0, time.Minute} {
		t.Run(fmt.Sprint("IdleTimeout=", idle), func(t *testing.T) {
			t.Parallel()
			var attemptCtx context.Context
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				attemptCtx = r.Context()
				return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Request: r}, nil
			})
			tr := &Transport{Base: base, AttemptTimeout: time.Minute, IdleTimeout: idle}
			resp, err := tr.RoundTrip(newRequest(t, context.Background(), "GET", "http://api.test/", nil))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Body != http.NoBody {
				t.Errorf("Body is %T; want http.NoBody", resp.Body)
			}
			if attemptCtx.Err() == nil {
				t.Error("the attempt's context is still live after RoundTrip returned a response without a body")
			}
		})
	}
}
