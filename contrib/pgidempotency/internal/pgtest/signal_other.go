//go:build !unix

package pgtest

import (
	"errors"
	"syscall"
)

const (
	stopSignal syscall.Signal = 0
	contSignal syscall.Signal = 0
)

// signalAll is unix only: PostgreSQL's tests pause a server only there.
func signalAll(syscall.Signal, ...string) error {
	return errors.New("pgtest: pausing a server needs a unix system")
}
