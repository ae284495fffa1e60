// Package desttable holds the bounded table of per-destination state that
// httpretry's throttle, its per-host budgets and its latency estimator
// share: one eviction rule (CLOCK) and one spelling of a host
// ([CanonicalHost]) for all of them.
package desttable

import (
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
)

// DefaultMax is how many keys a table holds when the bound its caller
// passes is 0 or less.
const DefaultMax = 1024

// Table is a bounded table of per-destination state, keyed by a short
// string (a host in its canonical spelling, or a key a caller's function
// names). Lookups of a key already present take no lock and allocate
// nothing. When the table is full, adding a key evicts another, so the
// memory it holds is bounded whatever keys the requests name; an evicted
// destination starts again from fresh state.
//
// The key evicted is chosen by CLOCK, an approximation of least recently
// used: the keys sit on a ring in the order they were added, a lookup
// marks its key used, and a hand that keeps its place from one eviction
// to the next sweeps the ring, clearing the marks it passes, and evicts
// the first key it finds unmarked; the new key takes that key's place,
// just behind the hand. A key is evicted only when it has not been looked
// up since it was added or since the hand last passed it, a full turn of
// the ring before: a destination in steady use is not given up while
// others come and go. The choice depends on the order of lookups alone.
// Every mark a sweep clears was set by a lookup, so an insertion costs
// amortised O(1); while lookups keep marking keys as it sweeps, a sweep
// stops after two turns and evicts the key under the hand.
//
// Its owner may pin keys (see [Table.PinBy]): the hand passes a pinned
// key without evicting it, so a destination whose state still refuses
// requests (a spent quota) is not forgotten while others come and go.
// When the hand finds no key to evict in two turns, it evicts the first
// key it met that is not pinned, or, with every key pinned, the one
// pinned longest ago: the table stays within its bound, and an insertion
// costs at most two turns of the ring.
//
// Hosts are looked up by the spelling a request writes (scheme and host),
// which is canonicalised only when first seen (see [CanonicalHost]): a
// second table, of twice the bound, remembers which destination each
// spelling names, evicting as the first does.
//
// The zero value is an empty table; it must not be copied after first
// use. A Table is safe for simultaneous use by multiple goroutines.
type Table[T any] struct {
	keys      table[string, T]
	spellings table[spelling, atomic.Pointer[entry[string, T]]]
}

// PinBy names how the table tells a pinned key: pinned returns, for a
// key's value, when it was pinned (a number that grows with time), or 0
// when it is not. The first call sets it; later ones change nothing, so
// that an owner may call it before each lookup. pinned is called with
// the table's lock held, on values others may be using: it must only
// read atomics.
func (d *Table[T]) PinBy(pinned *func(*T) int64) {
	if !d.keys.pinSet.Load() {
		d.setPinned(pinned)
	}
}

// setPinned is PinBy's first call, apart so that the others inline.
func (d *Table[T]) setPinned(pinned *func(*T) int64) {
	d.keys.pinned.CompareAndSwap(nil, pinned)
	d.keys.pinSet.Store(true)
}

// spelling is a scheme and host as a request writes them.
type spelling struct{ scheme, host string }

// Get returns key's state, creating it (with init, when set) when key
// is new. max bounds the number of keys; 0 or less means [DefaultMax].
func (d *Table[T]) Get(key string, max int, init func(*T)) *T {
	return &d.entry(key, max, init).val
}

func (d *Table[T]) entry(key string, max int, init func(*T)) *entry[string, T] {
	key = BoundKey(key)
	if e := d.keys.lookup(key); e != nil {
		return e
	}
	// Cloned: the key may be part of a longer string, a request's URL.
	return d.keys.add(strings.Clone(key), maxKeys(max), init)
}

