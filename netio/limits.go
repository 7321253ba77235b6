package netio

import (
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Running out of file descriptors must never stop the server: the
// acceptor refuses what it cannot hold (accept.go). --max-connections is
// then an operator's cap, not a guard: by default it is RLIMIT_NOFILE minus
// a small fixed reserve for everything but client connections, and a
// connection beyond it is answered at once with a canned 503 and closed.

// DefaultRetryAfter is what a request refused for overload is told to wait
// before retrying: about one engine step for a slot to free at typical
// output lengths is far less, but retrying sooner than a second mostly
// adds load to a full server. Override with Options.RetryAfter
// (--retry-after).
const DefaultRetryAfter = time.Second

// fdReserve is the number of descriptors kept below the process limit for
// everything but client connections: the listener and the acceptor's
// spare, gnet's epoll and event descriptors (two per loop plus two), the
// doorbells and the nudge timers (two each per loop), Go's netpoller,
// logs, the profiler and metrics listeners, the engine's files, and the
// descriptors gnet dups while it takes connections over. 256 covers that
// with room for dozens of loops.
const fdReserve = 256

// DefaultMaxConnections is the process's open-file limit (RLIMIT_NOFILE,
// soft; Go raises it to the hard limit at start) minus fdReserve (at most
// half the limit). With a limit of 20,000 that is 19,744. Safe for
// concurrent use.
func DefaultMaxConnections() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY || rl.Cur > 1<<30 {
		return 1 << 20
	}
	limit := int(rl.Cur)
	// The reserve never takes more than half of a small limit.
	return max(1, limit-min(fdReserve, limit/2))
}

// busyResponse answers a connection the acceptor refuses (over
// --max-connections, out of descriptors, or accepted while draining)
// before it sent anything.
var busyResponse = func() []byte {
	const body = `{"error":{"message":"Too many connections; retry later.","type":"server_error","code":null}}`
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nRetry-After: 1\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()
