//go:build race

package integration_test

// raceEnabled: the race detector allocates on its own and makes sync.Pool
// drop items at random, so the allocation tests skip under it; make test
// runs them again without it.
const raceEnabled = true