// GetHost returns the state of req's host, keyed as HostKey names it. A
// spelling seen before finds its destination without canonicalising the
// host again.
func (d *Table[T]) GetHost(req *http.Request, max int, init func(*T)) *T {
	if v := d.LastHost(req); v != nil {
		return v
	}
	scheme, host := requestHost(req)
	if len(scheme)+len(host) > MaxKeyLen {
		// No host name is this long: its spelling is not remembered.
		return d.Get(CanonicalHost(scheme, host), max, init)
	}
	sp := spelling{scheme: scheme, host: host}
	if s := d.spellings.lookup(sp); s != nil {
		if e := s.val.Load(); e != nil && !e.gone.Load() {
			return &e.touch().val
		}
	}
	return d.addSpelling(sp, max, init)
}

// LastHost returns the state of req's host, marked used as GetHost marks
// it, when req spells its host (scheme and host) as the spelling GetHost
// found last does and that spelling's destination is still held; nil
// otherwise. It is GetHost's common case, which an owner may try before
// it sets the table up for a lookup (PinBy). The spellings are compared
// as strings: the generic lookup compares keys through their type.
func (d *Table[T]) LastHost(req *http.Request) *T {
	scheme, host := requestHost(req)
	s := d.spellings.last.Load()
	if s == nil || s.key.host != host || s.key.scheme != scheme || s.gone.Load() {
		return nil
	}
	if e := s.touch().val.Load(); e != nil && !e.gone.Load() {
		return &e.touch().val
	}
	return nil
}

// addSpelling canonicalises a spelling not seen before, or whose
// destination was evicted since, and remembers which destination it
// names.
func (d *Table[T]) addSpelling(sp spelling, max int, init func(*T)) *T {
	max = maxKeys(max)
	e := d.entry(CanonicalHost(sp.scheme, sp.host), max, init)
	sp = spelling{scheme: strings.Clone(sp.scheme), host: strings.Clone(sp.host)}
	d.spellings.add(sp, max2(max), nil).val.Store(e)
	return &e.val
}

// Find returns key's state, or nil when key is not held. It neither adds
// the key nor marks it used: a reader such as a metrics gauge does not
// keep a destination from being evicted.
func (d *Table[T]) Find(key string) *T {
	if v, ok := d.keys.m.Load(BoundKey(key)); ok {
		return &v.(*entry[string, T]).val
	}
	return nil
}

// Keys returns the keys held, in no order: what a table names its
// destinations by, for tests and diagnostics.
func (d *Table[T]) Keys() []string {
	d.keys.mu.Lock()
	defer d.keys.mu.Unlock()
	keys := make([]string, 0, len(d.keys.ring))
	for _, e := range d.keys.ring {
		keys = append(keys, e.key)
	}
	return keys
}

// Len returns the number of keys held.
func (d *Table[T]) Len() int { return d.keys.len() }

// maxKeys returns the bound max names: DefaultMax when it is 0 or less.
func maxKeys(max int) int {
	if max <= 0 {
		return DefaultMax
	}
	return max
}

// max2 returns twice max, the bound on the spellings remembered, without
// overflowing.
func max2(max int) int {
	if max > int(^uint(0)>>2) {
		return max
	}
	return 2 * max
}

// table is a bounded map from K to V, evicting by CLOCK as Table
// describes. The zero value is an empty table.
type table[K comparable, V any] struct {
	last   atomic.Pointer[entry[K, V]]    // the entry looked up last
	m      sync.Map                       // K -> *entry[K, V]
	pinned atomic.Pointer[func(*V) int64] // when an entry was pinned, 0 if not; nil: none is
	pinSet atomic.Bool                    // pinned was set

	mu   sync.Mutex     // protects ring and hand, and every store to or delete from m
	ring []*entry[K, V] // the entries held, in the order the hand meets them
	hand int            // the index in ring the next sweep starts at
}

// entry is one key's value in a table.
type entry[K comparable, V any] struct {
	key  K
	used atomic.Bool // looked up since the hand last passed it
	gone atomic.Bool // evicted
	val  V
}

