package httpretry

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
)

// TestOverloadSignal: what the Transport tells its Throttle is an
// overload signal, and what an accept.
func TestOverloadSignal(t *testing.T) {
	t.Parallel()
	resp := func(status int, h http.Header) *http.Response { return &http.Response{StatusCode: status, Header: h} }
	tests := []struct {
		name string
		resp *http.Response
		err  error
		want bool
	}{
		{"200", resp(200, nil), nil, false},
		{"404 is accepted", resp(404, nil), nil, false},
		{"400 with X-Should-Retry false is accepted", resp(400, http.Header{"X-Should-Retry": {"false"}}), nil, false},
		{"500 is accepted", resp(500, nil), nil, false},
		{"429", resp(429, nil), nil, true},
		{"503", resp(503, nil), nil, true},
		{"529", resp(529, nil), nil, true},
		{"500 with X-Should-Retry false", resp(500, http.Header{"X-Should-Retry": {" False"}}), nil, true},
		{"502 with X-Should-Retry true", resp(502, http.Header{"X-Should-Retry": {"true"}}), nil, false},
		{"502 from a proxy whose backend refused the connection", resp(502, http.Header{"Server": {"nginx"}}), nil, true},
		{"504 from a proxy whose backend did not answer", resp(504, nil), nil, true},
		{"Envoy's local overload answer", resp(503, http.Header{"X-Envoy-Overloaded": {"true"}}), nil, true},
		{"Envoy's rate-limit answer", resp(429, http.Header{"X-Envoy-Ratelimited": {"true"}}), nil, true},
		{"Envoy's overload header on a 500", resp(500, http.Header{"X-Envoy-Overloaded": {"true"}}), nil, true},
		{"refused", nil, &netOpError{syscall.ECONNREFUSED}, true},
		{"reset is accepted", nil, &netOpError{syscall.ECONNRESET}, false},
		{"attempt timeout", nil, &attemptTimeoutError{err: context.DeadlineExceeded}, true},
		{"idle timeout", nil, fmt.Errorf("x: %w", ErrIdleTimeout), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := overloadSignal(tt.resp, tt.err); got != tt.want {
				t.Errorf("overloadSignal = %v; want %v", got, tt.want)
			}
		})
	}
}

// netOpError is a dial error carrying errno, as net returns one.
type netOpError struct{ errno syscall.Errno }

func (e *netOpError) Error() string { return "dial tcp: " + e.errno.Error() }
func (e *netOpError) Unwrap() error { return e.errno }
