package otelretry

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/httptestutil"
	"github.com/httpretry/httpretry/internal/metricsutil/labels"
)

func TestMethodIndex(t *testing.T) {
	for _, c := range []struct {
		method, want string
	}{
		{"", "GET"}, {"GET", "GET"}, {"HEAD", "HEAD"}, {"POST", "POST"}, {"PUT", "PUT"},
		{"DELETE", "DELETE"}, {"CONNECT", "CONNECT"}, {"OPTIONS", "OPTIONS"}, {"TRACE", "TRACE"},
		{"PATCH", "PATCH"}, {"get", "_OTHER"}, {"PROPFIND", "_OTHER"},
	} {
		if got := methods[labels.Method(c.method)]; got != c.want {
			t.Errorf("method %q → %q; want %q", c.method, got, c.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return false }

func TestErrorClass(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("x: %w", httpretry.ErrAttemptTimeout), "attempt_timeout"},
		{fmt.Errorf("x: %w", httpretry.ErrIdleTimeout), "idle_timeout"},
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "deadline_exceeded"},
		{httptestutil.ErrRefused, "connection_refused"},
		{httptestutil.ErrReset, "connection_reset"},
		{fmt.Errorf("read: %w", errors.New("x")), "other"},
		{&net.DNSError{Err: "no such host"}, "dns"},
		{x509.HostnameError{}, "tls"},
		{&net.OpError{Op: "read", Err: timeoutErr{}}, "timeout"},
	} {
		if got := httpretry.ErrorClass(c.err); got != c.want {
			t.Errorf("ErrorClass(%v) = %q; want %q", c.err, got, c.want)
		}
	}
}
