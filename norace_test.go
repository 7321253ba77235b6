//go:build !race

package vajra_test

const raceEnabled = false
