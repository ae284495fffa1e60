package spread

import (
	"io"
	"net/http"
)

// maxMisdirectedDrain bounds what is read of a 421's body so that its
// connection can be reused.
const maxMisdirectedDrain = 64 << 10

// misdirected sends req once more to a, on a fresh connection, after a
// 421 Misdirected Request (RFC 9110, 15.5.20: the connection reached a
// server that does not serve this host, as a coalesced HTTP/2
// connection can): a fresh connection is dialed for the host's name. The
// 421 is returned as it is when req's body cannot be sent again (it has
// one and no GetBody), when req's context ends while another resend to a
// holds the address's one fresh connection, or when a Transport for the
// fresh connection cannot be made. The fresh connection is closed, and
// let go for the next resend, with the response body.
func (t *Transport) misdirected(h *host, a *addr, req *http.Request, resp *http.Response) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return resp, nil
	}
	// One resend at a time per address, so that a server answering 421
	// to every request adds one connection to the address's, not one
	// per request.
	select {
	case a.resend <- struct{}{}:
	case <-req.Context().Done():
		return resp, nil
	}
	done := func() { <-a.resend }
	body := req.Body // nil or http.NoBody: nothing to send again
	if req.Body != nil && req.Body != http.NoBody {
		b, err := req.GetBody()
		if err != nil {
			done()
			return resp, nil
		}
		body = b
	}
	var conns connSet
	fresh, err := t.addrTransport(h.key, a.hostport, false, &conns)
	if err != nil {
		done()
		if body != nil {
			body.Close()
		}
		return resp, nil
	}
	fresh.DisableKeepAlives = true
	io.CopyN(io.Discard, resp.Body, maxMisdirectedDrain)
	resp.Body.Close()
	again := req.Clone(req.Context())
	again.Body = body
	// The fresh connection is closed before the next resend may dial:
	// net/http would close it on its own goroutine, a moment later.
	finish := func() {
		fresh.CloseIdleConnections()
		conns.closeAll()
		done()
	}
	resp, err = fresh.RoundTrip(again)
	if err != nil {
		finish()
		return nil, err
	}
	resp.Body = &afterClose{ReadCloser: resp.Body, after: finish}
	return resp, nil
}
