package promretry

import (
	"context"
	"fmt"
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
	reset := fmt.Errorf("wrapped: %w", httptestutil.ErrReset)
	tests := []struct {
		name string
		o    httpretry.Outcome
		want string
	}{
		{"200", httpretry.Outcome{Attempts: 1, Status: 200}, "success"},
		{"304", httpretry.Outcome{Attempts: 1, Status: 304}, "success"},
		{"400", httpretry.Outcome{Attempts: 1, Status: 400}, "error_response"},
		{"503", httpretry.Outcome{Attempts: 1, Status: 503}, "error_response"},
		{"reset", httpretry.Outcome{Attempts: 3, Err: reset}, "error"},
		{"reset, may have been applied", httpretry.Outcome{Attempts: 1, Err: reset, Unknown: true}, "unknown"},
		{"canceled during the wait after a 503", httpretry.Outcome{Attempts: 1, Status: 503, Err: context.Canceled}, "error"},
		{"canceled before any attempt", httpretry.Outcome{Err: context.Canceled}, "error"},
		{"no status, no error", httpretry.Outcome{Attempts: 1}, "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := outcomeNames[outcomeIndex(tt.o)]; got != tt.want {
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
