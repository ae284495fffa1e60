package httpretry

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// newLoopbackServer starts a server on 127.0.0.1 speaking HTTP/2 over TLS
// (h2) or plain HTTP/1.1, closed with the test. Its Client's Transport is
// the Base to test with: it trusts the server's certificate.
func newLoopbackServer(t *testing.T, h2 bool, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// serverBase returns srv's client transport, whose idle connections are
// closed with the test.
func serverBase(t *testing.T, srv *httptest.Server) *http.Transport {
	t.Helper()
	base := srv.Client().Transport.(*http.Transport)
	t.Cleanup(base.CloseIdleConnections)
	return base
}

// protocols names the two wire protocols the network tests run over.
var protocols = []struct {
	name string
	h2   bool
}{{"HTTP/1.1", false}, {"HTTP/2", true}}
