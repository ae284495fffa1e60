// Package bench compares httpretry's per-request cost with its peers' on
// one loopback server. The benchmarks run only when asked for (make bench);
// the tests, which check that the comparison is fair, run in CI.
package bench

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/PuerkitoBio/rehttp"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/httpretry/httpretry"
)

// peer is one implementation under test. client builds its *http.Client
// over base, a pooled cleanhttp transport of its own, passed as is: a
// retry layer over a plain *http.Transport is how most callers use one,
// and httpretry marks the context of attempts sent through any other
// Base. retryCase selects the zero-backoff settings of the "fails twice,
// then 200" case.
type peer struct {
	name    string
	retries bool // false for bare, which sees the first 503
	client  func(base *http.Transport, retryCase bool) *http.Client
}

var peers = []peer{
	{"bare", false, func(base *http.Transport, _ bool) *http.Client {
		return &http.Client{Transport: base}
	}},
	{"httpretry", true, func(base *http.Transport, retryCase bool) *http.Client {
		t := &httpretry.Transport{Base: base}
		if retryCase {
			t.Jitter = func(time.Duration) time.Duration { return 0 }
			t.Budget = httpretry.Unlimited
		}
		return &http.Client{Transport: t}
	}},
	{"retryablehttp", true, func(base *http.Transport, retryCase bool) *http.Client {
		c := retryablehttp.NewClient()
		c.Logger = nil
		c.HTTPClient.Transport = base
		c.RetryMax = 2
		if retryCase {
			c.RetryWaitMin, c.RetryWaitMax = 0, 0
		}
		return c.StandardClient()
	}},
	{"failsafe", true, func(base *http.Transport, _ bool) *http.Client {
		// failsafehttp's HTTP builder retries most errors, 429 and every
		// 5xx but 501; its delay is 0 unless a Retry-After says otherwise.
		policy := failsafehttp.NewRetryPolicyBuilder().
			WithMaxAttempts(3).
			WithDelay(0).
			Build()
		return &http.Client{Transport: failsafehttp.NewRoundTripper(base, policy)}
	}},
	{"rehttp", true, func(base *http.Transport, _ bool) *http.Client {
		t := rehttp.NewTransport(base,
			rehttp.RetryAll(rehttp.RetryMaxRetries(2), rehttp.RetryStatuses(http.StatusServiceUnavailable)),
			rehttp.ConstDelay(0))
		return &http.Client{Transport: t}
	}},
}

// peerCase is one kind of operation. newOp returns a function that sends
// operation id through client, reads the response body to the end and
// closes it, and returns the status and the body length.
type peerCase struct {
	name  string
	newOp func(url string) func(client *http.Client, id int64) (status int, n int64, err error)
}

// postBody is the 1 KiB payload of the POST case.
var postBody = bytes.Repeat([]byte("p"), 1024)

var cases = []peerCase{
	{"get", func(url string) func(*http.Client, int64) (int, int64, error) {
		// One request for every operation, as a caller polling one URL.
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		return func(c *http.Client, _ int64) (int, int64, error) {
			return do(c, req)
		}
	}},
	{"post", func(url string) func(*http.Client, int64) (int, int64, error) {
		return func(c *http.Client, _ int64) (int, int64, error) {
			// A bytes.Reader body: http.NewRequest sets GetBody and
			// ContentLength, so a retry layer need not copy it.
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(postBody))
			if err != nil {
				return 0, 0, err
			}
			return do(c, req)
		}
	}},
	{"retry", func(url string) func(*http.Client, int64) (int, int64, error) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		op := []string{""}
		req.Header[opHeader] = op
		return func(c *http.Client, id int64) (int, int64, error) {
			op[0] = strconv.FormatInt(id, 10)
			// Each operation has its own context, canceled when it ends,
			// as a request handler's is. Canceling it also releases the
			// connection of any response a retry layer dropped without
			// closing: with context.Background such a connection stays
			// open for good, and a benchmark of a layer that leaks one
			// per retry runs out of file descriptors within a second.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			return do(c, req.WithContext(ctx))
		}
	}},
}

func do(c *http.Client, req *http.Request) (int, int64, error) {
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, n, err
}

// want returns the status and body length an operation of case c must end
// with through p.
func want(c peerCase, p peer) (status int, n int64) {
	if c.name == "retry" && !p.retries {
		return http.StatusServiceUnavailable, int64(len(unavailableBody))
	}
	return http.StatusOK, int64(len(okBody))
}

// env is where operations go: the loopback server, or the in-memory one.
type env struct {
	name      string
	url       string
	transport func() *http.Transport // a pooled transport for one implementation
	hits      func() int64
	bodyBytes func() int64
	conns     func() int64 // new connections; nil in memory
	close     func()
}

