// Package throttleseam lets the tests of this repository's packages and
// modules reach two pieces of a [throttle.Throttle]'s state that its
// callers never need: the draw of its decisions and its counts. Package
// throttle sets the functions when it is initialized; a package that
// imports throttle can call them.
//
// [throttle.Throttle]: https://pkg.go.dev/github.com/httpretry/httpretry/throttle#Throttle
package throttleseam

var (
	// SetDraw makes th, a *throttle.Throttle, draw the number in [0, 1)
	// of each decision that may refuse from draw instead of
	// math/rand/v2's Float64 (a NaN admits). It must be
	// called before th's first use.
	SetDraw func(th any, draw func() float64)

	// Counts returns the requests and accepts th, a *throttle.Throttle,
	// counted for the destination key names over the span it decides on,
	// as of its last decision or fold; zeros for a destination it does
	// not hold.
	Counts func(th any, key string) (requests, accepts float64)
)
