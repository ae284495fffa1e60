package httptestutil_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
	"github.com/httpretry/httpretry/internal/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.Main(m)
}

// start returns a started Server over HTTP/2 when h2 is set, else HTTP/1,
// closed when the test ends.
func start(t *testing.T, h2 bool, steps ...httptestutil.Step) *httptestutil.Server {
	t.Helper()
	var srv *httptestutil.Server
	if h2 {
		srv = httptestutil.NewTLSServer(steps...)
	} else {
		srv = httptestutil.NewServer(steps...)
	}
	t.Cleanup(func() {
		srv.Client().CloseIdleConnections()
		srv.Close()
	})
	return srv
}

// protos names the two ways a Server is reached.
var protos = []struct {
	name string
	h2   bool
}{{"HTTP1", false}, {"HTTP2", true}}

// anyErr accepts every non-nil error: HTTP/2 stream resets have no
// exported identity to check.
func anyErr(error) bool { return true }

func is(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

func TestServerActions(t *testing.T) {
	t.Parallel()
	type testCase struct {
		name        string
		step        httptestutil.Step
		leave       bool             // cancel the request once the server has it
		cancelAfter int              // cancel the request after reading this many bytes; 0 means never
		wantErr     func(error) bool // nil: the request must succeed
		wantStatus  int
		wantLength  int64
		wantBody    string
		wantReadErr func(error) bool // nil: the body must read cleanly
		minElapsed  time.Duration
	}
	cases := func(h2 bool) []testCase {
		closeErr, resetErr := is(io.EOF), is(syscall.ECONNRESET)
		if h2 {
			closeErr, resetErr = anyErr, anyErr
		}
		return []testCase{
			{name: "zero step", wantStatus: 200, wantLength: 0},
			{
				name: "respond",
				step: httptestutil.Step{Status: 503, Header: http.Header{"X-Test": {"a"}},
					Body: "busy", RetryAfter: "2"},
				wantStatus: 503, wantLength: 4, wantBody: "busy",
			},
			{
				name:       "respond after delay",
				step:       httptestutil.Step{Body: "late", Delay: 30 * time.Millisecond},
				wantStatus: 200, wantLength: 4, wantBody: "late", minElapsed: 30 * time.Millisecond,
			},
			{
				name:  "delay outlasting the client",
				step:  httptestutil.Step{Body: "late", Delay: time.Hour},
				leave: true, wantErr: is(context.Canceled),
			},
			{name: "close conn", step: httptestutil.Step{Action: httptestutil.CloseConn}, wantErr: closeErr},
			{
				name:  "hang",
				step:  httptestutil.Step{Action: httptestutil.Hang},
				leave: true, wantErr: is(context.Canceled),
			},
			{
				name:       "trickle",
				step:       httptestutil.Step{Action: httptestutil.Trickle, Body: "abcd", Interval: 5 * time.Millisecond},
				wantStatus: 200, wantLength: 4, wantBody: "abcd", minElapsed: 20 * time.Millisecond,
			},
			{
				name:        "client leaving a trickle",
				step:        httptestutil.Step{Action: httptestutil.Trickle, Body: "abcdefghij", Interval: 5 * time.Millisecond},
				cancelAfter: 3, wantStatus: 200, wantLength: 10, wantBody: "abc",
				wantReadErr: is(context.Canceled), minElapsed: 15 * time.Millisecond,
			},
			{
				name:       "reset body",
				step:       httptestutil.Step{Action: httptestutil.ResetBody, Status: 502, Body: "abcdefgh"},
				wantStatus: 502, wantLength: 8, wantBody: "abcd", wantReadErr: resetErr,
			},
		}
	}
	for _, p := range protos {
		for _, tc := range cases(p.h2) {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				srv := start(t, p.h2, tc.step)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tc.leave {
					go func() {
						waitFor(func() bool { return srv.Hits() > 0 })
						cancel()
					}()
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				begin := time.Now()
				resp, err := srv.Client().Do(req)
				if tc.wantErr != nil {
					if err == nil || !tc.wantErr(err) {
						t.Fatalf("Do: got error %v, want a matching error", err)
					}
				} else {
					if err != nil {
						t.Fatalf("Do: %v", err)
					}
					defer resp.Body.Close()
					if got, want := resp.ProtoMajor, map[bool]int{false: 1, true: 2}[p.h2]; got != want {
						t.Errorf("ProtoMajor: got %d, want %d", got, want)
					}
					if resp.StatusCode != tc.wantStatus || resp.ContentLength != tc.wantLength {
						t.Errorf("status, length: got %d, %d; want %d, %d",
							resp.StatusCode, resp.ContentLength, tc.wantStatus, tc.wantLength)
					}
					for k := range tc.step.Header {
						if got, want := resp.Header.Get(k), tc.step.Header.Get(k); got != want {
							t.Errorf("header %s: got %q, want %q", k, got, want)
						}
					}
					if got, want := resp.Header.Get("Retry-After"), tc.step.RetryAfter; got != want {
						t.Errorf("Retry-After: got %q, want %q", got, want)
					}
					head := make([]byte, tc.cancelAfter)
					n, err := io.ReadFull(resp.Body, head)
					if err != nil {
						t.Fatalf("reading the first %d bytes: got %d, %v", tc.cancelAfter, n, err)
					}
					if tc.cancelAfter > 0 {
						cancel()
					}
					rest, err := io.ReadAll(resp.Body)
					body := append(head, rest...)
					if string(body) != tc.wantBody {
						t.Errorf("body: got %q, want %q", body, tc.wantBody)
					}
					switch {
					case tc.wantReadErr == nil && err != nil:
						t.Errorf("reading body: %v", err)
					case tc.wantReadErr != nil && (err == nil || !tc.wantReadErr(err)):
						t.Errorf("reading body: got error %v, want a matching error", err)
					}
				}
				if got := time.Since(begin); got < tc.minElapsed {
					t.Errorf("elapsed: got %v, want at least %v", got, tc.minElapsed)
				}
				if got := srv.Hits(); got != 1 {
					t.Errorf("Hits: got %d, want 1", got)
				}
			})
		}
	}
}