// touch marks e used, writing only when the mark is not already set, so
// that a lookup of a hot key does not keep writing its cache line.
func (e *entry[K, V]) touch() *entry[K, V] {
	if !e.used.Load() {
		e.used.Store(true)
	}
	return e
}

// lookup returns key's entry, marked used, or nil when key is not held.
// It takes no lock and allocates nothing.
func (t *table[K, V]) lookup(key K) *entry[K, V] {
	if e := t.last.Load(); e != nil && e.key == key && !e.gone.Load() {
		return e.touch()
	}
	if v, ok := t.m.Load(key); ok {
		e := v.(*entry[K, V])
		t.last.Store(e)
		return e.touch()
	}
	return nil
}

// add returns key's entry, creating it (with init, when set) when key
// is not held, after evicting as many entries as it takes to hold at
// most max (at least 1).
func (t *table[K, V]) add(key K, max int, init func(*V)) *entry[K, V] {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.m.Load(key); ok { // added since the lookup
		return v.(*entry[K, V])
	}
	e := &entry[K, V]{key: key}
	if init != nil {
		init(&e.val)
	}
	for len(t.ring) > max { // the bound was lowered
		t.remove(t.victim())
	}
	if len(t.ring) < max {
		t.ring = append(t.ring, e)
	} else {
		i := t.victim()
		t.drop(t.ring[i])
		t.ring[i] = e
		t.hand = (i + 1) % len(t.ring)
	}
	t.m.Store(key, e)
	t.last.Store(e)
	return e
}

// victim returns the index of the entry to evict: the first from the hand
// on neither pinned nor used since the hand last passed it, the hand
// clearing the marks of those it passes and stopping on it. While
// lookups keep marking entries as it sweeps, it stops after two turns of
// the ring and takes the first entry not pinned it met, or, when every
// one is pinned, the one pinned longest ago.
func (t *table[K, V]) victim() int {
	var pinned func(*V) int64
	if p := t.pinned.Load(); p != nil {
		pinned = *p
	}
	unpinned, oldest, oldestSince := -1, -1, int64(0)
	for range 2 * len(t.ring) {
		e := t.ring[t.hand]
		switch since := pinnedSince(pinned, e); {
		case since != 0:
			if oldest < 0 || since < oldestSince {
				oldest, oldestSince = t.hand, since
			}
		case !e.used.Load():
			return t.hand
		case unpinned < 0:
			unpinned = t.hand
		}
		e.used.Store(false)
		t.hand = (t.hand + 1) % len(t.ring)
	}
	if unpinned >= 0 {
		t.hand = unpinned
	} else {
		t.hand = oldest
	}
	return t.hand
}

// pinnedSince returns when e was pinned, as pinned says (nil: never).
func pinnedSince[K comparable, V any](pinned func(*V) int64, e *entry[K, V]) int64 {
	if pinned == nil {
		return 0
	}
	return pinned(&e.val)
}

// remove evicts the entry at index i, moving the last entry into its
// place.
func (t *table[K, V]) remove(i int) {
	t.drop(t.ring[i])
	n := len(t.ring) - 1
	t.ring[i] = t.ring[n]
	t.ring[n] = nil
	t.ring = t.ring[:n]
	if t.hand >= n {
		t.hand = 0
	}
}

// drop deletes e from the map and marks it evicted.
func (t *table[K, V]) drop(e *entry[K, V]) {
	t.m.Delete(e.key)
	e.gone.Store(true)
}

// len returns the number of entries held.
func (t *table[K, V]) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ring)
}

// HostKey names req's host as a destination: the URL's host (the Host
// field when the URL has none), canonical as CanonicalHost makes it, and
// bounded as BoundKey bounds it.
func HostKey(req *http.Request) string {
	return BoundKey(CanonicalHost(requestHost(req)))
}