func loopback() env {
	s := newPeerServer()
	return env{
		name:      "loopback",
		url:       s.URL,
		transport: cleanhttp.DefaultPooledTransport,
		hits:      s.hits.Load,
		bodyBytes: s.bodyBytes.Load,
		conns:     s.conns.Load,
		close:     s.Close,
	}
}

func inMemory() env {
	m := newMemServer()
	return env{
		name: "memory",
		url:  memURL,
		transport: func() *http.Transport {
			return m.transport(cleanhttp.DefaultPooledTransport())
		},
		hits:      m.hits.Load,
		bodyBytes: m.bodyBytes.Load,
		close:     func() {},
	}
}

// BenchmarkPeers measures one operation of each case through each
// implementation, all against one loopback server, each implementation
// with its own pooled transport. Besides time and allocations it reports
// server hits and new connections per operation.
func BenchmarkPeers(b *testing.B) { benchPeers(b, loopback()) }

// BenchmarkPeersInMemory is BenchmarkPeers against the in-memory server:
// no network, so that times compare the implementations' own work.
func BenchmarkPeersInMemory(b *testing.B) { benchPeers(b, inMemory()) }

func benchPeers(b *testing.B, e env) {
	defer e.close()
	var id int64 // operation ids are unique across the whole run
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			for _, p := range peers {
				b.Run(p.name, func(b *testing.B) {
					base := e.transport()
					defer base.CloseIdleConnections()
					client := p.client(base, c.name == "retry")
					op := c.newOp(e.url)
					wantStatus, wantN := want(c, p)
					check := func(status int, n int64, err error) {
						if err != nil || status != wantStatus || n != wantN {
							b.Fatalf("got status %d, %d bytes, error %v; want %d, %d bytes", status, n, err, wantStatus, wantN)
						}
					}
					// Warm up: the first operation dials the pooled
					// connection, which every later one should reuse.
					id++
					check(op(client, id))
					hits0 := e.hits()
					var conns0 int64
					if e.conns != nil {
						conns0 = e.conns()
					}
					b.ReportAllocs()
					for b.Loop() {
						id++
						check(op(client, id))
					}
					b.ReportMetric(float64(e.hits()-hits0)/float64(b.N), "hits/op")
					if e.conns != nil {
						b.ReportMetric(float64(e.conns()-conns0)/float64(b.N), "conns/op")
					}
				})
			}
		})
	}
}

// TestPeersRetryThreeAttempts proves the retry case fair: every retrying
// implementation, as the benchmarks configure it, makes exactly three
// attempts and ends with the 200, on loopback and in memory.
func TestPeersRetryThreeAttempts(t *testing.T) {
	retry := caseNamed(t, "retry")
	for _, e := range []env{loopback(), inMemory()} {
		defer e.close()
		for i, p := range peers {
			if !p.retries {
				continue
			}
			t.Run(e.name+"/"+p.name, func(t *testing.T) {
				base := e.transport()
				defer base.CloseIdleConnections()
				hits0 := e.hits()
				status, n, err := retry.newOp(e.url)(p.client(base, true), int64(i+1))
				if err != nil {
					t.Fatal(err)
				}
				if status != http.StatusOK || n != int64(len(okBody)) {
					t.Errorf("got status %d with %d bytes; want 200 with %d", status, n, len(okBody))
				}
				if got := e.hits() - hits0; got != failHits+1 {
					t.Errorf("got %d server hits; want %d", got, failHits+1)
				}
			})
		}
	}
}

// TestPeersSuccessOneHit checks the success cases: every implementation
// sends each of them once, with the whole POST body, and ends with the
// 200 and its 64 bytes, on loopback and in memory.
func TestPeersSuccessOneHit(t *testing.T) {
	for _, e := range []env{loopback(), inMemory()} {
		defer e.close()
		for _, c := range []peerCase{caseNamed(t, "get"), caseNamed(t, "post")} {
			for _, p := range peers {
				t.Run(e.name+"/"+c.name+"/"+p.name, func(t *testing.T) {
					base := e.transport()
					defer base.CloseIdleConnections()
					hits0, bytes0 := e.hits(), e.bodyBytes()
					status, n, err := c.newOp(e.url)(p.client(base, false), 0)
					if err != nil {
						t.Fatal(err)
					}
					if status != http.StatusOK || n != int64(len(okBody)) {
						t.Errorf("got status %d with %d bytes; want 200 with %d", status, n, len(okBody))
					}
					if got := e.hits() - hits0; got != 1 {
						t.Errorf("got %d server hits; want 1", got)
					}
					wantBytes := int64(0)
					if c.name == "post" {
						wantBytes = int64(len(postBody))
					}
					if got := e.bodyBytes() - bytes0; got != wantBytes {
						t.Errorf("server read %d body bytes; want %d", got, wantBytes)
					}
				})
			}
		}
	}
}

func caseNamed(t *testing.T, name string) peerCase {
	t.Helper()
	for _, c := range cases {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no case %q", name)
	return peerCase{}
}
