// Package tried carries, in the context of every attempt of one
// operation, the addresses its earlier attempts were sent to, so that a
// Base that chooses among a host's addresses can send a retry or a hedge
// somewhere else.
//
// The retrying Transport puts one [Set] in the operation's context when
// its Base [Wants] one; every attempt, hedges included, inherits it. The
// Base records the address it chose for each attempt with [Set.Add] and
// asks [Set.Has] for the next. A Set is safe for simultaneous use: the
// hedges of an operation run at the same time.
package tried

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"sync"
)

// Set is the addresses the attempts of one operation were sent to.
type Set struct {
	mu    sync.Mutex // protects addrs
	addrs []string   // few: one per attempt
}

// Add records that an attempt was sent to addr.
func (s *Set) Add(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.addrs {
		if a == addr {
			return
		}
	}
	s.addrs = append(s.addrs, addr)
}

// Has reports whether an attempt was sent to addr.
func (s *Set) Has(addr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.addrs {
		if a == addr {
			return true
		}
	}
	return false
}

// Len is the number of distinct addresses tried.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.addrs)
}

// WithConnTrace returns ctx with a trace that adds to s each address the
// request dials, as it starts to, and the remote address of the
// connection it gets, in the form a Base that chooses addresses records
// ("127.0.0.2:443", "[::1]:443"): an attempt sent by a Base that does
// not choose (a hedge's Base of another kind, or the other way round)
// still marks the address it went to as tried, even while its TLS
// handshake hangs. Through a proxy, that address is the proxy's, which no
// Base chooses.
func WithConnTrace(ctx context.Context, s *Set) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		ConnectStart: func(_, addr string) { s.Add(addr) },
		GotConn: func(i httptrace.GotConnInfo) {
			if i.Conn == nil {
				return
			}
			if a := i.Conn.RemoteAddr(); a != nil {
				s.Add(a.String())
			}
		},
	})
}

type key struct{}

// With returns ctx carrying a new, empty Set.
func With(ctx context.Context) context.Context {
	return context.WithValue(ctx, key{}, new(Set))
}

// From returns the Set ctx carries, or nil: a request sent by anything
// but a retrying Transport whose Base wants one.
func From(ctx context.Context) *Set {
	s, _ := ctx.Value(key{}).(*Set)
	return s
}

// Marker, embedded in a RoundTripper (through an unexported alias, so
// that it adds no exported name), says that it wants a Set in each
// attempt's context. Its method is unexported: only this package can ask.
type Marker struct{}

func (Marker) wantsSet() {}

type wanter interface{ wantsSet() }

// Wants reports whether any of rts, a retrying Transport's Bases, wants
// a Set. A nil one wants none.
func Wants(rts ...http.RoundTripper) bool {
	for _, rt := range rts {
		if _, plain := rt.(*http.Transport); plain {
			continue // the common Base, told apart without an interface lookup
		}
		if _, ok := rt.(wanter); ok {
			return true
		}
	}
	return false
}
