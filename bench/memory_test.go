package bench

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
)

// memURL is the address of the in-memory server: its scheme is registered
// on each implementation's *http.Transport.
const memURL = "mem://api.test/books/b1"

// memServer answers requests in memory as peerServer does on loopback,
// with the headers a real server sends, and without allocating: its two
// responses and their bodies are reused. Loopback times on a shared
// machine swing by tens of percent; in memory, what remains is each
// implementation's own work.
type memServer struct {
	ops         opCounter
	hits        atomic.Int64
	bodyBytes   atomic.Int64
	ok          memResponse
	unavailable memResponse
}

// memResponse is a reusable response and its body.
type memResponse struct {
	resp http.Response
	body memBody
	data []byte
}

// memBody is a response body that can be rewound for the next response.
type memBody struct{ bytes.Reader }

func (*memBody) Close() error { return nil }

func newMemServer() *memServer {
	m := &memServer{}
	m.ok.init(http.StatusOK, okBody)
	m.unavailable.init(http.StatusServiceUnavailable, unavailableBody)
	return m
}

func (r *memResponse) init(status int, data []byte) {
	r.data = data
	r.resp = http.Response{
		Status:     strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode: status,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		ContentLength: int64(len(data)),
		Header: http.Header{
			"Content-Type":   textPlain,
			"Content-Length": {strconv.Itoa(len(data))},
			"Date":           {"Wed, 02 Dec 2026 12:00:00 GMT"},
		},
	}
}

// transport returns a pooled transport of its own on which the mem scheme
// goes to m: a plain *http.Transport, as on loopback.
func (m *memServer) transport(pooled *http.Transport) *http.Transport {
	pooled.RegisterProtocol("mem", m)
	return pooled
}

func (m *memServer) RoundTrip(req *http.Request) (*http.Response, error) {
	m.hits.Add(1)
	if req.Body != nil {
		n, _ := io.Copy(io.Discard, req.Body)
		req.Body.Close()
		m.bodyBytes.Add(n)
	}
	fail, err := m.ops.fail(req)
	if err != nil {
		return nil, err
	}
	r := &m.ok
	if fail {
		r = &m.unavailable
	}
	r.body.Reset(r.data)
	r.resp.Body = &r.body
	r.resp.Request = req
	return &r.resp, nil
}
