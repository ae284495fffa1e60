package httptestutil_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry/httptestutil"
)

func TestTransportTrickle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		interval time.Duration
		wantWait time.Duration
	}{
		{"explicit interval", 2 * time.Second, 2 * time.Second},
		{"zero interval means 10ms", 0, 10 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := clockwork.NewFakeClock()
			tr := httptestutil.NewTransport(clock,
				httptestutil.Step{Action: httptestutil.Trickle, Body: "abc", Interval: tc.interval})
			resp, err := tr.RoundTrip(newRequest(t, t.Context(), http.MethodGet, "http://example.test/", nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.ContentLength != 3 {
				t.Errorf("ContentLength: got %d, want 3", resp.ContentLength)
			}
			done := make(chan []byte, 1)
			go func() {
				b, _ := io.ReadAll(resp.Body)
				done <- b
			}()
			for i := range 3 {
				blockUntil(t, clock, 1)
				if got := tr.BodyRead(0); got != int64(i) {
					t.Fatalf("BodyRead before byte %d: got %d, want %d", i+1, got, i)
				}
				clock.Advance(tc.wantWait - time.Nanosecond)
				if got := tr.BodyRead(0); got != int64(i) {
					t.Fatalf("byte %d arrived early: BodyRead got %d, want %d", i+1, got, i)
				}
				clock.Advance(time.Nanosecond)
			}
			if got := <-done; string(got) != "abc" {
				t.Errorf("body: got %q, want %q", got, "abc")
			}
		})
	}
}

// TestTransportTrickleEnds checks that a body waiting on the clock gives
// up when its request is cancelled or the body is closed.
func TestTransportTrickleEnds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		end  func(cancel context.CancelFunc, body io.Closer)
		want func(error) bool
	}{
		{"cancel", func(cancel context.CancelFunc, _ io.Closer) { cancel() }, is(context.Canceled)},
		{"close", func(_ context.CancelFunc, body io.Closer) { body.Close() }, anyErr},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := clockwork.NewFakeClock()
			tr := httptestutil.NewTransport(clock,
				httptestutil.Step{Action: httptestutil.Trickle, Body: "abc", Interval: time.Second})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://example.test/", nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			readErr := make(chan error, 1)
			go func() {
				_, err := resp.Body.Read(make([]byte, 8))
				readErr <- err
			}()
			blockUntil(t, clock, 1)
			tc.end(cancel, resp.Body)
			if err := <-readErr; err == nil || !tc.want(err) {
				t.Errorf("Read: got %v, want a matching error", err)
			}
			blockUntil(t, clock, 0)
			if got := tr.BodyRead(0); got != 0 {
				t.Errorf("BodyRead: got %d, want 0", got)
			}
		})
	}
}

func TestTransportResetBody(t *testing.T) {
	t.Parallel()
	tr := httptestutil.NewTransport(clockwork.NewFakeClock(),
		httptestutil.Step{Action: httptestutil.ResetBody, Body: "abcdef"})
	resp, err := (&http.Client{Transport: tr}).Get("http://example.test/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ContentLength != 6 {
		t.Errorf("ContentLength: got %d, want 6", resp.ContentLength)
	}
	body, err := io.ReadAll(resp.Body)
	if string(body) != "abc" {
		t.Errorf("body: got %q, want %q", body, "abc")
	}
	if !errors.Is(err, httptestutil.ErrReset) || !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reading body: got %v, want ErrReset", err)
	}
	if got := tr.BodyRead(0); got != 3 {
		t.Errorf("BodyRead: got %d, want 3", got)
	}
}

