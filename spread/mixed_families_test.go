package spread_test

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/spread/spreadtest"
)

// TestIPv6AndIPv4AddressesOfOneHostAreSpreadAndRetried: a hostname
// answers ::1 beside 127.0.0.2 and 127.0.0.3, and 127.0.0.3 a second time
// as an IPv4-mapped IPv6 address. Over HTTP/1.1 and over HTTP/2 with TLS (a
// certificate for the hostname only), every operation succeeds while ::1
// resets every request, each operation that reached ::1 retried on an
// IPv4 address; the mapped duplicate is one address, so no operation
// reaches 127.0.0.3 twice; and both families get first attempts.
func TestIPv6AndIPv4AddressesOfOneHostAreSpreadAndRetried(t *testing.T) {
	addrs := []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("::1")}
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			var log opLog
			g, err := spreadtest.Start(addrs, spreadtest.Options{TLS: tls, OnRequest: log.record})
			if err != nil {
				if os.Getenv("CI") == "true" {
					t.Fatal(err)
				}
				t.Skipf("cannot listen on %v here: %v", addrs, err)
			}
			t.Cleanup(g.Close)
			g.Resolver.Set(append(addrs, netip.MustParseAddr("::ffff:127.0.0.3"))...)
			g.Backends[2].Set(spreadtest.Reset)
			sp := newSpread(t, g)
			sp.EjectAfter = -1
			rt := &httpretry.Transport{Base: sp, MaxAttempts: 2, Budget: httpretry.NewTokenBucket(1000, 1), Jitter: noWait}
			firsts := make([]int, len(addrs))
			for i := range 60 {
				op := fmt.Sprint(i)
				resp, body, err := getOp(t, rt, g, op)
				seen := log.backends(op)
				if err != nil {
					t.Fatalf("op %d: %v (backends %v)", i, err, seen)
				}
				if resp.StatusCode != 200 || body == "::1" {
					t.Fatalf("op %d: %d %q, want 200 from an IPv4 backend", i, resp.StatusCode, body)
				}
				if count(seen, 1) > 1 || count(seen, 2) > 1 {
					t.Fatalf("op %d: backends %v: one address tried twice", i, seen)
				}
				firsts[seen[0]]++
			}
			if slices.Contains(firsts, 0) {
				t.Fatalf("first attempts per backend %v: an address got none", firsts)
			}
		})
	}
}
