package netio

// SetRingProbe replaces the check that io_uring works here, so that tests
// can play a kernel that refuses it; the returned func restores it.
func SetRingProbe(f func() error) (restore func()) {
	old := probeRing
	probeRing = f
	return func() { probeRing = old }
}
