package storetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/httpretry/httpretry/idempotency/storetest"
	"github.com/httpretry/httpretry/internal/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.Main(m)
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

// cStringStore is a store that, like one keyed by C strings, loses
// everything from a key's first NUL byte: it cannot hold scoped keys.
type cStringStore struct{ *idempotency.MemoryStore }

func cut(key string) string {
	if i := strings.IndexByte(key, 0); i >= 0 {
		return key[:i]
	}
	return key
}

func (s cStringStore) Reserve(ctx context.Context, key, fp string, ttl time.Duration) (idempotency.Reservation, error) {
	return s.MemoryStore.Reserve(ctx, cut(key), fp, ttl)
}

func (s cStringStore) Complete(ctx context.Context, key string, token idempotency.Token, resp *idempotency.Response, ttl time.Duration) error {
	return s.MemoryStore.Complete(ctx, cut(key), token, resp, ttl)
}

func (s cStringStore) Release(ctx context.Context, key string, token idempotency.Token) error {
	return s.MemoryStore.Release(ctx, cut(key), token)
}

// TestScopedKeysCatchAStoreThatCutsAtNUL runs the suite, in a child test
// process, against a store that cannot hold the NUL-joined keys the
// Handler sends when KeyScope is set: the scoped_keys case fails it.
func TestScopedKeysCatchAStoreThatCutsAtNUL(t *testing.T) {
	if os.Getenv("STORETEST_CHILD") == "cstring" {
		storetest.RunWithClock(t, func(t *testing.T) (idempotency.Store, func(time.Duration)) {
			fc := clockwork.NewFakeClock()
			return cStringStore{idempotency.NewMemoryStore(idempotency.MemoryOptions{Clock: fc})}, fc.Advance
		})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestScopedKeysCatchAStoreThatCutsAtNUL$", "-test.v")
	cmd.Env = append(os.Environ(), "STORETEST_CHILD=cstring")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("suite against a store that cuts keys at NUL: err = %v, want a failing test process\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- FAIL: TestScopedKeysCatchAStoreThatCutsAtNUL/scoped_keys") {
		t.Fatalf("the scoped_keys case did not fail:\n%s", out)
	}
	if strings.Contains(string(out), "--- FAIL: TestScopedKeysCatchAStoreThatCutsAtNUL/keys_are_independent") {
		t.Fatalf("a case without scoped keys failed too:\n%s", out)
	}
}
