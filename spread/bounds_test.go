package spread

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/httpretry/httpretry/spread/spreadtest"
)

// TestHostsForgottenOnceIdle: a Transport that has seen more than
// maxIdleHosts hosts forgets, when it meets a new one, those with nothing
// in flight that were not used for Refresh: the table does not grow with
// every hostname a process ever called.
func TestHostsForgottenOnceIdle(t *testing.T) {
	var d dials
	sp, fc := fakeSpread(spreadtest.NewResolver(four...), &d)
	sp.EjectAfter = -1
	for i := range maxIdleHosts {
		send(t, sp, context.Background(), fmt.Sprintf("http://h%d.example/", i))
	}
	if n := len(sp.hosts); n != maxIdleHosts {
		t.Fatalf("%d hosts, want %d", n, maxIdleHosts)
	}
	send(t, sp, context.Background(), "http://recent.example/")
	if n := len(sp.hosts); n != maxIdleHosts+1 {
		t.Fatalf("hosts used within Refresh were forgotten: %d left", n)
	}
	fc.Advance(DefaultRefresh + time.Second)
	send(t, sp, context.Background(), "http://new.example/")
	if n := len(sp.hosts); n != 1 {
		t.Fatalf("%d hosts after every other was idle for Refresh, want 1", n)
	}
	if n := len(sp.owned); n != 1 {
		t.Fatalf("%d Transports kept, want the new host's 1", n)
	}
}

// blockingResolver answers only once released.
type blockingResolver struct{ release chan struct{} }

func (r blockingResolver) LookupNetIP(ctx context.Context, _, _ string) ([]netip.Addr, error) {
	select {
	case <-r.release:
		return four, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestRequestWaitingForTheFirstLookupEndsWithItsContext: while the first
// lookup of a host hangs, a second request waits for it, and returns as
// soon as its own context ends; the first goes on once the lookup
// answers.
func TestRequestWaitingForTheFirstLookupEndsWithItsContext(t *testing.T) {
	r := blockingResolver{release: make(chan struct{})}
	var d dials
	sp, _ := fakeSpread(r, &d)
	first := make(chan error, 1)
	go func() { first <- send(t, sp, context.Background(), "http://slow-dns.example/") }()
	h := sp.host(mustParse(t, "http://slow-dns.example/"))
	for !h.lookingUp() { // the first request started the lookup
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := send(t, sp, ctx, "http://slow-dns.example/"); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting request: %v, want its context's error", err)
	}
	close(r.release)
	if err := <-first; err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("first request: %v, want the refused dial after the lookup", err)
	}
	if got := d.list(); len(got) != 1 {
		t.Fatalf("dialed %v, want one address", got)
	}
}

// TestConnectionsOfAForgottenAddressAreClosed: the connections an
// address's Transport dialed are recorded until closed, and closeAll
// closes those still open, whether or not net/http counts them idle.
func TestConnectionsOfAForgottenAddressAreClosed(t *testing.T) {
	var s connSet
	a, peerA := net.Pipe()
	b, peerB := net.Pipe()
	defer peerA.Close()
	defer peerB.Close()
	ta, tb := s.track(a), s.track(b)
	ta.Close()
	if n := s.open(); n != 1 {
		t.Fatalf("%d open after one closed, want 1", n)
	}
	s.closeAll()
	if n := s.open(); n != 0 {
		t.Fatalf("%d open after closeAll, want 0", n)
	}
	if _, err := tb.Write([]byte("x")); err == nil {
		t.Fatal("a connection closeAll closed still writes")
	}
}
