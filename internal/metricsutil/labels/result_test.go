package labels

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/httpretry/httpretry"
)

func TestResult(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		err    error
		want   string
	}{
		{"200", 200, nil, "success"},
		{"304", 304, nil, "success"},
		{"400", 400, nil, "4xx"},
		{"404", 404, nil, "4xx"},
		{"409", 409, nil, "4xx"},
		{"429", 429, nil, "429"},
		{"500", 500, nil, "5xx"},
		{"503", 503, nil, "5xx"},
		{"529", 529, nil, "529"},
		{"600", 600, nil, "other"},
		{"no status", 0, nil, "other"},
		{"attempt timeout", 0, fmt.Errorf("x: %w", httpretry.ErrAttemptTimeout), "timeout"},
		{"deadline", 0, context.DeadlineExceeded, "timeout"},
		{"net timeout", 0, &net.OpError{Op: "read", Err: timeoutErr{}}, "timeout"},
		{"idle timeout", 0, httpretry.ErrIdleTimeout, "idle_timeout"},
		{"canceled", 0, context.Canceled, "canceled"},
		{"refused", 0, &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, "connection_error"},
		{"reset", 0, &net.OpError{Op: "read", Err: syscall.ECONNRESET}, "connection_error"},
		{"eof", 0, io.ErrUnexpectedEOF, "connection_error"},
		{"dns", 0, &net.DNSError{Err: "no such host", Name: "x.test"}, "connection_error"},
		{"error after a status", 503, syscall.ECONNRESET, "connection_error"},
		{"goaway", 0, errors.New("http2: server sent GOAWAY and closed the connection; LastStreamID=1"), "connection_error"},
		{"tls record header", 0, tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, "connection_error"},
		{"tls alert", 0, &net.OpError{Op: "remote error", Err: tls.AlertError(40)}, "connection_error"},
		{"other error", 0, fmt.Errorf("something else"), "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Results[Result(tt.status, tt.err)]; got != tt.want {
				t.Errorf("Result(%d, %v) = %q; want %q", tt.status, tt.err, got, tt.want)
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestWaitParts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name              string
		a                 httpretry.Wait
		backoff, retryAft time.Duration
	}{
		{"backoff", httpretry.Wait{Waited: 70 * time.Millisecond}, 70 * time.Millisecond, 0},
		{"retry after and jitter", httpretry.Wait{Waited: 2070 * time.Millisecond, RetryAfter: 2 * time.Second}, 70 * time.Millisecond, 2 * time.Second},
		{"retry after alone", httpretry.Wait{Waited: 2 * time.Second, RetryAfter: 2 * time.Second}, 0, 2 * time.Second},
		{"a wait of 0", httpretry.Wait{}, 0, 0},
		{"retry after but no time waited", httpretry.Wait{RetryAfter: time.Second}, 0, 0},
		{"a server part larger than the time waited", httpretry.Wait{Waited: 500 * time.Millisecond, RetryAfter: 2 * time.Second}, 0, 500 * time.Millisecond},
		{"negative values count as none", httpretry.Wait{Waited: -time.Second, RetryAfter: -time.Second}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := WaitParts(tt.a)
			if got[WaitBackoff] != tt.backoff || got[WaitRetryAfter] != tt.retryAft {
				t.Errorf("WaitParts(%+v) = backoff %v, retry_after %v; want %v, %v",
					tt.a, got[WaitBackoff], got[WaitRetryAfter], tt.backoff, tt.retryAft)
			}
		})
	}
}

func TestAttemptBuckets(t *testing.T) {
	t.Parallel()
	got := AttemptBuckets(4)
	if fmt.Sprint(got) != "[1 2 3 4]" {
		t.Errorf("AttemptBuckets(4) = %v; want [1 2 3 4]", got)
	}
}
