//go:build !race

package desttable

// raceEnabled is set under the race detector, whose bookkeeping makes
// allocation counts vary.
const raceEnabled = false
