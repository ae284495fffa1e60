package httpretry

import (
	"context"
	"net/http"
	"testing"
)

// TestRefusedConnectionIsTransientOnWindows dials a closed loopback port
// for real: Windows refuses it with a Winsock code, which must be
// transient and classed as refused, and prove the request never sent.
func TestRefusedConnectionIsTransientOnWindows(t *testing.T) {
	t.Parallel()
	addr, err := closedAddr()
	if err != nil {
		t.Fatal(err)
	}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	req := newRequest(t, context.Background(), "POST", "http://"+addr+"/", nil)
	_, err = base.RoundTrip(req)
	if err == nil {
		t.Fatal("a closed port answered")
	}
	if !IsTransient(nil, err) || ErrorClass(err) != "connection_refused" || !neverSent(req, err) {
		t.Errorf("err %v: transient %v, class %q, never sent %v; want true, connection_refused, true",
			err, IsTransient(nil, err), ErrorClass(err), neverSent(req, err))
	}
}
