//go:build race

package cache

// raceEnabled is true under -race, where the detector's instrumentation allocates and
// allocation counts mean nothing.
const raceEnabled = true
