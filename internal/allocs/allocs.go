// Package allocs counts the heap allocations of a piece of work, for the
// tests that bound what a streamed token allocates.
package allocs

import "runtime"

// Fewest runs f three times, each after a collection, and returns the
// fewest heap allocations the process made during one run.
// runtime.MemStats counts the whole process: on a loaded machine the
// runtime allocates now and then on its own (a profile with
// MemProfileRate 1 shows a few at a channel receive where a goroutine
// parks), which only ever adds to the work's own count, so the fewest is
// the work's.
func Fewest(f func()) uint64 {
	fewest := ^uint64(0)
	for range 3 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		fewest = min(fewest, after.Mallocs-before.Mallocs)
	}
	return fewest
}
