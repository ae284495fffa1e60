package pgidempotency

import (
	"testing"

	"github.com/httpretry/httpretry/idempotency"
	"github.com/httpretry/httpretry/idempotency/storetest"
)

// TestStoreConformsToTheStoreContract runs the Store contract's suite
// against a real PostgreSQL server, in real time: every deadline is the
// database's.
func TestStoreConformsToTheStoreContract(t *testing.T) {
	s, _ := newStore(t, Options{})
	storetest.Run(t, func(t *testing.T) idempotency.Store { return s })
}
