//go:build race

package httpretry

// raceEnabled is set under the race detector, which makes sync.Pool drop
// items at random: allocation counts of code using a pool then vary.
const raceEnabled = true
