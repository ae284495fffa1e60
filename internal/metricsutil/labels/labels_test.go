package labels

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/idempotency"
)

func TestMethod(t *testing.T) {
	names := MethodNames("OTHER")
	tests := map[string]string{
		"": "GET", "GET": "GET", "HEAD": "HEAD", "POST": "POST", "PUT": "PUT", "DELETE": "DELETE",
		"CONNECT": "CONNECT", "OPTIONS": "OPTIONS", "TRACE": "TRACE", "PATCH": "PATCH",
		"get": "OTHER", "BREW": "OTHER", "PROPFIND": "OTHER", "GET /x": "OTHER",
	}
	for method, want := range tests {
		if got := names[Method(method)]; got != want {
			t.Errorf("method %q labelled %q; want %q", method, got, want)
		}
	}
	if got := MethodNames("_OTHER")[NumMethods-1]; got != "_OTHER" {
		t.Errorf("other method spelled %q; want _OTHER", got)
	}
}

// TestReason: the reason values are httpretry's stop reasons, in its
// decision order, then other for anything else.
func TestReason(t *testing.T) {
	all := httpretry.StopReasons()
	if len(all) != NumReasons-1 || len(Reasons) != NumReasons || Reasons[NumReasons-1] != "other" {
		t.Fatalf("%d stop reasons; the values are %v, want them and other", len(all), Reasons)
	}
	for i, r := range all {
		if got := Reason(r); got != i || Reasons[i] != string(r) {
			t.Errorf("reason %q has index %d, value %q; want %d, %q", r, got, Reasons[got], i, r)
		}
	}
	for _, r := range []httpretry.StopReason{"some_new_reason", "", "other", "Final"} {
		if got := Reason(r); got != NumReasons-1 {
			t.Errorf("reason %q has index %d; want %d, other", r, got, NumReasons-1)
		}
	}
}

func TestOutcome(t *testing.T) {
	reset := fmt.Errorf("wrapped: %w", errors.New("connection reset by peer"))
	tests := []struct {
		name string
		o    httpretry.Outcome
		want string
	}{
		{"200", httpretry.Outcome{Attempts: 1, Status: 200}, "success"},
		{"101", httpretry.Outcome{Attempts: 1, Status: 101}, "success"},
		{"399", httpretry.Outcome{Attempts: 1, Status: 399}, "success"},
		{"400", httpretry.Outcome{Attempts: 1, Status: 400}, "error_response"},
		{"503", httpretry.Outcome{Attempts: 1, Status: 503}, "error_response"},
		{"reset", httpretry.Outcome{Attempts: 3, Err: reset}, "error"},
		{"reset, may have been applied", httpretry.Outcome{Attempts: 1, Err: reset, Unknown: true}, "unknown"},
		{"canceled during the wait after a 503", httpretry.Outcome{Attempts: 1, Status: 503, Err: context.Canceled}, "error"},
		{"canceled before any attempt", httpretry.Outcome{Err: context.Canceled}, "error"},
		{"no status, no error", httpretry.Outcome{Attempts: 1}, "error"},
	}
	for _, tt := range tests {
		if got := Outcomes[Outcome(tt.o)]; got != tt.want {
			t.Errorf("%s: outcome %q; want %q", tt.name, got, tt.want)
		}
	}
}

func TestSuccess(t *testing.T) {
	for status, want := range map[int]bool{0: false, 1: true, 200: true, 399: true, 400: false, 503: false} {
		if got := Success(status); got != want {
			t.Errorf("Success(%d) = %v; want %v", status, got, want)
		}
	}
}

func TestAttemptKind(t *testing.T) {
	for number, want := range map[int]string{0: "initial", 1: "initial", 2: "retry", 3: "retry"} {
		if got := AttemptKinds[AttemptKind(number)]; got != want {
			t.Errorf("attempt %d is %q; want %q", number, got, want)
		}
	}
}

func TestConn(t *testing.T) {
	for c, want := range map[httpretry.ConnUse]string{
		httpretry.ConnNew: "new", httpretry.ConnReused: "reused", httpretry.ConnUnknown: "unknown", "other": "unknown",
	} {
		if got := Conns[Conn(c)]; got != want {
			t.Errorf("conn %q labelled %q; want %q", c, got, want)
		}
	}
}

func TestTimeout(t *testing.T) {
	tests := []struct {
		err    error
		want   string
		wantOK bool
	}{
		{nil, "", false},
		{fmt.Errorf("attempt: %w", httpretry.ErrAttemptTimeout), "attempt", true},
		{fmt.Errorf("attempt: %w", httpretry.ErrIdleTimeout), "idle", true},
		{context.DeadlineExceeded, "", false},
		{errors.New("connection refused"), "", false},
	}
	for _, tt := range tests {
		i, ok := Timeout(tt.err)
		if ok != tt.wantOK || (ok && Timeouts[i] != tt.want) {
			t.Errorf("Timeout(%v) = %d, %v; want %q, %v", tt.err, i, ok, tt.want, tt.wantOK)
		}
	}
}

func TestPhaseDurations(t *testing.T) {
	a := httpretry.Attempt{ConnWait: 1, DNS: 2, Connect: 3, TLSHandshake: 4, FirstByte: 5}
	want := map[string]time.Duration{"conn_wait": 1, "dns": 2, "connect": 3, "tls": 4, "first_byte": 5}
	for i, d := range PhaseDurations(a) {
		if d != want[Phases[i]] {
			t.Errorf("phase %s = %v; want %v", Phases[i], d, want[Phases[i]])
		}
	}
}

func TestEvent(t *testing.T) {
	kinds := idempotency.Kinds()
	if len(kinds) != NumEvents-1 {
		t.Fatalf("the idempotency package has %d kinds; the table %d and other", len(kinds), NumEvents-1)
	}
	for _, k := range kinds {
		if got := Events[Event(string(k))]; got != string(k) {
			t.Errorf("event %q labelled %q", k, got)
		}
	}
	for _, k := range []string{"", "Executed", "typo"} {
		if got := Events[Event(k)]; got != "other" {
			t.Errorf("event %q labelled %q; want other", k, got)
		}
	}
}
