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
)

func TestMethodIndex(t *testing.T) {
	for _, c := range []struct {
		method, want string
	}{
		{"", "GET"}, {"GET", "GET"}, {"HEAD", "HEAD"}, {"POST", "POST"}, {"PUT", "PUT"},
		{"DELETE", "DELETE"}, {"CONNECT", "CONNECT"}, {"OPTIONS", "OPTIONS"}, {"TRACE", "TRACE"},
		{"PATCH", "PATCH"}, {"get", "_OTHER"}, {"PROPFIND", "_OTHER"},
	} {
		if got := methods[methodIndex(c.method)]; got != c.want {
			t.Errorf("method %q → %q; want %q", c.method, got, c.want)
		}
	}
}

func TestReasonIndex(t *testing.T) {
	for _, r := range []httpretry.StopReason{httpretry.Final, httpretry.AttemptsExhausted, httpretry.DeadlineExhausted,
		httpretry.RetryAfterExceedsDeadline, httpretry.RetryAfterTooLong, httpretry.BudgetExhausted,
		httpretry.Canceled, httpretry.BodyNotRewindable, httpretry.NotIdempotent} {
		if got := reasons[reasonIndex(r)]; got != string(r) {
			t.Errorf("reason %q → %q", r, got)
		}
	}
	if got := reasons[reasonIndex("")]; got != "other" {
		t.Errorf("empty reason → %q; want other", got)
	}
}

func TestOutcomeClass(t *testing.T) {
	cases := []struct {
		name string
		o    httpretry.Outcome
		want string
	}{
		{"200", httpretry.Outcome{Attempts: 1, Status: 200}, "success"},
		{"304", httpretry.Outcome{Attempts: 1, Status: 304}, "success"},
		{"400", httpretry.Outcome{Attempts: 1, Status: 400}, "error_response"},
		{"reset", httpretry.Outcome{Attempts: 1, Err: httptestutil.ErrReset}, "error"},
		{"reset, may have been applied", httpretry.Outcome{Attempts: 1, Err: httptestutil.ErrReset, Unknown: true}, "unknown"},
		{"before any attempt", httpretry.Outcome{Err: errors.New("body")}, "error"},
		{"503 then canceled in the wait", httpretry.Outcome{Attempts: 1, Status: 503, Err: context.Canceled}, "error"},
	}
	for _, c := range cases {
		if got := outcomes[outcomeClass(c.o)]; got != c.want {
			t.Errorf("%s: class %q; want %q", c.name, got, c.want)
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
