package httpretry

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// echoHandler answers at once and then echoes the request body line by
// line, flushing each: a bidirectional stream.
func echoHandler(fullDuplex bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if fullDuplex {
			if err := rc.EnableFullDuplex(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		w.WriteHeader(http.StatusOK)
		rc.Flush()
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			io.WriteString(w, sc.Text()+"\n")
			rc.Flush()
		}
	})
}

// TestStreamingRequestBodyOwnedByBase: a request body that cannot be
// rewound belongs to Base once an attempt has handed it over; the
// Transport must not close it when RoundTrip returns, or a bidirectional
// stream fails on its first write after the response headers. Over
// HTTP/2 and over HTTP/1 full-duplex, with one attempt and with three.
func TestStreamingRequestBodyOwnedByBase(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"HTTP/1.1 full-duplex", "HTTP/2"} {
		for _, attempts := range []int{1, 3} {
			t.Run(proto+"/"+string(rune('0'+attempts))+" attempts", func(t *testing.T) {
				t.Parallel()
				srv := newUnstartedServer(echoHandler(proto != "HTTP/2"))
				var base *http.Transport
				if proto == "HTTP/2" {
					srv.EnableHTTP2 = true
					srv.StartTLS()
					base = srv.Client().Transport.(*http.Transport).Clone()
					base.ForceAttemptHTTP2 = true
					base.TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
				} else {
					srv.Start()
					base = srv.Client().Transport.(*http.Transport).Clone()
				}
				defer srv.Close()
				defer base.CloseIdleConnections()

				pr, pw := io.Pipe()
				tr := &Transport{Base: base, MaxAttempts: attempts, Timeout: 10 * time.Second}
				req := newRequest(t, context.Background(), "POST", srv.URL+"/chat", nil)
				req.Body = pr
				req.ContentLength = -1
				resp, err := tr.RoundTrip(req)
				if err != nil {
					pw.Close()
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.ProtoMajor != 2 && proto == "HTTP/2" {
					t.Fatalf("spoke %s; want HTTP/2", resp.Proto)
				}
				lines := bufio.NewReader(resp.Body)
				for _, msg := range []string{"hello", "world"} {
					// Every write comes after RoundTrip returned.
					if _, err := io.WriteString(pw, msg+"\n"); err != nil {
						t.Fatalf("write %q after RoundTrip returned: %v", msg, err)
					}
					got, err := lines.ReadString('\n')
					if err != nil || got != msg+"\n" {
						t.Fatalf("echo %q, %v; want %q", got, err, msg+"\n")
					}
				}
				pw.Close()
				if rest, err := io.ReadAll(lines); err != nil || len(rest) != 0 {
					t.Errorf("after the stream ended: %q, %v; want EOF", rest, err)
				}
			})
		}
	}
}

// TestOnceBodyClosedWhenNoBaseHoldsIt: a body that cannot be rewound is
// still closed by the operation when no Base holds it: a refused dial
// closes it unread, and the operation then ends.
func TestOnceBodyClosedWhenNoBaseHoldsIt(t *testing.T) {
	t.Parallel()
	addr, err := closedAddr()
	if err != nil {
		t.Fatal(err)
	}
	body := newCountingBody("payload")
	tr := &Transport{MaxAttempts: 2, Jitter: noJitter}
	defer tr.CloseIdleConnections()
	req := newRequest(t, context.Background(), "PUT", "http://"+addr+"/", nil)
	req.Body, req.ContentLength = body, -1
	_, err = tr.RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "attempts_exhausted") {
		t.Fatalf("err = %v; want attempts_exhausted after two refused dials", err)
	}
	if got := body.closes(); got != 1 {
		t.Errorf("body closed %d times; want once", got)
	}
}

// TestExpectContinueBodyNeverReadIsSentAgain: a PUT whose body cannot be
// rewound (no GetBody, unknown length), sent with "Expect: 100-continue"
// and answered 503 before the server asked for the body, was never read:
// net/http did not send a byte of it, so it is sent again, whole, instead
// of stopping body_not_rewindable.
func TestExpectContinueBodyNeverReadIsSentAgain(t *testing.T) {
	const payload = "the only copy of this upload"
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			var hits atomic.Int32
			received := make(chan string, 1)
			srv := newLoopbackServer(t, p.h2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1) == 1 {
					// Answered before reading: no 100 Continue is sent.
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				b, _ := io.ReadAll(r.Body)
				received <- string(b)
			}))
			base := serverBase(t, srv).Clone()
			t.Cleanup(base.CloseIdleConnections)
			base.ExpectContinueTimeout = 10 * time.Second // wait for the server's word
			var o Outcome
			tr := &Transport{Base: base, Jitter: noJitter}
			body := newCountingBody(payload)
			req := newRequest(t, WithOutcome(context.Background(), &o), "PUT", srv.URL, io.NopCloser(nil))
			req.Body, req.ContentLength = body, -1 // no GetBody, length unknown: not buffered
			req.Header.Set("Expect", "100-continue")
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("err %v, outcome %+v; want the PUT sent again", err, o)
			}
			readBody(t, resp)
			if resp.StatusCode != 200 || o.Attempts != 2 || o.Reason != Final {
				t.Errorf("status %d, outcome %+v; want 200 after 2 attempts", resp.StatusCode, o)
			}
			select {
			case got := <-received:
				if got != payload {
					t.Errorf("the server received %q; want the whole body %q", got, payload)
				}
			default:
				t.Error("the server never received the body")
			}
			// Base closes the body it sent, on its own goroutine.
			for deadline := time.Now().Add(5 * time.Second); body.closes() == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond) // a poll, not a timing assumption
			}
			if got := body.closes(); got != 1 {
				t.Errorf("the caller's body was closed %d times; want once", got)
			}
		})
	}
}