func TestServerScript(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		steps []httptestutil.Step
		want  []int
	}{
		{"empty script answers 200", nil, []int{200, 200}},
		{"last step repeats", []httptestutil.Step{{Status: 500}, {Status: 502}, {Status: 204}},
			[]int{500, 502, 204, 204, 204}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := start(t, false, tc.steps...)
			for i, want := range tc.want {
				resp, err := srv.Client().Get(srv.URL)
				if err != nil {
					t.Fatalf("request %d: %v", i+1, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("request %d: got status %d, want %d", i+1, resp.StatusCode, want)
				}
			}
			if got, want := srv.Hits(), len(tc.want); got != want {
				t.Errorf("Hits: got %d, want %d", got, want)
			}
		})
	}
}

func TestServerRecordsRequests(t *testing.T) {
	t.Parallel()
	srv := start(t, false)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/items?id=7", strings.NewReader("payload"))
	req.Header.Set("Idempotency-Key", "k1")
	for _, r := range []*http.Request{req, mustGet(t, srv.URL+"/health")} {
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	got := srv.Requests()
	if len(got) != 2 {
		t.Fatalf("Requests: got %d, want 2", len(got))
	}
	first := got[0]
	if first.Method != "POST" || first.Path != "/items" || first.RawQuery != "id=7" ||
		string(first.Body) != "payload" || first.Hit != 1 || first.Header.Get("Idempotency-Key") != "k1" {
		t.Errorf("first request: got %+v", first)
	}
	if second := got[1]; second.Method != "GET" || second.Path != "/health" || len(second.Body) != 0 || second.Hit != 2 {
		t.Errorf("second request: got %+v", second)
	}
	// The copies are the caller's to change.
	first.Header.Set("Idempotency-Key", "changed")
	first.Body[0] = 'X'
	if again := srv.Requests()[0]; again.Header.Get("Idempotency-Key") != "k1" || string(again.Body) != "payload" {
		t.Errorf("Requests shares state with the recorder: %+v", again)
	}
}

// waitFor polls cond until it holds or five seconds have passed, and
// reports whether it held. Server tests need it for what happens on the
// other end of a connection, which no event announces.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if cond() {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return cond()
}

func mustGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
