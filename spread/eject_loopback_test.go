package spread_test

import (
	"fmt"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry/spread"
	"github.com/httpretry/httpretry/spread/spreadtest"
)

// TestFailingAddressEjectedAndRestored: a backend that resets every
// request gets requests until its third failure in a row, then none
// while it is ejected (30 s on the fake clock), then requests again; a
// success restores it. Over HTTP/1.1 and HTTP/2 with TLS.
func TestFailingAddressEjectedAndRestored(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			g := startGroup(t, spreadtest.Options{TLS: tls})
			bad := g.Backends[0]
			bad.Set(spreadtest.Reset)
			fc := clockwork.NewFakeClock()
			sp := newSpread(t, g)
			sp.Clock, sp.EjectAfter = fc, 3
			failures := 0
			for i := 0; bad.Requests.Load() < 3; i++ {
				if i == 1000 {
					t.Fatal("1000 requests and the failing backend got fewer than 3")
				}
				if _, _, err := getOp(t, sp, g, fmt.Sprint(i)); err != nil {
					failures++
				}
			}
			if failures != 3 {
				t.Fatalf("%d requests failed, want the 3 the backend reset", failures)
			}
			for i := range 100 {
				if _, _, err := getOp(t, sp, g, fmt.Sprint(i)); err != nil {
					t.Fatalf("request %d while ejected: %v", i, err)
				}
			}
			if got := bad.Requests.Load(); got != 3 {
				t.Fatalf("the ejected backend got %d requests, want none after its 3", got-3)
			}
			fc.Advance(spread.DefaultEjectFor)
			bad.Set(spreadtest.Answer)
			for i := 0; bad.Requests.Load() == 3; i++ {
				if i == 1000 {
					t.Fatal("1000 requests after the ejection ended and none reached the backend")
				}
				if _, _, err := getOp(t, sp, g, fmt.Sprint(i)); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
