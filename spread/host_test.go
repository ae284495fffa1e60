package spread

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry/internal/tried"
	"github.com/httpretry/httpretry/spread/spreadtest"
)

var four = []netip.Addr{
	netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"),
	netip.MustParseAddr("10.0.0.3"), netip.MustParseAddr("10.0.0.4"),
}

// dials records the addresses dialed and refuses every connection, so
// that the Transport's choices can be seen without a server.
type dials struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dials) dial(_ context.Context, _, address string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addrs = append(d.addrs, address)
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
}

func (d *dials) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.addrs)
}

// fakeSpread returns a Transport over r and d with a fake clock.
func fakeSpread(r Resolver, d *dials) (*Transport, *clockwork.FakeClock) {
	fc := clockwork.NewFakeClockAt(t0)
	return &Transport{
		Resolver: r,
		Clock:    fc,
		New:      func() *http.Transport { return &http.Transport{DialContext: d.dial} },
	}, fc
}

func send(t *testing.T, rt http.RoundTripper, ctx context.Context, rawURL string) error {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// TestAttemptsOfAnOperationGoToAddressesNotYetTried: the attempts that
// share an operation's tried set go to the four addresses in turn, each
// once, dialing the address on the URL's port; a fifth goes to any of
// them. Ejection is off: every attempt fails.
func TestAttemptsOfAnOperationGoToAddressesNotYetTried(t *testing.T) {
	var d dials
	sp, _ := fakeSpread(spreadtest.NewResolver(four...), &d)
	sp.EjectAfter = -1
	ctx := tried.With(context.Background())
	for range 4 {
		if err := send(t, sp, ctx, "http://api.example:8080/"); err == nil {
			t.Fatal("a refused dial succeeded")
		}
	}
	got := d.list()
	slices.Sort(got)
	want := []string{"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080", "10.0.0.4:8080"}
	if !slices.Equal(got, want) {
		t.Fatalf("dialed %v, want each of %v once", got, want)
	}
	send(t, sp, ctx, "http://api.example:8080/")
	if last := d.list()[4]; !slices.Contains(want, last) {
		t.Fatalf("fifth attempt dialed %s, want one of the four", last)
	}
	if n := tried.From(ctx).Len(); n != 4 {
		t.Fatalf("tried set has %d addresses, want 4", n)
	}
}

// TestHostLookedUpAgainAfterRefreshOrSoonerAfterAConnectionError: an
// answer is used for Refresh; a connection error asks for a lookup at
// most a second after the last; a failed lookup keeps the addresses.
func TestHostLookedUpAgainAfterRefreshOrSoonerAfterAConnectionError(t *testing.T) {
	r := spreadtest.NewResolver(four...)
	var d dials
	sp, fc := fakeSpread(r, &d)
	sp.Refresh = 10 * time.Second
	h := sp.host(&url.URL{Scheme: "https", Host: "API.example"})
	ctx := context.Background()
	step := func(advance time.Duration, wantLookups int64) {
		t.Helper()
		fc.Advance(advance)
		if err := h.resolve(ctx); err != nil {
			t.Fatal(err)
		}
		h.waitLookup()
		if got := r.Lookups.Load(); got != wantLookups {
			t.Fatalf("after +%v: %d lookups, want %d", advance, got, wantLookups)
		}
	}
	step(0, 1)
	step(10*time.Second-1, 1)
	step(1, 2)
	h.recordFailure(h.addrs[0], true) // a connection error
	step(999*time.Millisecond, 2)
	step(time.Millisecond, 3)
	r.Set(four[:2]...)
	step(time.Second, 3) // not stale, not due
	r.Fail(errors.New("SERVFAIL"))
	step(9*time.Second, 4)
	if got := h.hostports(); len(got) != 4 || got[0] != "10.0.0.1:443" {
		t.Fatalf("after a failed lookup: %v, want the four known", got)
	}
	step(999*time.Millisecond, 4) // a failed lookup is not repeated at once
	r.Set(four[:2]...)
	step(time.Millisecond, 5)
	if got := h.hostports(); !slices.Equal(got, []string{"10.0.0.1:443", "10.0.0.2:443"}) {
		t.Fatalf("after the answer changed: %v", got)
	}
}

// TestNoAddressIsAnError: an empty first answer is ErrNoAddresses; an IP
// address as the host is never looked up.
func TestNoAddressIsAnError(t *testing.T) {
	r := spreadtest.NewResolver()
	var d dials
	sp, _ := fakeSpread(r, &d)
	if err := send(t, sp, context.Background(), "http://api.example/"); !errors.Is(err, ErrNoAddresses) {
		t.Fatalf("err = %v, want ErrNoAddresses", err)
	}
	send(t, sp, context.Background(), "http://[2001:db8::1]:81/")
	if got := d.list(); !slices.Equal(got, []string{"[2001:db8::1]:81"}) || r.Lookups.Load() != 1 {
		t.Fatalf("an IP host: dialed %v after %d lookups, want [2001:db8::1]:81 and no lookup", got, r.Lookups.Load()-1)
	}
}

// TestAddressTransportFromNew holds what the Transport makes of New's:
// its own dial for the host, any other dial (a proxy's) passed through,
// HTTP/2 kept for a Transport that would speak it by default, and the
// Transports it cannot use refused with their error.
func TestAddressTransportFromNew(t *testing.T) {
	var d dials
	sp, _ := fakeSpread(spreadtest.NewResolver(four...), &d)
	rt, err := sp.addrTransport("api.example:443", "10.0.0.1:443", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt.DialContext(context.Background(), "tcp", "API.example:443")
	rt.DialContext(context.Background(), "tcp", "proxy.example:3128")
	if got := d.list(); !slices.Equal(got, []string{"10.0.0.1:443", "proxy.example:3128"}) {
		t.Fatalf("dialed %v", got)
	}
	if rt.ForceAttemptHTTP2 {
		t.Error("a Transport with a dialer of its own was made to speak HTTP/2")
	}
	sp.New = func() *http.Transport { return &http.Transport{} }
	if rt, _ := sp.addrTransport("a:443", "10.0.0.1:443", true, nil); !rt.ForceAttemptHTTP2 {
		t.Error("a default Transport lost HTTP/2")
	}
	shared := &http.Transport{}
	for _, tt := range []struct {
		name string
		new  func() *http.Transport
		want error
	}{
		{"DialTLSContext", func() *http.Transport {
			return &http.Transport{DialTLSContext: func(context.Context, string, string) (net.Conn, error) { return nil, nil }}
		}, ErrDialTLS},
		{"shared", func() *http.Transport { return shared }, ErrSharedTransport},
	} {
		sp := &Transport{Resolver: spreadtest.NewResolver(four...), New: tt.new}
		sp.addrTransport("x:1", "10.0.0.9:1", true, nil) // a first use of shared
		ctx := tried.With(context.Background())
		var err error
		for range 4 {
			if err = send(t, sp, ctx, "http://api.example/"); !errors.Is(err, tt.want) {
				break
			}
		}
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := (&Transport{New: func() *http.Transport { return nil }}).addrTransport("x:1", "10.0.0.1:1", true, nil); err == nil {
		t.Error("a nil Transport from New was used")
	}
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
