package httpretry

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

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
