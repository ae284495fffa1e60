//go:build unix

package redistest

import (
	"context"
	"testing"
	"time"
)

// A frozen server answers nothing; a command written meanwhile runs once
// it is thawed.
func TestFreezeThaw(t *testing.T) {
	ctx := context.Background()
	srv := Start(t)
	rdb := srv.Client(t)
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := rdb.Incr(short, "n").Err()
	cancel()
	if err == nil {
		srv.Thaw()
		t.Fatal("INCR on a frozen server succeeded; want an error")
	}
	srv.Thaw()
	direct := srv.Client(t)
	var n int
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err = direct.Get(ctx, "n").Int()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil || n != 1 {
		t.Fatalf("n after Thaw = %d, %v; want 1 (the INCR written while frozen ran once)", n, err)
	}
}
