package labels

// Bucket boundaries of the histograms, in seconds, for both adapters, so
// that they report the same distributions.
var (
	// DurationBuckets suit whole operations and single attempts: 5 ms to
	// 100 s, since a Timeout or a honoured Retry-After can exceed 30 s.
	DurationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 100}
	// WaitBuckets start at 0 so that operations without a retry (the
	// usual case) fall in their own bucket, and reach 100 s for long
	// Retry-After values.
	WaitBuckets = []float64{0, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 100}
	// PhaseBuckets suit connection phases: 1 ms to 2.5 s.
	PhaseBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
)

// MaxAttemptBuckets bounds the buckets of the attempts-per-operation
// histogram.
const MaxAttemptBuckets = 100

// AttemptBuckets returns the boundaries 1, 2, …, n of the
// attempts-per-operation histogram.
func AttemptBuckets(n int) []float64 {
	b := make([]float64, n)
	for i := range b {
		b[i] = float64(i + 1)
	}
	return b
}
