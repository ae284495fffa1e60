package storetest_test

import (
	"testing"
	"time"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/httpretry/httpretry/idempotency/storetest"
	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The suite's own check: the MemoryStore, which meets the contract,
// passes both ways of running it.
func TestRunWithClock(t *testing.T) {
	storetest.RunWithClock(t, func(t *testing.T) (idempotency.Store, func(time.Duration)) {
		fc := clockwork.NewFakeClock()
		return idempotency.NewMemoryStore(idempotency.MemoryOptions{Clock: fc}), fc.Advance
	})
}

func TestRun(t *testing.T) {
	start := time.Now()
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		return idempotency.NewMemoryStore(idempotency.MemoryOptions{})
	})
	// Real-time cases wait a few ShortTTLs, not ExpiryWait.
	if d := time.Since(start); d >= storetest.ExpiryWait {
		t.Fatalf("suite took %v, as long as its polling limit", d)
	}
}

// Each case gets a store of its own.
func TestRunCallsNewStorePerCase(t *testing.T) {
	var stores []idempotency.Store
	storetest.RunWithClock(t, func(t *testing.T) (idempotency.Store, func(time.Duration)) {
		fc := clockwork.NewFakeClock()
		s := idempotency.NewMemoryStore(idempotency.MemoryOptions{Clock: fc})
		stores = append(stores, s)
		return s, fc.Advance
	})
	if len(stores) < 10 {
		t.Fatalf("newStore called %d times, want one per case", len(stores))
	}
}
