package httpretry

import (
	"sync"
	"sync/atomic"
)

// DefaultMaxDestinations is how many destinations a [Throttle] or a
// per-host budget keeps state for when its limit is 0.
const DefaultMaxDestinations = 1024

// destinations is a bounded table of per-destination state, keyed by a
// short string (a host, or a key a caller's function names). Lookups of a
// key already present take no lock and allocate nothing: the last hit is
// kept for the common case of one destination, and the rest are in a
// sync.Map. When the table is full, adding a key evicts another, so the
// memory it holds is bounded whatever keys the requests name; an evicted
// destination starts again from fresh state.
//
// The zero value is an empty table; it must not be copied after first use.
type destinations[T any] struct {
	last atomic.Pointer[destination[T]]
	m    sync.Map // string -> *destination[T]

	mu sync.Mutex // protects n and every store to or delete from m
	n  int        // the number of keys in m
}

// destination is one key's state.
type destination[T any] struct {
	key   string
	state T
}

// get returns key's state, creating it with init when key is new. max
// bounds the number of keys; 0 or less means DefaultMaxDestinations.
func (d *destinations[T]) get(key string, max int, init func(*T)) *T {
	if e := d.last.Load(); e != nil && e.key == key {
		return &e.state
	}
	if v, ok := d.m.Load(key); ok {
		e := v.(*destination[T])
		d.last.Store(e)
		return &e.state
	}
	return d.add(key, max, init)
}

// add stores a new key's state, evicting another key when the table is
// full.
func (d *destinations[T]) add(key string, max int, init func(*T)) *T {
	if max <= 0 {
		max = DefaultMaxDestinations
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if v, ok := d.m.Load(key); ok { // added since the lookup
		return &v.(*destination[T]).state
	}
	for d.n >= max {
		// Any key will do: which one sync.Map's Range yields first is
		// unspecified, and a destination seen again is recreated.
		d.m.Range(func(k, _ any) bool {
			d.m.Delete(k)
			d.n--
			if e := d.last.Load(); e != nil && e.key == k {
				d.last.Store(nil)
			}
			return false
		})
	}
	e := &destination[T]{key: key}
	if init != nil {
		init(&e.state)
	}
	d.m.Store(key, e)
	d.n++
	d.last.Store(e)
	return &e.state
}

// len returns the number of keys held, for tests.
func (d *destinations[T]) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}
