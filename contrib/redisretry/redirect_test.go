package redisretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// replyErr is an error reply of Redis, as go-redis returns it.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// classifyFault tells a redirect, a migration, a lost reply and an answer
// apart.
func TestClassifyFault(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want fault
	}{
		{"answered", nil, faultNone},
		{"moved", replyErr("MOVED 3999 127.0.0.1:7002"), faultMoved},
		{"wrapped moved", fmt.Errorf("pipeline: %w", replyErr("MOVED 1 127.0.0.1:7002")), faultMoved},
		{"ask", replyErr("ASK 3999 127.0.0.1:7002"), faultWait},
		{"tryagain", replyErr("TRYAGAIN Multiple keys request during rehashing of slot"), faultWait},
		{"script error", replyErr("ERR Error running script"), faultFinal},
		{"out of memory", replyErr("OOM command not allowed"), faultFinal},
		{"wrong type", replyErr("WRONGTYPE Operation against a key"), faultFinal},
		{"nil reply", redis.Nil, faultFinal},
		{"deadline", context.DeadlineExceeded, faultFinal},
		{"wrapped deadline", fmt.Errorf("read: %w", context.DeadlineExceeded), faultFinal},
		{"canceled", context.Canceled, faultFinal},
		{"client closed", redis.ErrClosed, faultFinal},
		{"eof", io.EOF, faultLost},
		{"reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, faultLost},
		{"other", errors.New("broken pipe"), faultLost},
	} {
		if got := classifyFault(tc.err); got != tc.want {
			t.Errorf("%s: classifyFault(%v) = %d; want %d", tc.name, tc.err, got, tc.want)
		}
	}
}

// resendAfter sends redirects and migrations again until the bound, and
// lost replies a few times, where go-redis does not.
func TestResendAfter(t *testing.T) {
	for _, tc := range []struct {
		f           fault
		lost        int
		lostResends bool
		want        bool
	}{
		{faultNone, 0, true, false},
		{faultFinal, 0, true, false},
		{faultMoved, 0, false, true},
		{faultMoved, 100, true, true},
		{faultWait, 0, false, true},
		{faultWait, 100, true, true},
		{faultLost, 0, true, true},
		{faultLost, maxLostResends - 1, true, true},
		{faultLost, maxLostResends, true, false},
		{faultLost, 0, false, false},
	} {
		if got := resendAfter(tc.f, tc.lost, tc.lostResends); got != tc.want {
			t.Errorf("resendAfter(%d, %d, %v) = %v; want %v", tc.f, tc.lost, tc.lostResends, got, tc.want)
		}
	}
}
