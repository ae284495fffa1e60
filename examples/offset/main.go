// Command offset shows how to spread periodic work over its period by a
// client's identity (a host name, a pod name, a job ID): a job run every
// period at its offset past the period's start keeps the same slot across
// runs, restarts and processes, and many identities spread uniformly over
// the period. Fresh randomness on every run spreads load as well but makes
// each run's timing different, which is hard to debug.
//
// offset is meant to be copied: httpretry does not export it, since a
// retrying Transport does not need it.
//
//	go run ./examples/offset
package main

import (
	"fmt"
	"io"
	"math/bits"
	"os"
	"time"
)

func main() {
	run(os.Stdout)
}

// run prints the slot in the hour of a few pods.
func run(w io.Writer) {
	for _, pod := range []string{"pod-1", "pod-2", "pod-3"} {
		fmt.Fprintf(w, "%s runs at %v past the hour\n", pod, offset(pod, time.Hour).Round(time.Second))
	}
}

// offset returns a stable offset in [0, period) for a client identity. A
// period that is not positive gives 0.
//
// The identity is hashed with 64-bit FNV-1a, a fixed function, whose bits
// are then mixed (the 64-bit finalizer of MurmurHash3: FNV-1a alone leaves
// identities that differ in their last byte, "pod-1" and "pod-2", close in
// the high bits) and scaled into the period by a multiplication, keeping
// its high 64 bits, without the bias of a modulo.
func offset(identity string, period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(identity); i++ {
		h ^= uint64(identity[i])
		h *= prime64
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	hi, _ := bits.Mul64(h, uint64(period))
	return time.Duration(hi)
}
