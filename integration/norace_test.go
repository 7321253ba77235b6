//go:build !race

package integration_test

const raceEnabled = false
