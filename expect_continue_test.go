package httpretry

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
