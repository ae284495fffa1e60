package spread

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"testing"
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
		want  verdict
	}{
		{"reset after asking for a connection", nil, reset, true, failure},
		{"deadline while waiting for the headers", nil, context.DeadlineExceeded, true, failure},
		{"canceled: a hedge that lost", nil, fmt.Errorf("x: %w", context.Canceled), true, neutral},
		{"refused before asking for a connection", nil, errors.New("net/http: invalid header field value"), false, neutral},
		{"200", resp(200), nil, true, success},
		{"404", resp(404), nil, true, success},
		{"429: the caller's quota", resp(429), nil, true, success},
		{"500", resp(500), nil, true, success},
		{"503", resp(503), nil, true, failure},
		{"529", resp(529), nil, true, failure},
		{"502 with X-Should-Retry: false", resp(502, "X-Should-Retry", "false"), nil, true, failure},
	}
	for _, tt := range answers {
		t.Run(tt.name, func(t *testing.T) {
			if got := judgeAnswer(tt.resp, tt.err, tt.asked); got != tt.want {
				t.Errorf("judgeAnswer = %v, want %v", got, tt.want)
			}
		})
	}
	bodies := []struct {
		err  error
		want verdict
	}{
		{nil, success}, {io.EOF, success}, {io.ErrUnexpectedEOF, failure}, {reset, failure},
		{context.DeadlineExceeded, neutral}, {fmt.Errorf("x: %w", context.Canceled), neutral},
	}
	for _, tt := range bodies {
		if got := judgeBody(tt.err); got != tt.want {
			t.Errorf("judgeBody(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
