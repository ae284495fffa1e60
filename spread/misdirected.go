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
// one and no GetBody) or a Transport for the fresh connection cannot be
// made. The fresh connection is closed with the response body.
func (t *Transport) misdirected(h *host, a *addr, req *http.Request, resp *http.Response) (*http.Response, error) {
	body := req.Body // nil or http.NoBody: nothing to send again
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return resp, nil
		}
		b, err := req.GetBody()
		if err != nil {
			return resp, nil
		}
		body = b
	}
	fresh, err := t.addrTransport(h.key, a.hostport, false, nil)
	if err != nil {
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
	resp, err = fresh.RoundTrip(again)
	if err != nil {
		fresh.CloseIdleConnections()
		return nil, err
	}
	resp.Body = &afterClose{ReadCloser: resp.Body, after: fresh.CloseIdleConnections}
	return resp, nil
}
