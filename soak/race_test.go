//go:build race

package soak

// raceEnabled is true when the test runs under the race detector.
const raceEnabled = true
