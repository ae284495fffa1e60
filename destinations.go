package httpretry

import (
	"net/http"
	"strings"
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
// destination starts again from fresh state. The key evicted is one not
// used since the previous eviction (a second chance, as the CLOCK
// approximation of least recently used gives): a lookup marks its key
// used, and an eviction clears the marks it passes. A destination in
// constant use is never the one given up while others come and go.
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
	used  atomic.Bool              // looked up since the last eviction passed it
	spelt atomic.Pointer[spelling] // a request's spelling of the host the key canonicalises, once seen
	state T
}

// spelling is a scheme and host as a request wrote them.
type spelling struct{ scheme, host string }

// touch marks e used, writing only when the mark is not already set, so
// that a lookup of a hot key does not keep writing its cache line.
func (e *destination[T]) touch() *T {
	if !e.used.Load() {
		e.used.Store(true)
	}
	return &e.state
}

// get returns key's state, creating it with init when key is new. max
// bounds the number of keys; 0 or less means DefaultMaxDestinations.
func (d *destinations[T]) get(key string, max int, init func(*T)) *T {
	if e := d.last.Load(); e != nil && e.key == key {
		return e.touch()
	}
	if v, ok := d.m.Load(key); ok {
		e := v.(*destination[T])
		d.last.Store(e)
		return e.touch()
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
		d.evict()
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

// evict removes one key not used since the last eviction passed it,
// clearing the marks of those it passes; when every key is marked, a
// second pass finds one the first cleared. d.mu must be held.
func (d *destinations[T]) evict() {
	for range 2 {
		evicted := false
		d.m.Range(func(k, v any) bool {
			e := v.(*destination[T])
			if e.used.Swap(false) {
				return true
			}
			d.m.Delete(k)
			d.n--
			d.last.CompareAndSwap(e, nil)
			evicted = true
			return false
		})
		if evicted {
			return
		}
	}
	// Every key was used again while the passes ran: give up any one.
	d.m.Range(func(k, v any) bool {
		d.m.Delete(k)
		d.n--
		d.last.CompareAndSwap(v.(*destination[T]), nil)
		return false
	})
}

// getHost returns the state of req's host, keyed as hostKey names it.
// When req spells its host as the last destination looked up was first
// spelled, that destination is returned without canonicalising the host
// again: the common case of one host, called the same way every time.
func (d *destinations[T]) getHost(req *http.Request, max int, init func(*T)) *T {
	scheme, host := requestHost(req)
	if e := d.last.Load(); e != nil {
		if sp := e.spelt.Load(); sp != nil && sp.host == host && sp.scheme == scheme {
			return e.touch()
		}
	}
	st := d.get(canonicalHost(scheme, host), max, init)
	if e := d.last.Load(); e != nil && &e.state == st && e.spelt.Load() == nil {
		// Cloned: the request's host may be part of a longer URL string.
		e.spelt.CompareAndSwap(nil, &spelling{scheme: strings.Clone(scheme), host: strings.Clone(host)})
	}
	return st
}

// len returns the number of keys held, for tests.
func (d *destinations[T]) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// hostKey names req's host as a destination: the URL's host (the Host
// field when the URL has none), canonical as canonicalHost makes it.
func hostKey(req *http.Request) string {
	return canonicalHost(requestHost(req))
}

// requestHost returns req's scheme and host as it spells them: the URL's
// host, or the Host field when the URL has none.
func requestHost(req *http.Request) (scheme, host string) {
	host = req.Host
	if u := req.URL; u != nil {
		scheme = u.Scheme
		if u.Host != "" {
			host = u.Host
		}
	}
	return scheme, host
}

// canonicalHost returns the one spelling of a host, with an optional
// port, that every spelling of it shares: lower-case, since DNS names
// compare without case (RFC 4343) and so do IPv6 hex digits; without the
// scheme's default port (:80 for http, :443 for https, RFC 9110 §4.2) or
// an empty one. It allocates only when host holds an upper-case letter.
func canonicalHost(scheme, host string) string {
	host = strings.ToLower(host)
	switch {
	case strings.HasSuffix(host, ":"):
		host = host[:len(host)-1]
	case strings.EqualFold(scheme, "http") && strings.HasSuffix(host, ":80"):
		host = host[:len(host)-len(":80")]
	case strings.EqualFold(scheme, "https") && strings.HasSuffix(host, ":443"):
		host = host[:len(host)-len(":443")]
	}
	return host
}
