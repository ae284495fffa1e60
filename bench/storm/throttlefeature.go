package main

import (
	"errors"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/throttle"
)

// throttleDesc says how the throttle policy is configured.
const throttleDesc = "httpretry defaults with Throttle: &throttle.Throttle{} (its zero value: K 2, at most 90% refused, " +
	"a 600ms sliding window reaching back up to 3s at low rates, no refusal below 1 request per second, per host, first attempts and retries, " +
	"quota pacing from rate-limit headers) and BudgetPerHost: true"

// withThrottle turns on the throttle, with its defaults, and a retry
// budget per host.
func withThrottle(t *httpretry.Transport) *httpretry.Transport {
	t.Throttle = &throttle.Throttle{}
	t.BudgetPerHost = true
	return t
}

// withThrottleNoMin turns on the throttle with no minimum request rate:
// it refuses however few requests a process sends.
func withThrottleNoMin(t *httpretry.Transport) *httpretry.Transport {
	t.Throttle = &throttle.Throttle{MinRate: -1}
	t.BudgetPerHost = true
	return t
}

// throttledErr reports whether err is httpretry's throttle refusal.
func throttledErr(err error) bool { return errors.Is(err, throttle.ErrThrottled) }