// MaxKeyLen bounds the bytes of a destination's name that are kept, so
// that the memory a table of destinations holds is bounded whatever the
// requests name: a host name has at most 253 bytes, and a longer key
// (which no host name makes, and a Key function must not) is cut to its
// first MaxKeyLen bytes. Keys that share those bytes share a destination.
const MaxKeyLen = 300

// BoundKey returns key cut to MaxKeyLen bytes.
func BoundKey(key string) string {
	if len(key) > MaxKeyLen {
		return key[:MaxKeyLen]
	}
	return key
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

// CanonicalHost returns the one spelling of a host, with an optional
// port, that every spelling naming the same destination shares:
//
//   - a name lower-case, since DNS names compare without case (RFC
//     4343), and without one trailing dot (the root: "api.test." is the
//     fully qualified "api.test");
//   - an IP address in brackets as net/netip writes it (lower-case hex,
//     zeros compressed), and an IPv4 address, or an IPv4-mapped IPv6
//     one (the dialer connects to the IPv4 address it maps), as dotted
//     decimal without brackets;
//   - the port as its decimal number without leading zeros (the dialer
//     reads "080" as 80), and none when it is empty or the scheme's
//     default (:80 for http, :443 for https, RFC 9110 §4.2).
//
// It allocates only when host is not already canonical.
func CanonicalHost(scheme, host string) string {
	name, port, hasPort := splitHostPort(host)
	cname := canonicalName(name)
	cport := canonicalPort(scheme, port)
	keep := hasPort && cport != ""
	switch {
	case cname == name && !keep:
		return name
	case cname == name && cport == port:
		return host
	case !keep:
		return cname
	}
	return cname + ":" + cport
}

// splitHostPort splits host at the colon before its port, when it has
// one: the last colon, outside brackets.
func splitHostPort(host string) (name, port string, hasPort bool) {
	i := strings.LastIndexByte(host, ':')
	if i < 0 || strings.LastIndexByte(host, ']') > i {
		return host, "", false
	}
	return host[:i], host[i+1:], true
}

// canonicalName returns the canonical spelling of a host without its
// port, as CanonicalHost describes.
func canonicalName(name string) string {
	if plainName(name) {
		return name
	}
	if len(name) > 2 && name[0] == '[' && name[len(name)-1] == ']' {
		return canonicalIPLiteral(name)
	}
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// plainName reports whether name is spelled canonically as it is, the
// common case, checked in one pass: lower-case ASCII letters, digits,
// hyphens and dots, with no trailing dot. Anything else (an upper-case
// letter, a byte outside ASCII, brackets) takes the full rules.
func plainName(name string) bool {
	if name == "" || name[len(name)-1] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// canonicalIPLiteral returns the canonical spelling of an address in
// brackets: brackets and the address as net/netip writes it, or the
// dotted decimal of an IPv4 address. Anything else in brackets is only
// lower-cased.
func canonicalIPLiteral(lit string) string {
	inner := lit[1 : len(lit)-1]
	a, err := netip.ParseAddr(inner)
	if err != nil {
		return strings.ToLower(lit)
	}
	a = a.Unmap()
	var buf [64]byte
	b := a.AppendTo(buf[:0])
	switch {
	case a.Is4():
		return string(b)
	case string(b) == inner:
		return lit
	}
	return "[" + string(b) + "]"
}

// canonicalPort returns port as its decimal number without leading
// zeros, or "" when it is empty or scheme's default. A port that is not
// a number is returned as it is.
func canonicalPort(scheme, port string) string {
	if strings.TrimLeft(port, "0123456789") != "" {
		return port
	}
	if port != "" {
		port = strings.TrimLeft(port, "0")
		if port == "" {
			port = "0"
		}
	}
	switch {
	case port == "80" && strings.EqualFold(scheme, "http"),
		port == "443" && strings.EqualFold(scheme, "https"):
		return ""
	}
	return port
}
