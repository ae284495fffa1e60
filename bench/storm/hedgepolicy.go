package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/cristalhq/hedgedhttp"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/httpretry/httpretry"
)

// hedgePolicy is one way of sending the hedging scenarios' requests.
// Every policy sends its attempts through its own cleanhttp pooled
// transport, so that only the layer above it differs.
type hedgePolicy struct {
	key  string // for flags
	name string // for tables and charts
	desc string // how it is configured
	ours bool
	// new returns a fresh client, a function that closes its idle
	// connections, and one that reports the current hedge delay for
	// the server at url (nil when the policy has no adaptive delay).
	new func() (c *http.Client, closeIdle func(), delay func(serverURL string) time.Duration)
}

// hedgePolicies returns the policies of the independent and correlated
// scenarios; fixed is the fixed hedge delay of httpretry and hedgedhttp.
func hedgePolicies(fixed time.Duration) []hedgePolicy {
	return []hedgePolicy{
		{
			key: "single", name: "single attempt",
			desc: "plain pooled transport, no retries, no hedges",
			new: func() (*http.Client, func(), func(string) time.Duration) {
				base := cleanhttp.DefaultPooledTransport()
				return &http.Client{Transport: base}, base.CloseIdleConnections, nil
			},
		},
		{
			key: "retries", name: "httpretry retries only",
			desc: "&httpretry.Transport{Base: base}: the defaults, no hedging",
			ours: true,
			new: func() (*http.Client, func(), func(string) time.Duration) {
				base := cleanhttp.DefaultPooledTransport()
				return &http.Client{Transport: &httpretry.Transport{Base: base}}, base.CloseIdleConnections, nil
			},
		},
		fixedPolicy(fixed),
		{
			key: "adaptive", name: "httpretry adaptive",
			desc: "&httpretry.Transport{Base: base, Hedging: &httpretry.Hedging{}}: the zero-config adaptive delay",
			ours: true,
			new: func() (*http.Client, func(), func(string) time.Duration) {
				base := cleanhttp.DefaultPooledTransport()
				t := &httpretry.Transport{Base: base, Hedging: &httpretry.Hedging{}}
				return &http.Client{Transport: t}, base.CloseIdleConnections, func(u string) time.Duration { return hedgeDelay(t, u) }
			},
		},
		{
			key: "failsafe", name: "failsafe-go hedgepolicy",
			desc: "failsafehttp round tripper with hedgepolicy.NewWithDelayQuantile(0.95, 1000, 100): one hedge after the p95 of recent executions, after 100 of them",
			new: func() (*http.Client, func(), func(string) time.Duration) {
				base := cleanhttp.DefaultPooledTransport()
				hp := hedgepolicy.NewWithDelayQuantile[*http.Response](0.95, 1000, 100)
				return &http.Client{Transport: failsafehttp.NewRoundTripper(base, hp)}, base.CloseIdleConnections, nil
			},
		},
		{
			key: "hedgedhttp", name: "cristalhq/hedgedhttp",
			desc: fmt.Sprintf("hedgedhttp.NewRoundTripper(%v, 2, base): one hedge after a fixed %v", fixed, fixed),
			new: func() (*http.Client, func(), func(string) time.Duration) {
				base := cleanhttp.DefaultPooledTransport()
				rt, err := hedgedhttp.NewRoundTripper(fixed, 2, base)
				if err != nil {
					panic(err) // only for a nil transport or a negative count: a bug here
				}
				return &http.Client{Transport: rt}, base.CloseIdleConnections, nil
			},
		},
	}
}

// fixedPolicy is httpretry hedging after a fixed delay.
func fixedPolicy(d time.Duration) hedgePolicy {
	return hedgePolicy{
		key: "fixed", name: "httpretry fixed " + fmtDelay(d),
		desc: fmt.Sprintf("&httpretry.Transport{Base: base, Hedging: &httpretry.Hedging{Delay: %v}}", d),
		ours: true,
		new: func() (*http.Client, func(), func(string) time.Duration) {
			base := cleanhttp.DefaultPooledTransport()
			t := &httpretry.Transport{Base: base, Hedging: &httpretry.Hedging{Delay: d}}
			return &http.Client{Transport: t}, base.CloseIdleConnections, nil
		},
	}
}
