//go:build unix

package pgtest

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"
)

const (
	stopSignal = syscall.SIGSTOP
	contSignal = syscall.SIGCONT
)

// signalAll sends sig to the processes pids.
func signalAll(sig syscall.Signal, pids ...string) error {
	for _, p := range pids {
		pid, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("pgtest: pid %q: %w", p, err)
		}
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("pgtest: signal %v to %d: %w", sig, pid, err)
		}
	}
	return nil
}
