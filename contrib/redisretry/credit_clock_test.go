package redisretry

import (
	"context"
	"testing"
	"time"
)

// Expected: credit held while the bucket is empty reaches Redis within maxCreditHold of real time, even after the wall clock steps back.
func TestCreditHeldAtMostMaxCreditHoldWhenTheClockStepsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, clk, c := clockedBudget(t, "credit-clock-back", 1, 0.1, Options{RefusalMemory: time.Second, FlushInterval: time.Hour, CallTimeout: patient})
	drain(t, b)
	eventually(t, "the announcement heard", func() bool { return b.heard.Load() == 1 })
	c.calls() // the drain's
	clk.Advance(time.Second)
	b.Deposit()
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(-time.Hour) // the wall clock is set back an hour
	for range 4 {
		clk.Advance(maxCreditHold / 2)
		if err := b.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.calls(); got != 1 {
		t.Fatalf("%d calls over 2×maxCreditHold of flushes after the clock stepped back; want 1 (the credit sent)", got)
	}
	if got := tokens(t, b); got != 0.1 {
		t.Fatalf("tokens = %v; want 0.1", got)
	}
}
