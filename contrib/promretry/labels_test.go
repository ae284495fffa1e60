package promretry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/httptestutil"
)

func TestMethodIndex(t *testing.T) {
	tests := map[string]string{
		"": "GET", "GET": "GET", "HEAD": "HEAD", "POST": "POST", "PUT": "PUT", "DELETE": "DELETE",
		"CONNECT": "CONNECT", "OPTIONS": "OPTIONS", "TRACE": "TRACE", "PATCH": "PATCH",
		"get": "OTHER", "BREW": "OTHER", "PROPFIND": "OTHER", "GET /x": "OTHER",
	}
	for method, want := range tests {
		if got := methodNames[methodIndex(method)]; got != want {
			t.Errorf("method %q labelled %q; want %q", method, got, want)
		}
	}
}

func TestReasonIndex(t *testing.T) {
	for _, r := range []httpretry.StopReason{
		httpretry.Final, httpretry.AttemptsExhausted, httpretry.DeadlineExhausted,
		httpretry.RetryAfterExceedsDeadline, httpretry.RetryAfterTooLong, httpretry.BudgetExhausted,
		httpretry.Canceled, httpretry.BodyNotRewindable, httpretry.NotIdempotent,
	} {
		if got := reasonNames[reasonIndex(r)]; got != string(r) {
			t.Errorf("reason %q labelled %q", r, got)
		}
	}
	if got := reasonNames[reasonIndex("some_new_reason")]; got != "other" {
		t.Errorf("unknown reason labelled %q; want other", got)
	}
}

func TestOutcomeIndex(t *testing.T) {
	post := httptest.NewRequest("POST", "http://api.test/", nil)
	get := httptest.NewRequest("GET", "http://api.test/", nil)
	reset := fmt.Errorf("wrapped: %w", httptestutil.ErrReset)
	tests := []struct {
		name string
		req  *http.Request
		o    httpretry.Outcome
		want string
	}{
		{"200", get, httpretry.Outcome{Attempts: 1, Status: 200}, "success"},
		{"304", get, httpretry.Outcome{Attempts: 1, Status: 304}, "success"},
		{"400", get, httpretry.Outcome{Attempts: 1, Status: 400}, "error_response"},
		{"503 to a POST", post, httpretry.Outcome{Attempts: 1, Status: 503}, "error_response"},
		{"GET reset", get, httpretry.Outcome{Attempts: 3, Err: reset}, "error"},
		{"POST reset", post, httpretry.Outcome{Attempts: 1, Err: reset}, "unknown"},
		{"POST refused", post, httpretry.Outcome{Attempts: 3, Err: httptestutil.ErrRefused}, "error"},
		{"POST with no host", post, httpretry.Outcome{Attempts: 1, Err: &net.DNSError{Err: "no such host", IsNotFound: true}}, "error"},
		{"POST to a bad certificate", post, httpretry.Outcome{Attempts: 1, Err: &tls.CertificateVerificationError{Err: errors.New("x509")}}, "error"},
		{"POST canceled before any attempt", post, httpretry.Outcome{Err: context.Canceled}, "error"},
		{"POST canceled in flight", post, httpretry.Outcome{Attempts: 1, Err: context.Canceled}, "unknown"},
		{"no status, no error", get, httpretry.Outcome{Attempts: 1}, "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := outcomeNames[outcomeIndex(tt.req, tt.o, httpretry.IsIdempotent)]; got != tt.want {
				t.Errorf("outcome %q; want %q", got, tt.want)
			}
		})
	}
}

func TestConnIndex(t *testing.T) {
	for c, want := range map[httpretry.ConnUse]string{
		httpretry.ConnNew: "new", httpretry.ConnReused: "reused", httpretry.ConnUnknown: "unknown", "other": "unknown",
	} {
		if got := connNames[connIndex(c)]; got != want {
			t.Errorf("conn %q labelled %q; want %q", c, got, want)
		}
	}
}
