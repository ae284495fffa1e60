package spread

import (
	"fmt"
	"net/http"
)

// proxied returns the host's Transport for requests that New's Transport
// sends through a proxy, when req is one, or nil. The proxy resolves the
// host and picks the address: such a request is neither looked up nor
// spread, so that a client whose own DNS cannot resolve the host (as
// behind many proxies) still reaches it. The Transport is made from New
// at the host's first request, without spread's dialer, and kept only
// if it has a Proxy.
func (h *host) proxied(req *http.Request) (*http.Transport, error) {
	h.mu.Lock()
	if h.forgotten {
		h.mu.Unlock()
		return nil, errHostForgotten
	}
	if h.viaProxy == nil && !h.noProxy {
		rt, err := h.t.callNew()
		if err != nil {
			h.mu.Unlock()
			return nil, err
		}
		if rt.Proxy == nil {
			// New's Transports send nothing through a proxy: this one is
			// let go, unused.
			h.noProxy = true
		} else if !h.t.own(rt) {
			h.mu.Unlock()
			return nil, ErrSharedTransport
		} else {
			h.viaProxy = rt
		}
	}
	rt := h.viaProxy
	h.mu.Unlock()
	if rt == nil {
		return nil, nil
	}
	u, err := rt.Proxy(req)
	if err != nil {
		return nil, fmt.Errorf("spread: proxy for %s: %w", h.name, err)
	}
	if u == nil {
		return nil, nil
	}
	return rt, nil
}
