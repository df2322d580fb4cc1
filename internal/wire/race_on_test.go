//go:build race

package wire

// raceEnabled is true under -race, where the detector's instrumentation allocates and
// allocation counts mean nothing.
const raceEnabled = true
