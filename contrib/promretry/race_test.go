//go:build race

package promretry

// raceEnabled is set under the race detector, which makes sync.Pool drop
// items at random: allocation counts of code using a pool then vary.
const raceEnabled = true
