package throttle

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// releaseDialect429s are 429s as real APIs write them, for a release:
// each header as the API documents it, and the Retry-After it sends or
// not (ra 0: none). epoch is the fake clock's Unix second, for reset
// fields written as a time.
func releaseDialect429s(epoch int64) []struct {
	name string
	h    http.Header
	ra   time.Duration
} {
	at := func(d int64) string { return fmt.Sprint(epoch + d) }
	return []struct {
		name string
		h    http.Header
		ra   time.Duration
	}{
		{"GitHub secondary, Retry-After", http.Header{}, time.Minute},
		{"GitHub secondary, remaining 0 and a reset", http.Header{
			"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {at(60)}}, 0},
		{"GitHub primary", http.Header{
			"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Used": {"5000"},
			"X-Ratelimit-Reset": {at(3600)}, "X-Ratelimit-Resource": {"core"}}, 0},
		{"Discord bucket", http.Header{
			"X-Ratelimit-Limit": {"5"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {at(2) + ".250"},
			"X-Ratelimit-Reset-After": {"1.250"}, "X-Ratelimit-Bucket": {"abcd1234"}, "X-Ratelimit-Scope": {"user"}}, 0},
		{"Discord bucket, Retry-After", http.Header{
			"X-Ratelimit-Limit": {"5"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {at(2) + ".250"},
			"X-Ratelimit-Reset-After": {"1.250"}, "X-Ratelimit-Bucket": {"abcd1234"}, "X-Ratelimit-Scope": {"user"}}, 2 * time.Second},
		{"Discord global", http.Header{"X-Ratelimit-Global": {"true"}, "X-Ratelimit-Scope": {"global"}}, 0},
		{"Discord global, Retry-After", http.Header{"X-Ratelimit-Global": {"true"}, "X-Ratelimit-Scope": {"global"}}, 2 * time.Second},
		{"Shopify call limit", http.Header{"X-Shopify-Shop-Api-Call-Limit": {"40/40"}}, 0},
		{"Shopify call limit, Retry-After", http.Header{"X-Shopify-Shop-Api-Call-Limit": {"40/40"}}, 2 * time.Second},
		{"Stripe", http.Header{"Request-Id": {"req_1"}, "Stripe-Version": {"2024-06-20"}}, 0},
		{"Stripe, Retry-After", http.Header{"Request-Id": {"req_1"}, "Stripe-Version": {"2024-06-20"}}, time.Second},
		{"Cloudflare RateLimit and RateLimit-Policy", http.Header{
			"Ratelimit": {`"default";r=0;t=30`}, "Ratelimit-Policy": {`"burst";q=100;w=60`}}, 0},
		{"Cloudflare RateLimit and RateLimit-Policy, Retry-After", http.Header{
			"Ratelimit": {`"default";r=0;t=30`}, "Ratelimit-Policy": {`"burst";q=100;w=60`}}, 30 * time.Second},
		{"RateLimit draft fields", http.Header{
			"Ratelimit-Limit": {"100"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"30"}}, 0},
		{"RateLimit draft fields, a Retry-After that disagrees", http.Header{
			"Ratelimit-Limit": {"100"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"30"}}, 5 * time.Second},
		{"Retry-After: 0", http.Header{}, 0},
	}
}

// TestReleaseAfterA429OfAnyDialectNeitherHangsNorLetsAllGo: during a
// release, the operation holding the turn is answered 429 in the shape a
// real API writes it (GitHub, Discord, Shopify, Stripe, Cloudflare, the
// RateLimit draft), with or without a Retry-After. Whatever the 429 says,
// eight operations held for the next turn are neither left waiting with
// nothing to wait for (no turn out and no reset ahead) nor let go at
// once, on the 429's route or another: right after the 429 at most one
// goes, and, when none does, the
// reset they are told is ahead and at least one goes when it comes, no
// more than the quota announced admits (one when none is).
func TestReleaseAfterA429OfAnyDialectNeitherHangsNorLetsAllGo(t *testing.T) {
	t.Parallel()
	const holders = 8
	_, _, _, fc0 := pauseJustEnded()
	for _, tc := range releaseDialect429s(fc0.Now().Unix()) {
		for _, route := range []string{"/", "/other"} {
			t.Run(tc.name+" "+route, func(t *testing.T) {
				t.Parallel()
				th, d, req, fc := pauseJustEnded()
				held, _ := http.NewRequest(http.MethodGet, "https://api.example.test"+route, nil)
				if _, _, err := th.Admit(d, req, fc); err != nil {
					t.Fatalf("the operation let go at the pause's end: %v", err)
				}
				th.Record(d, &Result{Status: http.StatusTooManyRequests, Sent: fc.Now(), Header: tc.h, Overload: true, Request: req,
					RetryAfter: tc.ra, HasRetryAfter: tc.ra > 0 || tc.name == "Retry-After: 0"}, fc)
				admitted, reset := admitHeld(th, d, held, fc, holders)
				if admitted > 1 {
					t.Fatalf("%d of %d held operations let go at once right after the 429; want at most 1", admitted, holders)
				}
				if admitted == 1 {
					return
				}
				if !reset.After(fc.Now()) {
					t.Fatalf("every held operation refused until %v, at %v, with no turn out: held for good", reset, fc.Now())
				}
				if wait := reset.Sub(fc.Now()); wait > 2*time.Hour {
					t.Fatalf("held for %v; want the reset the 429 named", wait)
				}
				fc.Advance(reset.Sub(fc.Now()))
				admitted, _ = admitHeld(th, d, held, fc, holders)
				limit := 1
				if rl, ok := ParseRateLimit(tc.h, fc.Now()); ok && rl.Limit > 0 {
					limit = int(rl.Limit)
				}
				if admitted < 1 || admitted > limit {
					t.Errorf("%d of %d held operations let go at the reset; want 1 to %d", admitted, holders, limit)
				}
			})
		}
	}
}

// admitHeld asks Admit for up to n operations held at the clock's time,
// until one is refused, and returns how many were let go and the reset
// the refused one was told.
func admitHeld(th *Throttle, d *Dest, req *http.Request, clock Clock, n int) (int, time.Time) {
	for i := range n {
		if _, reset, err := th.Admit(d, req, clock); err != nil {
			return i, reset
		}
	}
	return n, time.Time{}
}
