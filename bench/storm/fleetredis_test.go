package main

import (
	"context"
	"regexp"
	"runtime"
	"testing"
	"time"
)

// TestRedisFleetSharesOneBudget runs three processes through an outage,
// first with a budget each, then with one budget in Redis, and checks the
// server's counts against what each may send.
func TestRedisFleetSharesOneBudget(t *testing.T) {
	rs, err := startRedis()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.close()
	goroutines := runtime.NumGoroutine() // the server's waiter included
	cfg := tiny()
	cfg.deadline = 2500 * time.Millisecond // every operation makes all the attempts its budget allows
	phases := []phase{{name: "outage", dur: 500 * time.Millisecond, mode: outage}}
	arr := arrivals(cfg.seed, cfg.rate, phases)
	ops := int64(len(arr))
	if ops < 40 {
		t.Fatalf("only %d arrivals; the check needs each process to want over 20 retries", ops)
	}
	const processes = 3

	each := runOne(context.Background(), cfg, "fleet", phases, arr, policyByKey("httpretry"), processes)
	st := &redisStats{}
	// A per-call limit no loaded machine reaches: this test is about the
	// shared count, not about falling back.
	shared := runOne(context.Background(), cfg, "fleet", phases, arr, redisPolicy(rs, "test:fleet", processes, st, time.Minute), processes)
	shared.redis = st
	checkGoroutines(t, goroutines)

	// Each process wants two retries for each of its operations, more
	// than its 20 tokens: three buckets give at least 60.
	if got, least := each.hits, ops+60; got < least || got > least+ops/10 {
		t.Errorf("a budget each: %d hits; want between %d and %d", got, least, least+ops/10)
	}
	// One bucket of 20 (plus 0.1 per operation, mostly lost to the full
	// bucket) bounds the whole fleet's retries.
	if got, most := shared.hits, ops+20+ops/10; got > most || got < ops+20 {
		t.Errorf("one budget in Redis: %d hits; want between %d and %d", got, ops+20, most)
	}
	s := st.summary(shared)
	if s.withdrawals < 20 {
		t.Errorf("%d Withdraw calls; want at least 20", s.withdrawals)
	}
	// At most one script per Withdraw, and far fewer: refusals are
	// remembered and grants leased.
	if s.withdrawRTs > s.withdrawals/2 {
		t.Errorf("%d scripts for %d withdrawals; want at most half", s.withdrawRTs, s.withdrawals)
	}
	if s.stateChanges != 0 {
		t.Errorf("%d state changes; want 0: Redis was up throughout", s.stateChanges)
	}
	if int64(s.added.n) != ops {
		t.Errorf("added latency recorded for %d failed operations; want %d", s.added.n, ops)
	}
	if line, want := redisLine(shared), regexp.MustCompile(`^fleet-redis: P=3 amplification \d+\.\d\dx, \d+\.\d\d Redis commands per failing operation$`); !want.MatchString(line) {
		t.Errorf("line = %q; want it to match %v", line, want)
	}
}
