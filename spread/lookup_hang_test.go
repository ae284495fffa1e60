package spread

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// deafResolver answers its first lookup at once, and each later one only
// once released, whatever the lookup's context says: a resolver stuck on
// a DNS server that does not answer, and that ignores cancellation.
type deafResolver struct {
	calls   atomic.Int64
	entered chan struct{} // receives once per lookup that blocks
	release chan struct{}
	first   bool // the first lookup blocks too
}

func newDeafResolver(first bool) *deafResolver {
	return &deafResolver{entered: make(chan struct{}, 16), release: make(chan struct{}), first: first}
}

func (r *deafResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	if r.calls.Add(1) == 1 && !r.first {
		return four, nil
	}
	r.entered <- struct{}{}
	<-r.release
	return four, nil
}

// hangGuard bounds how long a test waits for a call that must not wait
// for a hung lookup at all: it fails only if the call did wait for it.
const hangGuard = 30 * time.Second

// TestRefreshThatHangsLeavesRequestsOnTheKnownAddresses: once a host's
// addresses are known, a lookup due for a refresh that never answers
// holds no request: the request that finds it due, and every other, goes
// on at once with the addresses known.
func TestRefreshThatHangsLeavesRequestsOnTheKnownAddresses(t *testing.T) {
	r := newDeafResolver(false)
	defer close(r.release)
	var d dials
	sp, fc := fakeSpread(r, &d)
	sp.Refresh = 10 * time.Second
	if err := send(t, sp, context.Background(), "http://hung-dns.example/"); err == nil {
		t.Fatal("first request: nil error, want the refused dial")
	}
	fc.Advance(10 * time.Second)
	for i := range 3 {
		done := make(chan error, 1)
		go func() { done <- send(t, sp, context.Background(), "http://hung-dns.example/") }()
		select {
		case err := <-done:
			if err == nil || errors.Is(err, context.Canceled) {
				t.Fatalf("request %d: %v, want the refused dial", i, err)
			}
		case <-time.After(hangGuard):
			t.Fatalf("request %d waited for the hung refresh", i)
		}
	}
	if got := len(d.list()); got != 4 {
		t.Fatalf("%d dials, want 4: every request reached an address", got)
	}
	// The refresh runs on its own goroutine, which may reach the resolver
	// after the requests have returned: wait until it has, then count.
	select {
	case <-r.entered:
	case <-time.After(hangGuard):
		t.Fatal("no refresh reached the resolver")
	}
	if got := r.calls.Load(); got != 2 {
		t.Fatalf("%d lookups, want 2: the first, and one refresh in flight", got)
	}
}

// TestFirstLookupThatHangsEndsEveryRequestWithItsContext: while a host's
// first lookup never answers, every request waiting for it, the one that
// started it included, returns its own context's error as soon as its
// context ends; the lookup, once it answers, serves the next request.
func TestFirstLookupThatHangsEndsEveryRequestWithItsContext(t *testing.T) {
	r := newDeafResolver(true)
	var d dials
	sp, _ := fakeSpread(r, &d)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- send(t, sp, ctx, "http://hung-dns.example/") }()
	<-r.entered
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("request that started the lookup: %v, want context.Canceled", err)
		}
	case <-time.After(hangGuard):
		close(r.release)
		t.Fatal("the request that started the lookup waited for it past its context")
	}
	close(r.release)
	if err := send(t, sp, context.Background(), "http://hung-dns.example/"); err == nil || errors.Is(err, ErrNoAddresses) {
		t.Fatalf("next request: %v, want the refused dial to a looked-up address", err)
	}
	if got := r.calls.Load(); got > 2 {
		t.Fatalf("%d lookups, want at most 2", got)
	}
}

// lookingUp reports whether a lookup of h is in flight.
func (h *host) lookingUp() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lookup != nil
}

// waitLookup waits for the lookup of h in flight, if any, to end.
func (h *host) waitLookup() {
	h.mu.Lock()
	c := h.lookup
	h.mu.Unlock()
	if c != nil {
		<-c.done
	}
}
