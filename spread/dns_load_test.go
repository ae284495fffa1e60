package spread_test

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/spread/spreadtest"
)

// TestDNSChangesUnderLoad: eight callers send requests through httpretry
// over spread while the answer changes three times (four addresses, then
// two, then the other two, then all four). Every request succeeds, and
// once CloseIdleConnections is called no connection stays open: neither
// to an address that left, nor to one that came back.
func TestDNSChangesUnderLoad(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			g := startGroup(t, spreadtest.Options{TLS: tls})
			fc := clockwork.NewFakeClock()
			sp := newSpread(t, g)
			sp.Clock = fc
			rt := &httpretry.Transport{Base: sp, MaxAttempts: 2}
			addrs := g.Addrs()
			answers := [][]int{{0, 1}, {2, 3}, {0, 1, 2, 3}}
			var wg sync.WaitGroup
			errs := make(chan error, 8*40)
			stop := make(chan struct{})
			for c := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if _, _, err := getOp(t, rt, g, fmt.Sprint(c, "-", i)); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			for _, answer := range answers {
				time.Sleep(20 * time.Millisecond)
				var next []netip.Addr
				for _, i := range answer {
					next = append(next, addrs[i])
				}
				g.Resolver.Set(next...)
				fc.Advance(time.Minute)
			}
			time.Sleep(20 * time.Millisecond)
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			closeIdleUntilClosed(t, sp, g)
		})
	}
}
