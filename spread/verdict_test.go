package spread

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// TestJudgeAnswerAndBody holds what counts against an address and what
// restores it.
func TestJudgeAnswerAndBody(t *testing.T) {
	reset := fmt.Errorf("read: %w", syscall.ECONNRESET)
	resp := func(status int, h ...string) *http.Response {
		r := &http.Response{StatusCode: status, Header: http.Header{}}
		if len(h) == 2 {
			r.Header.Set(h[0], h[1])
		}
		return r
	}
	answers := []struct {
		name  string
		resp  *http.Response
		err   error
		asked bool
		end   ending
		want  verdict
	}{
		{"reset after asking for a connection", nil, reset, true, running, failure},
		{"reset, then the caller canceled", nil, reset, true, canceled, neutral},
		{"deadline while waiting for the headers", nil, context.DeadlineExceeded, true, expired, failure},
		{"canceled: a hedge that lost", nil, fmt.Errorf("x: %w", context.Canceled), true, canceled, neutral},
		{"canceled with the caller's cause", nil, errGaveUp, true, canceled, neutral},
		{"canceled by the Base itself", nil, fmt.Errorf("x: %w", context.Canceled), true, running, neutral},
		{"cut by IdleTimeout before the headers", nil, errSilent, true, stallCut, failure},
		{"refused before asking for a connection", nil, errors.New("net/http: invalid header field value"), false, running, neutral},
		{"200", resp(200), nil, true, running, success},
		{"404", resp(404), nil, true, running, success},
		{"429: the caller's quota", resp(429), nil, true, running, success},
		{"500", resp(500), nil, true, running, success},
		{"503", resp(503), nil, true, running, failure},
		{"529", resp(529), nil, true, running, failure},
		{"502 with X-Should-Retry: false", resp(502, "X-Should-Retry", "false"), nil, true, running, failure},
	}
	for _, tt := range answers {
		t.Run(tt.name, func(t *testing.T) {
			if got := judgeAnswer(tt.resp, tt.err, tt.asked, tt.end); got != tt.want {
				t.Errorf("judgeAnswer = %v, want %v", got, tt.want)
			}
		})
	}
	bodies := []struct {
		err  error
		end  ending
		want verdict
	}{
		{nil, running, success}, {io.EOF, running, success}, {nil, canceled, success},
		{io.ErrUnexpectedEOF, running, failure}, {reset, running, failure},
		{context.DeadlineExceeded, expired, neutral}, {fmt.Errorf("x: %w", context.Canceled), canceled, neutral},
		{errGaveUp, canceled, neutral}, {errGaveUp, expired, neutral},
		{errSilent, stallCut, failure},
	}
	for _, tt := range bodies {
		if got := judgeBody(tt.err, tt.end); got != tt.want {
			t.Errorf("judgeBody(%v, %v) = %v, want %v", tt.err, tt.end, got, tt.want)
		}
	}
}

var (
	errGaveUp = errors.New("caller gave up")
	errSilent = timeoutError{}
)

// timeoutError is a cause that says it is a timeout, as httpretry's
// idle watch's is.
type timeoutError struct{}

func (timeoutError) Error() string { return "idle timeout" }
func (timeoutError) Timeout() bool { return true }

// TestEndingOfAContext: how a context ended, read from its error and its
// cause.
func TestEndingOfAContext(t *testing.T) {
	live := context.Background()
	plain, cancel := context.WithCancel(live)
	cancel()
	caused, cancelCause := context.WithCancelCause(live)
	cancelCause(errGaveUp)
	silent, cancelSilent := context.WithCancelCause(live)
	cancelSilent(errSilent)
	past, cancelPast := context.WithDeadline(live, time.Unix(0, 0))
	defer cancelPast()
	pastCause, cancelPastCause := context.WithDeadlineCause(live, time.Unix(0, 0), errGaveUp)
	defer cancelPastCause()
	for _, tt := range []struct {
		name string
		ctx  context.Context
		want ending
	}{
		{"live", live, running},
		{"canceled", plain, canceled},
		{"canceled with a cause", caused, canceled},
		{"canceled with a timeout cause", silent, stallCut},
		{"deadline", past, expired},
		{"deadline with a cause", pastCause, expired},
	} {
		if got := endingOf(tt.ctx); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
