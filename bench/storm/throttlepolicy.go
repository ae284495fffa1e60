package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/httpretry/httpretry"
)

// The policies of the throttle scenarios. Each is built with an attempt
// timeout, 0 for none: the metastable scenario needs one so that an
// attempt stuck in the server's queue ends and may be retried, as real
// clients' attempts do.
const (
	keySingle   = "single"
	keyNaive    = "naive"
	keyBudget   = "httpretry"          // today's defaults: a retry budget, no throttle
	keyThrottle = "httpretry-throttle" // the throttle, per-host budgets and quota pacing
	keyFailsafe = "failsafe-throttler" // the peer
	keyNoMin    = "httpretry-throttle-nomin"
)

// throttlePolicy returns the policy with key, its attempts bounded by
// attemptTimeout when it is positive.
func throttlePolicy(key string, attemptTimeout time.Duration) policy {
	wrap := func(base http.RoundTripper) http.RoundTripper {
		if attemptTimeout <= 0 {
			return base
		}
		return &timeoutRT{base: base, timeout: attemptTimeout}
	}
	pooled := func(rt func(base http.RoundTripper) http.RoundTripper) func() (*http.Client, func()) {
		return func() (*http.Client, func()) {
			base := cleanhttp.DefaultPooledTransport()
			return &http.Client{Transport: rt(base)}, base.CloseIdleConnections
		}
	}
	switch key {
	case keySingle:
		return policy{key: key, name: "single attempt", desc: "plain pooled transport, no retries",
			new: pooled(wrap)}
	case keyNaive:
		return policy{key: key, name: "naive 3 attempts",
			desc: "hand-written loop: up to 3 attempts on any error, 5xx or 429, no wait",
			new:  pooled(func(b http.RoundTripper) http.RoundTripper { return &naive{base: wrap(b), attempts: 3} })}
	case keyBudget:
		return policy{key: key, name: "budget only", ours: true,
			desc: "httpretry defaults as released: 3 attempts, full jitter from 100ms, one NewTokenBucket(20, 0.1) per Transport, no throttle",
			new: pooled(func(b http.RoundTripper) http.RoundTripper {
				return &httpretry.Transport{Base: b, AttemptTimeout: attemptTimeout}
			})}
	case keyThrottle:
		return policy{key: key, name: "httpretry throttle", ours: true,
			desc: throttleDesc,
			new: pooled(func(b http.RoundTripper) http.RoundTripper {
				return withThrottle(&httpretry.Transport{Base: b, AttemptTimeout: attemptTimeout})
			})}
	case keyNoMin:
		return policy{key: key, name: "throttle, MinRate off", ours: true,
			desc: "the throttle policy with Throttle.MinRate -1: no request rate below which it never refuses",
			new: pooled(func(b http.RoundTripper) http.RoundTripper {
				return withThrottleNoMin(&httpretry.Transport{Base: b, AttemptTimeout: attemptTimeout})
			})}
	case keyFailsafe:
		return policy{key: key, name: "failsafe-go throttler",
			desc: "failsafehttp: adaptivethrottler defaults (failure rate threshold 10%, 1 min period, rejection capped at 90%; 429, 5xx and errors are failures) " +
				"outside a retry policy of 3 attempts, backoff 100ms doubling to 5s, jitter factor 0.5",
			new: pooled(func(b http.RoundTripper) http.RoundTripper { return failsafeThrottled(wrap(b)) })}
	}
	panic("storm: no throttle policy " + key)
}

// throttlePolicies returns the policies with the given keys.
func throttlePolicies(attemptTimeout time.Duration, keys ...string) []policy {
	out := make([]policy, len(keys))
	for i, k := range keys {
		out[i] = throttlePolicy(k, attemptTimeout)
	}
	return out
}

// failsafeThrottled returns failsafe-go's adaptive throttler with its
// defaults in front of its retry policy, as its documentation composes
// them: the throttler sees each operation once.
func failsafeThrottled(base http.RoundTripper) http.RoundTripper {
	overloaded := func(resp *http.Response, err error) bool {
		return err != nil || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
	}
	th := adaptivethrottler.NewBuilder[*http.Response]().HandleIf(overloaded).Build()
	rp := failsafehttp.NewRetryPolicyBuilder().
		WithMaxAttempts(3).
		WithBackoff(100*time.Millisecond, 5*time.Second).
		WithJitterFactor(0.5).
		ReturnLastFailure().
		Build()
	return failsafehttp.NewRoundTripper(base, []failsafe.Policy[*http.Response]{th, rp}...)
}

// refusedLocally reports whether err is a throttle's refusal: the
// operation failed without reaching the server.
func refusedLocally(err error) bool {
	return errors.Is(err, adaptivethrottler.ErrExceeded) || throttledErr(err)
}

// timeoutRT bounds each request it sends by timeout, through the end of
// the response body, as an attempt timeout does.
type timeoutRT struct {
	base    http.RoundTripper
	timeout time.Duration
}

func (t *timeoutRT) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody ends its request's context when closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
