package spread

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-cleanhttp"
)

// addrTransport returns a Transport from New that dials hostport for
// target, the host and port as net/http dials them, and passes any other
// dial (a proxy's) through; conns, if not nil, records the connections it
// dials. own says whether it serves the address from now on (rather than
// one request, on a fresh connection): it is then checked against the
// Transports already in use, and recorded.
func (t *Transport) addrTransport(target, hostport string, own bool, conns *connSet) (*http.Transport, error) {
	var rt *http.Transport
	var err error
	if own {
		rt, err = t.newTransport()
	} else {
		rt, err = t.callNew()
	}
	if err != nil {
		return nil, err
	}
	// A Transport that would speak HTTP/2 by default keeps it: net/http
	// turns it off by default for a Transport with a dialer of its own.
	//lint:ignore SA1019 Dial is checked, not used
	ownDial := rt.DialContext != nil || rt.Dial != nil
	if rt.Protocols == nil && rt.TLSNextProto == nil && rt.TLSClientConfig == nil && !ownDial {
		rt.ForceAttemptHTTP2 = true
	}
	dial := baseDial(rt)
	//lint:ignore SA1019 Dial is cleared: DialContext replaces it
	rt.Dial = nil
	rt.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		if strings.EqualFold(address, target) {
			address = hostport
		}
		c, err := dial(ctx, network, address)
		if err != nil || conns == nil {
			return c, err
		}
		return conns.track(c), nil
	}
	return rt, nil
}

// callNew returns a Transport from New, or cleanhttp's pooled one, that
// does not dial TLS itself.
func (t *Transport) callNew() (*http.Transport, error) {
	var rt *http.Transport
	if t.New == nil {
		rt = cleanhttp.DefaultPooledTransport()
	} else if rt = t.New(); rt == nil {
		return nil, errors.New("spread: New returned a nil *http.Transport")
	}
	//lint:ignore SA1019 DialTLS is checked, not used
	if rt.DialTLSContext != nil || rt.DialTLS != nil {
		return nil, ErrDialTLS
	}
	return rt, nil
}

// newTransport returns a Transport from callNew that serves the
// Transport from now on: it is checked against those already in use, and
// recorded.
func (t *Transport) newTransport() (*http.Transport, error) {
	rt, err := t.callNew()
	if err != nil {
		return nil, err
	}
	if !t.own(rt) {
		return nil, ErrSharedTransport
	}
	return rt, nil
}

// baseDial is the dialer New's Transport would use.
func baseDial(rt *http.Transport) func(ctx context.Context, network, address string) (net.Conn, error) {
	if rt.DialContext != nil {
		return rt.DialContext
	}
	//lint:ignore SA1019 a Transport from New may set only Dial
	if d := rt.Dial; d != nil {
		return func(_ context.Context, network, address string) (net.Conn, error) { return d(network, address) }
	}
	return (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
}

// own records rt as an address's, and reports false if it already was.
func (t *Transport) own(rt *http.Transport) bool {
	t.ownMu.Lock()
	defer t.ownMu.Unlock()
	if t.owned[rt] {
		return false
	}
	if t.owned == nil {
		t.owned = make(map[*http.Transport]bool)
	}
	t.owned[rt] = true
	return true
}

// disown forgets rt, an address's Transport, once the address is gone.
func (t *Transport) disown(rt *http.Transport) {
	if rt == nil {
		return
	}
	t.ownMu.Lock()
	defer t.ownMu.Unlock()
	delete(t.owned, rt)
}
