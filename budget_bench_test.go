package httpretry

import (
	"context"
	"testing"
)

// budgetLoads are the two ways a Transport uses its budget. "deposit" is a
// healthy service: every operation deposits into a full bucket and none
// retries. "deposit_withdraw" is an outage: every operation deposits and
// asks for a retry, so the bucket runs dry and both calls contend on it.
var budgetLoads = []struct {
	name string
	op   func(*TokenBucket)
}{
	{"deposit", func(b *TokenBucket) { b.Deposit() }},
	{"deposit_withdraw", func(b *TokenBucket) { b.Deposit(); b.Withdraw(context.Background()) }},
}

// BenchmarkBudgetSerial is the uncontended cost of one operation's budget
// calls, the reference for BenchmarkBudgetParallel.
func BenchmarkBudgetSerial(b *testing.B) {
	for _, l := range budgetLoads {
		b.Run(l.name, func(b *testing.B) {
			bucket := NewTokenBucket(20, 0.1)
			b.ReportAllocs()
			for b.Loop() {
				l.op(bucket)
			}
		})
	}
}

// BenchmarkBudgetParallel runs the same calls from every P at once on one
// bucket, as the operations of one Transport do. Its ns/op is wall time
// per operation across all goroutines: with GOMAXPROCS=2 it should stay
// at or below the serial cost, not grow with contention.
func BenchmarkBudgetParallel(b *testing.B) {
	for _, l := range budgetLoads {
		b.Run(l.name, func(b *testing.B) {
			bucket := NewTokenBucket(20, 0.1)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l.op(bucket)
				}
			})
		})
	}
}
