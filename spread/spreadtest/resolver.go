package spreadtest

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
)

// Resolver answers every lookup with the addresses it was last given, for
// any host, and counts lookups. Set changes the answer, as a DNS change
// would. It is safe for simultaneous use.
type Resolver struct {
	mu    sync.Mutex // protects addrs and err
	addrs []netip.Addr
	err   error

	// Lookups counts the lookups answered, failed ones included.
	Lookups atomic.Int64
}

// NewResolver returns a Resolver that answers addrs.
func NewResolver(addrs ...netip.Addr) *Resolver {
	return &Resolver{addrs: slices.Clone(addrs)}
}

// Set makes the next lookups answer addrs.
func (r *Resolver) Set(addrs ...netip.Addr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addrs, r.err = slices.Clone(addrs), nil
}

// Fail makes the next lookups fail with err.
func (r *Resolver) Fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// LookupNetIP answers the addresses last set, or the error last set.
func (r *Resolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.Lookups.Add(1)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	return slices.Clone(r.addrs), nil
}
