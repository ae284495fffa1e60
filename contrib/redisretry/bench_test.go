package redisretry

import (
	"context"
	"sync"
	"testing"
	"time"
)

// BenchmarkDeposit is the cost a Budget adds to every operation: an
// atomic add, no Redis call.
func BenchmarkDeposit(b *testing.B) {
	_, rdb := server(b)
	bud, err := NewBudget(rdb, "bench-deposit", 20, 0.1, Options{FlushInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer bud.Close()
	b.ReportAllocs()
	for b.Loop() {
		bud.Deposit()
	}
}

// BenchmarkDepositParallel is Deposit from every P at once, on one Budget.
func BenchmarkDepositParallel(b *testing.B) {
	_, rdb := server(b)
	bud, err := NewBudget(rdb, "bench-deposit-parallel", 20, 0.1, Options{FlushInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer bud.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bud.Deposit()
		}
	})
}

// BenchmarkWithdraw is 8 goroutines withdrawing from one Budget against a
// loopback redis-server: every Withdraw a round trip. It reports
// withdrawals per second and Redis round trips per withdrawal.
func BenchmarkWithdraw(b *testing.B) {
	const goroutines = 8
	_, rdb := server(b)
	var c counter
	rdb.AddHook(&c)
	// A bucket that never runs dry, a per-call limit no loaded machine
	// reaches, and no lease: the benchmark measures the round trip.
	bud, err := NewBudget(rdb, "bench-withdraw", 1e9, 0.1, perCall(Options{CallTimeout: time.Minute, FlushInterval: time.Hour}))
	if err != nil {
		b.Fatal(err)
	}
	defer bud.Close()
	bud.Withdraw(context.Background()) // load the script
	b.ReportAllocs()
	b.ResetTimer()
	start, before := time.Now(), c.n.Load()
	var wg sync.WaitGroup
	for g := range goroutines {
		n := b.N / goroutines
		if g < b.N%goroutines {
			n++
		}
		wg.Go(func() {
			for range n {
				bud.Deposit()
				if !bud.Withdraw(context.Background()) {
					b.Error("Withdraw refused")
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if s := bud.State(); s != Shared {
		b.Fatalf("state = %v; want shared", s)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "withdrawals/s")
	b.ReportMetric(float64(c.n.Load()-before)/float64(b.N), "roundtrips/retry")
}
