//go:build unix

package redisretry

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/httpretry/httpretry/contrib/redisretry/redistest"
	"github.com/redis/go-redis/v9"
)

// Operations withdraw from a real redis-server that is killed with
// SIGKILL and restarted empty, frozen with SIGSTOP and thawed, or killed
// as a Sentinel primary and failed over to its replica, while they run: tokens come from the shared bucket, then from the local one,
// then from the shared one again, under every kind of context (one that
// never ends, a cancelable one, one with a deadline, WithoutCancel of a
// canceled one). Once the Budget is shared again and its bucket drained,
// every token is refunded, half of them just after their operation's
// context was canceled: the local bucket is full again, and the shared
// one holds exactly the tokens it gave (all refunds less those the local
// bucket gave).
func TestTokensWithdrawnAcrossARedisCrashFreezeOrFailoverReturnToTheirOwnBuckets(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"killed and restarted", "frozen and thawed", "primary killed and failed over by Sentinel"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bg := context.Background()
			var srv *redistest.Server
			var rdb redis.UniversalClient
			var sentinel *redistest.Sentinel
			if mode == "primary killed and failed over by Sentinel" {
				sentinel = redistest.StartSentinel(t)
				rdb = sentinel.Client(t)
			} else {
				srv, rdb = server(t)
			}
			key := "refund-crash-" + mode
			const capacity = 5000
			b := newBudget(t, rdb, key, capacity, 0, Options{FleetSize: 10, FlushInterval: 5 * time.Millisecond, MaxProbeInterval: 20 * time.Millisecond})
			L := b.local.Tokens() // the local bucket starts full
			type held struct {
				ctx    context.Context
				cancel func()
			}
			var mu sync.Mutex
			var heldTokens []held
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						var ctx context.Context
						cancel := func() {}
						switch (w + i) % 4 {
						case 0:
							ctx = bg
						case 1:
							ctx, cancel = context.WithCancel(bg)
						case 2:
							ctx, cancel = context.WithTimeout(bg, time.Hour)
						case 3:
							c, cc := context.WithCancel(bg)
							cc()
							ctx = context.WithoutCancel(c)
						}
						ok := b.Withdraw(ctx)
						if ok {
							mu.Lock()
							heldTokens = append(heldTokens, held{ctx, cancel})
							mu.Unlock()
						} else {
							cancel()
						}
						time.Sleep(5 * time.Millisecond)
					}
				}()
			}
			count := func() int {
				mu.Lock()
				defer mu.Unlock()
				return len(heldTokens)
			}
			eventually(t, "tokens from the shared bucket", func() bool { return count() >= 20 })
			switch mode {
			case "killed and restarted":
				srv.Kill()
			case "frozen and thawed":
				srv.Freeze()
			default:
				if _, err := sentinel.KillPrimary(); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "tokens from the local bucket", func() bool { return b.local.Tokens() < L })
			switch mode {
			case "killed and restarted":
				srv.Restart(t)
			case "frozen and thawed":
				srv.Thaw()
			}
			eventually(t, "shared again", func() bool { return b.State() == Shared })
			before := count()
			eventually(t, "tokens from the shared bucket again", func() bool { return count() >= before+20 })
			close(stop)
			wg.Wait()
			// Drain the shared bucket. A pooled connection to the killed
			// server may still fail a call and send the Budget back to its
			// local bucket for a while: the tokens the drain took from the
			// local bucket are given back, and the drain goes on.
			drained := 0
			for {
				eventually(t, "shared", func() bool { return b.State() == Shared })
				l0 := b.local.Tokens()
				drained += drain(t, b)
				l1 := b.local.Tokens()
				for range int(l0 - l1) {
					b.Refund()
				}
				if l1 == l0 && b.State() == Shared {
					break
				}
			}
			localOut := L - b.local.Tokens()
			if localOut == 0 || drained == 0 {
				t.Fatalf("%v local tokens out, %d drained from the shared bucket; want the run to have used both", localOut, drained)
			}
			// Refund all: half with their context ended just before.
			for i, h := range heldTokens {
				if i%2 == 0 {
					h.cancel()
				}
				b.Refund()
			}
			if err := b.Flush(bg); err != nil {
				t.Fatal(err)
			}
			shared := tokens(t, b)
			wantShared := min(float64(len(heldTokens))-localOut, capacity)
			if got := b.local.Tokens(); got != L {
				t.Errorf("local tokens after every refund = %v; want %v, full again (%v were out)", got, L, localOut)
			}
			if shared != wantShared {
				t.Errorf("shared tokens after %d refunds = %v; want %v: those it gave, not the %v local ones", len(heldTokens), shared, wantShared, localOut)
			}
			for _, h := range heldTokens {
				h.cancel()
			}
		})
	}
}
