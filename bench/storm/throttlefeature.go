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

// throttledErr reports whether err is httpretry's throttle refusal.
func throttledErr(err error) bool { return errors.Is(err, httpretry.ErrThrottled) }
