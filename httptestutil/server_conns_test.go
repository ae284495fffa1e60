package httptestutil_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/httpretry/httpretry/httptestutil"
)

func TestServerConns(t *testing.T) {
	t.Parallel()
	body := httptestutil.Step{Body: strings.Repeat("x", 64<<10)}
	tests := []struct {
		name     string
		h2       bool
		step     httptestutil.Step
		drain    bool
		wantNew  int
		wantOpen int // after both requests, before closing idle connections
	}{
		{"HTTP1 drained bodies reuse the conn", false, body, true, 1, 1},
		{"HTTP1 undrained bodies cost a conn each", false, body, false, 2, 0},
		{"HTTP1 close conn leaves none open", false, httptestutil.Step{Action: httptestutil.CloseConn}, true, 2, 0},
		{"HTTP2 drained bodies reuse the conn", true, body, true, 1, 1},
		{"HTTP2 undrained bodies reuse the conn", true, body, false, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := start(t, tc.h2, tc.step)
			client := srv.Client()
			for range 2 {
				resp, err := client.Get(srv.URL)
				if err != nil {
					continue // CloseConn: the error itself is TestServerActions' business
				}
				if tc.drain {
					io.Copy(io.Discard, resp.Body)
				}
				resp.Body.Close()
			}
			if got := srv.Hits(); got != 2 {
				t.Errorf("Hits: got %d, want 2", got)
			}
			if got := srv.NewConns(); got != tc.wantNew {
				t.Errorf("NewConns: got %d, want %d", got, tc.wantNew)
			}
			// A conn the client dropped closes on the server's side a
			// moment later.
			if !waitFor(func() bool { return srv.OpenConns() == tc.wantOpen }) {
				t.Errorf("OpenConns: got %d, want %d", srv.OpenConns(), tc.wantOpen)
			}
			client.CloseIdleConnections()
			if !waitFor(func() bool { return srv.OpenConns() == 0 }) {
				t.Errorf("OpenConns after CloseIdleConnections: got %d, want 0", srv.OpenConns())
			}
		})
	}
}

// TestServerCloseReleases checks that Close returns promptly while a
// client still waits on a step that would otherwise never end, and that
// the client sees a failure rather than an answer the script never gave.
func TestServerCloseReleases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		step httptestutil.Step
		// headers is set when the client gets a response head before Close.
		headers bool
	}{
		{"hang", httptestutil.Step{Action: httptestutil.Hang}, false},
		{"delay", httptestutil.Step{Body: "late", Delay: time.Hour}, false},
		{"trickle", httptestutil.Step{Action: httptestutil.Trickle, Body: "abc", Interval: time.Hour}, true},
		// The handler blocks writing a body the client does not read.
		{"unread body", httptestutil.Step{Body: strings.Repeat("x", 32<<20)}, true},
	}
	for _, p := range protos {
		for _, tc := range tests {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				srv := start(t, p.h2, tc.step)
				gotHeaders := make(chan *http.Response, 1)
				result := make(chan error, 1)
				go func() {
					resp, err := srv.Client().Get(srv.URL)
					if err != nil {
						result <- err
						return
					}
					defer resp.Body.Close()
					gotHeaders <- resp
					<-gotHeaders // the test has seen the head: the body may be read
					_, err = io.ReadAll(resp.Body)
					result <- err
				}()
				if tc.headers {
					resp := <-gotHeaders
					if resp.StatusCode != 200 {
						t.Errorf("status: got %d, want 200", resp.StatusCode)
					}
				} else if !waitFor(func() bool { return srv.Hits() == 1 }) {
					t.Fatal("the request never arrived")
				}

				closed := make(chan struct{})
				go func() { srv.Close(); close(closed) }()
				select {
				case <-closed:
				case <-time.After(5 * time.Second):
					srv.CloseClientConnections() // let the cleanup's Close finish
					t.Fatal("Close did not return within 5s")
				}
				if tc.headers {
					gotHeaders <- nil
				}
				if err := <-result; err == nil {
					t.Error("client: got no error, want the request or its body to fail")
				}
			})
		}
	}
}
