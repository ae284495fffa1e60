package main

import (
	"errors"

	"github.com/httpretry/httpretry"
)

// throttleDesc says how the throttle policy is configured.
const throttleDesc = "httpretry defaults with Throttle: &httpretry.Throttle{} (K 2, at most 90% refused, a 1 s window, " +
	"no refusal below 5 requests per second, per host, quota pacing from rate-limit headers)"

// withThrottle turns on the throttle, with its defaults.
func withThrottle(t *httpretry.Transport) *httpretry.Transport {
	t.Throttle = &httpretry.Throttle{}
	return t
}

// withThrottleNoMin turns on the throttle with no minimum request rate:
// it refuses however few requests a process sends.
func withThrottleNoMin(t *httpretry.Transport) *httpretry.Transport {
	t.Throttle = &httpretry.Throttle{MinRate: -1}
	return t
}

// throttledErr reports whether err is httpretry's throttle refusal.
func throttledErr(err error) bool { return errors.Is(err, httpretry.ErrThrottled) }
