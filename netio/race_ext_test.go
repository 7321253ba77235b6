//go:build race

package netio_test

// raceEnabled: allocation tests skip under the race detector, which
// allocates on its own.
const raceEnabled = true
