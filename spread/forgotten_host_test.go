package spread

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/httpretry/httpretry/spread/spreadtest"
)

// TestHostForgottenUnderARequestIsNotUsedByIt: a request got a host's
// state just before the full table forgot the host (idle past Refresh);
// choosing an address from that state is refused, so that the request
// takes the state the table keeps, whose connections
// CloseIdleConnections reaches, rather than dial from a Transport no
// longer tracked. A host just made is not forgotten before its first
// request has chosen.
func TestHostForgottenUnderARequestIsNotUsedByIt(t *testing.T) {
	var d dials
	sp, fc := fakeSpread(spreadtest.NewResolver(four...), &d)
	ctx := context.Background()
	u := mustParse(t, "http://forgotten.example/")
	send(t, sp, ctx, u.String())
	h := sp.host(u)
	fc.Advance(DefaultRefresh + time.Second)
	sp.mu.Lock()
	sp.forgetIdleLocked(fc.Now())
	sp.mu.Unlock()
	if _, err := h.choose(ctx, nil); !errors.Is(err, errHostForgotten) {
		t.Fatalf("choose on a forgotten host: %v, want errHostForgotten", err)
	}
	req, _ := http.NewRequest(http.MethodGet, u.String(), nil)
	if _, err := h.proxied(req); !errors.Is(err, errHostForgotten) {
		t.Fatalf("proxied on a forgotten host: %v, want errHostForgotten", err)
	}
	fresh := sp.host(u)
	if fresh == h {
		t.Fatal("the table still holds the forgotten host")
	}
	sp.mu.Lock()
	sp.forgetIdleLocked(fc.Now())
	kept := sp.hosts[fresh.key] == fresh
	sp.mu.Unlock()
	if !kept {
		t.Fatal("a host just made was forgotten before its first request chose")
	}
	if err := send(t, sp, ctx, u.String()); errors.Is(err, errHostForgotten) {
		t.Fatalf("a request after the host was forgotten: %v", err)
	}
}
