package main

import (
	"fmt"
	"net/http"
	"sync/atomic"
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
	// new returns a fresh client.
	new func() hedgeClient
}

// hedgeClient is one run's client of a policy.
type hedgeClient struct {
	c         *http.Client
	closeIdle func() // closes its idle connections
	// delay reports the current hedge delay for the server at serverURL;
	// nil when the policy has no adaptive delay.
	delay func(serverURL string) time.Duration
	// refused counts the hedges httpretry's Outcomes report refused; nil
	// for a peer.
	refused *atomic.Int64
}

// peerClient is the client of a policy that is not httpretry.
func peerClient(rt http.RoundTripper, base *http.Transport) hedgeClient {
	return hedgeClient{c: &http.Client{Transport: rt}, closeIdle: base.CloseIdleConnections}
}

// ourClient is the client of an httpretry policy: it counts the hedges
// refused, and reads the adaptive delay when adaptive is set.
func ourClient(t *httpretry.Transport, base *http.Transport, adaptive bool) hedgeClient {
	hc := hedgeClient{c: &http.Client{Transport: t}, closeIdle: base.CloseIdleConnections, refused: new(atomic.Int64)}
	t.OnDone = func(_ *http.Request, o httpretry.Outcome) { hc.refused.Add(int64(o.HedgesRefused)) }
	if adaptive {
		hc.delay = func(u string) time.Duration { return hedgeDelay(t, u) }
	}
	return hc
}

// hedgePolicies returns the policies of the independent and correlated
// scenarios; fixed is the fixed hedge delay of httpretry and hedgedhttp.
func hedgePolicies(fixed time.Duration) []hedgePolicy {
	return []hedgePolicy{
		{
			key: "single", name: "single attempt",
			desc: "plain pooled transport, no retries, no hedges",
			new: func() hedgeClient {
				base := cleanhttp.DefaultPooledTransport()
				return peerClient(base, base)
			},
		},
		{
			key: "retries", name: "httpretry retries only",
			desc: "&httpretry.Transport{Base: base}: the defaults, no hedging",
			ours: true,
			new: func() hedgeClient {
				base := cleanhttp.DefaultPooledTransport()
				return ourClient(&httpretry.Transport{Base: base}, base, false)
			},
		},
		fixedPolicy(fixed),
		{
			key: "adaptive", name: "httpretry adaptive",
			desc: "&httpretry.Transport{Base: base, Hedging: &httpretry.Hedging{}}: the zero-config adaptive delay",
			ours: true,
			new: func() hedgeClient {
				base := cleanhttp.DefaultPooledTransport()
				return ourClient(&httpretry.Transport{Base: base, Hedging: &httpretry.Hedging{}}, base, true)
			},
		},
		{
			key: "failsafe", name: "failsafe-go hedgepolicy",
			desc: "failsafehttp round tripper with hedgepolicy.NewWithDelayQuantile(0.95, 1000, 100): one hedge after the p95 of recent executions, after 100 of them",
			new: func() hedgeClient {
				base := cleanhttp.DefaultPooledTransport()
				hp := hedgepolicy.NewWithDelayQuantile[*http.Response](0.95, 1000, 100)
				return peerClient(failsafehttp.NewRoundTripper(base, hp), base)
			},
		},
		{
			key: "hedgedhttp", name: "cristalhq/hedgedhttp",
			desc: fmt.Sprintf("hedgedhttp.NewRoundTripper(%v, 2, base): one hedge after a fixed %v", fixed, fixed),
			new: func() hedgeClient {
				base := cleanhttp.DefaultPooledTransport()
				rt, err := hedgedhttp.NewRoundTripper(fixed, 2, base)
				if err != nil {
					panic(err) // only for a nil transport or a negative count: a bug here
				}
				return peerClient(rt, base)
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
		new: func() hedgeClient {
			base := cleanhttp.DefaultPooledTransport()
			return ourClient(&httpretry.Transport{Base: base, Hedging: &httpretry.Hedging{Delay: d}}, base, false)
		},
	}
}
