package main

import (
	"io"
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/httpretry/httpretry"
)

// policy is one retry configuration under test. Every policy sends its
// attempts through its own cleanhttp pooled transport, the Base that
// httpretry and go-retryablehttp use by default, so that only the retry
// layer differs.
type policy struct {
	key  string // for flags and the CSV
	name string // for tables and charts
	desc string // how it is configured
	ours bool   // httpretry, not a peer
	// new returns a fresh client, with its own connection pool and retry
	// state, and a function that closes its idle connections.
	new func() (*http.Client, func())
}

// policies returns every policy, in the order of the tables.
func policies() []policy {
	return []policy{
		{
			key: "single", name: "single attempt",
			desc: "plain pooled transport, no retries",
			new: func() (*http.Client, func()) {
				base := cleanhttp.DefaultPooledTransport()
				return &http.Client{Transport: base}, base.CloseIdleConnections
			},
		},
		{
			key: "naive", name: "naive 3 attempts",
			desc: "hand-written loop: up to 3 attempts on any error, 5xx or 429, no wait; discarded bodies drained and closed",
			new: func() (*http.Client, func()) {
				base := cleanhttp.DefaultPooledTransport()
				return &http.Client{Transport: &naive{base: base, attempts: 3}}, base.CloseIdleConnections
			},
		},
		{
			key: "retryablehttp", name: "retryablehttp defaults",
			desc: "go-retryablehttp NewClient().StandardClient(): 5 attempts, waits 1s doubling to 30s, no jitter, logging off",
			new: func() (*http.Client, func()) {
				c := retryablehttp.NewClient()
				c.Logger = nil
				return c.StandardClient(), c.HTTPClient.CloseIdleConnections
			},
		},
		{
			key: "retryablehttp-tuned", name: "retryablehttp tuned",
			desc: "go-retryablehttp with RetryMax 2 (3 attempts), waits 100ms doubling to 5s, no jitter",
			new: func() (*http.Client, func()) {
				c := retryablehttp.NewClient()
				c.Logger = nil
				c.RetryMax = 2
				c.RetryWaitMin = 100 * time.Millisecond
				c.RetryWaitMax = 5 * time.Second
				return c.StandardClient(), c.HTTPClient.CloseIdleConnections
			},
		},
		{
			key: "failsafe", name: "failsafe-go",
			desc: "failsafehttp retry policy: 3 attempts, backoff 100ms doubling to 5s, jitter factor 0.5, last failure returned",
			new: func() (*http.Client, func()) {
				base := cleanhttp.DefaultPooledTransport()
				rp := failsafehttp.NewRetryPolicyBuilder().
					WithMaxAttempts(3).
					WithBackoff(100*time.Millisecond, 5*time.Second).
					WithJitterFactor(0.5).
					ReturnLastFailure().
					Build()
				return &http.Client{Transport: failsafehttp.NewRoundTripper(base, rp)}, base.CloseIdleConnections
			},
		},
		{
			key: "httpretry", name: "httpretry defaults", ours: true,
			desc: "&httpretry.Transport{Base: base}: 3 attempts, full jitter from 100ms to 5s, budget NewTokenBucket(20, 0.1)",
			new:  newHTTPRetry(nil),
		},
		{
			key: "httpretry-unlimited", name: "httpretry unlimited", ours: true,
			desc: "httpretry defaults with Budget: httpretry.Unlimited",
			new:  newHTTPRetry(httpretry.Unlimited),
		},
	}
}

// policyByKey returns the policy with the given key; it panics if there is
// none, which is a bug in this command.
func policyByKey(key string) policy {
	for _, p := range policies() {
		if p.key == key {
			return p
		}
	}
	panic("storm: no policy " + key)
}

// newHTTPRetry returns a policy constructor for an httpretry Transport with
// default settings and the given Budget (nil: the default, private to
// each Transport).
func newHTTPRetry(b httpretry.Budget) func() (*http.Client, func()) {
	return func() (*http.Client, func()) {
		base := cleanhttp.DefaultPooledTransport()
		return &http.Client{Transport: &httpretry.Transport{Base: base, Budget: b}}, base.CloseIdleConnections
	}
}

// naive is the retry loop people write first: it repeats a request at
// once after any error, 5xx or 429, up to attempts in all, draining and
// closing the responses it discards so that their connections are reused.
// It serves only the bodiless GETs of this command.
type naive struct {
	base     http.RoundTripper
	attempts int
}

func (n *naive) RoundTrip(req *http.Request) (*http.Response, error) {
	for i := 1; ; i++ {
		resp, err := n.base.RoundTrip(req)
		failed := err != nil || resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
		if !failed || i >= n.attempts || req.Context().Err() != nil {
			return resp, err
		}
		if resp != nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
}

// fleet holds the clients of one policy in one run, one per simulated
// client process; each has its own connection pool and retry budget.
type fleet struct {
	clients []*http.Client
	closers []func()
}

// newFleet builds n clients of policy p.
func newFleet(p policy, n int) *fleet {
	f := &fleet{}
	for range max(n, 1) {
		c, closeIdle := p.new()
		f.clients = append(f.clients, c)
		f.closers = append(f.closers, closeIdle)
	}
	return f
}

// client returns the client of the process that owns operation i:
// operations are dealt to processes in turn, so each carries 1/n of the
// load.
func (f *fleet) client(i int) *http.Client { return f.clients[i%len(f.clients)] }

// closeIdle closes every idle connection of every client.
func (f *fleet) closeIdle() {
	for _, c := range f.closers {
		c()
	}
}
