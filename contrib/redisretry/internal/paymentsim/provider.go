// Package paymentsim is the payment-authorization proof shared by the
// redisretry tests and the examples/payments program: a fake card
// provider that counts charges per order, a payment service whose charge
// endpoint sits behind idempotency.Handler with a Redis store, a fault
// injector in front of two instances of it, and an order client that
// places orders through httpretry and then reconciles the ones that
// failed. Everything listens on 127.0.0.1.
package paymentsim

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Provider is a fake card provider: it counts the charges of each order.
// The zero value is ready to use and answers at once; a Provider is safe
// for concurrent use.
type Provider struct {
	// Latency, if set, is how long the provider takes to charge an order.
	// It must not change after the first Charge.
	Latency func(order string) time.Duration

	total atomic.Int64

	mu     sync.Mutex // protects orders
	orders map[string]int
}

// Charge charges order once, after its Latency, and returns the charge's
// number, 1 for the provider's first charge. If ctx ends first, nothing is
// charged and Charge returns 0.
func (p *Provider) Charge(ctx context.Context, order string) int64 {
	if p.Latency != nil {
		if d := p.Latency(order); d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return 0
			}
		}
	}
	p.mu.Lock()
	if p.orders == nil {
		p.orders = make(map[string]int)
	}
	p.orders[order]++
	p.mu.Unlock()
	return p.total.Add(1)
}

// Charges returns how many times order was charged.
func (p *Provider) Charges(order string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.orders[order]
}

// Total returns the number of charges of every order.
func (p *Provider) Total() int64 { return p.total.Load() }

// Doubles returns the number of orders charged more than once.
func (p *Provider) Doubles() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.orders {
		if c > 1 {
			n++
		}
	}
	return n
}