func TestTransportBodyAccounting(t *testing.T) {
	t.Parallel()
	tr := httptestutil.NewTransport(nil, httptestutil.Step{Body: "0123456789"})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var resps []*http.Response
	for range 4 {
		resp, err := tr.RoundTrip(newRequest(t, ctx, http.MethodGet, "http://example.test/", nil))
		if err != nil {
			t.Fatal(err)
		}
		resps = append(resps, resp)
	}
	io.ReadAll(resps[0].Body) // read all, closed
	resps[0].Body.Close()
	io.ReadFull(resps[1].Body, make([]byte, 4)) // read some, left open
	resps[2].Body.Close()                       // closed unread
	// resps[3] left open, unread.

	if _, err := resps[0].Body.Read(make([]byte, 1)); err == nil {
		t.Error("Read after Close: got no error")
	}
	if got, want := tr.Responses(), resps; !slices.Equal(got, want) {
		t.Errorf("Responses: got %p, want %p", got, want)
	}
	if got := tr.OpenBodies(); got != 2 {
		t.Errorf("OpenBodies: got %d, want 2", got)
	}
	wantClosed, wantRead := []bool{true, false, true, false}, []int64{10, 4, 0, 0}
	for i := range resps {
		if got := tr.BodyClosed(i); got != wantClosed[i] {
			t.Errorf("BodyClosed(%d): got %v, want %v", i, got, wantClosed[i])
		}
		if got := tr.BodyRead(i); got != wantRead[i] {
			t.Errorf("BodyRead(%d): got %d, want %d", i, got, wantRead[i])
		}
	}
	// As on a real transport, a body fails once its request is cancelled.
	cancel()
	if _, err := resps[3].Body.Read(make([]byte, 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("Read after cancel: got %v, want context.Canceled", err)
	}
	resps[1].Body.Close()
	resps[3].Body.Close()
	if got := tr.OpenBodies(); got != 0 {
		t.Errorf("OpenBodies after closing all: got %d, want 0", got)
	}
}

func TestTransportScript(t *testing.T) {
	t.Parallel()
	tr := httptestutil.NewTransport(nil, httptestutil.Step{Status: 500}, httptestutil.Step{Status: 202})
	sent := []struct {
		method, url, body string
	}{
		{http.MethodPost, "http://example.test/items?id=7", "first"},
		{http.MethodPut, "http://example.test/items/7", "second"},
		{http.MethodGet, "http://example.test/health", ""},
	}
	var statuses []int
	for _, s := range sent {
		body := newTrackedBody(s.body)
		req := newRequest(t, t.Context(), s.method, s.url, body)
		req.Header.Set("X-Attempt", s.body)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
		if !body.isClosed() {
			t.Errorf("%s %s: request body not closed", s.method, s.url)
		}
	}
	if want := []int{500, 202, 202}; !slices.Equal(statuses, want) {
		t.Errorf("statuses: got %v, want %v", statuses, want)
	}
	got := tr.Requests()
	if len(got) != len(sent) {
		t.Fatalf("Requests: got %d, want %d", len(got), len(sent))
	}
	wantPaths := []string{"/items", "/items/7", "/health"}
	for i, r := range got {
		if r.Method != sent[i].method || r.Path != wantPaths[i] || string(r.Body) != sent[i].body ||
			r.Header.Get("X-Attempt") != sent[i].body || r.Hit != i+1 {
			t.Errorf("request %d: got %+v", i+1, r)
		}
	}
	if got[0].RawQuery != "id=7" {
		t.Errorf("RawQuery: got %q, want %q", got[0].RawQuery, "id=7")
	}
}

// TestTransportConcurrent checks, under -race, that concurrent requests
// take distinct hits and that every step is taken as often as it should.
func TestTransportConcurrent(t *testing.T) {
	t.Parallel()
	const n = 50
	tr := httptestutil.NewTransport(nil, httptestutil.Step{Status: 503}, httptestutil.Step{Status: 200})
	var wg sync.WaitGroup
	statuses := make(chan int, n)
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, "http://example.test/", strings.NewReader("x"))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		})
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[503] != 1 || count[200] != n-1 {
		t.Errorf("statuses: got %v, want one 503 and %d 200", count, n-1)
	}
	seen := map[int]bool{}
	for _, r := range tr.Requests() {
		seen[r.Hit] = true
	}
	if len(seen) != n || tr.Hits() != n || tr.OpenBodies() != 0 {
		t.Errorf("got %d distinct hits, Hits %d, OpenBodies %d; want %d, %d, 0",
			len(seen), tr.Hits(), tr.OpenBodies(), n, n)
	}
}

// countingBody counts Read calls on a request body.
type countingBody struct {
	r     io.Reader
	reads int
}

func (b *countingBody) Read(p []byte) (int, error) { b.reads++; return b.r.Read(p) }
func (b *countingBody) Close() error               { return nil }

func TestTransportRefusedStepLeavesBodyUnread(t *testing.T) {
	t.Parallel()
	tr := httptestutil.NewTransport(nil,
		httptestutil.Step{Err: httptestutil.ErrRefused},
		httptestutil.Step{Err: httptestutil.ErrReset},
	)
	for i, wantRead := range []bool{false, true} {
		body := &countingBody{r: strings.NewReader("payload")}
		req := newRequest(t, t.Context(), http.MethodPost, "http://example.test/", nil)
		req.Body = body
		_, err := tr.RoundTrip(req)
		if err == nil {
			t.Fatalf("request %d: no error", i+1)
		}
		if read := body.reads > 0; read != wantRead {
			t.Errorf("request %d: body read %d times; want read: %v", i+1, body.reads, wantRead)
		}
	}
	reqs := tr.Requests()
	if got := string(reqs[0].Body); got != "" {
		t.Errorf("refused request recorded body %q, want none", got)
	}
	if got := string(reqs[1].Body); got != "payload" {
		t.Errorf("reset request recorded body %q, want %q", got, "payload")
	}
}

// A false Content-Length in a step's Header means the same to the
// in-memory Transport as to the Server: a body shorter than promised ends
// in io.ErrUnexpectedEOF; one longer than promised is refused whole by
// net/http's server, so the client reads nothing and then
// io.ErrUnexpectedEOF.
func TestFalseContentLengthSameForBothFakes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		length   string
		wantBody string
		wantErr  error
	}{
		{"promises more", "10", "hello", io.ErrUnexpectedEOF},
		{"promises less", "2", "", io.ErrUnexpectedEOF},
		{"promises none", "0", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			step := httptestutil.Step{Body: "hello", Header: http.Header{"Content-Length": {tc.length}}}
			mem := httptestutil.NewTransport(nil, step)
			srv := httptestutil.NewServer(step)
			defer srv.Close()
			for name, send := range map[string]func() (*http.Response, error){
				"Transport": func() (*http.Response, error) {
					return mem.RoundTrip(newRequest(t, t.Context(), http.MethodGet, "http://example.test/", nil))
				},
				"Server": func() (*http.Response, error) {
					return srv.Client().Get(srv.URL)
				},
			} {
				resp, err := send()
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(got) != tc.wantBody || !errors.Is(err, tc.wantErr) {
					t.Errorf("%s: read %q, %v; want %q, %v", name, got, err, tc.wantBody, tc.wantErr)
				}
			}
		})
	}
}
