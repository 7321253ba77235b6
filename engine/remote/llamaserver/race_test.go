//go:build race

package llamaserver

const raceEnabled = true
