package netio

import (
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Running out of file descriptors must never stop the server. gnet v2.9.7
// accepts on its main reactor (acceptor_unix.go, accept0): any accept(2)
// error other than EAGAIN, EINTR, ECONNRESET and ECONNABORTED (so EMFILE
// and ENFILE) returns errors.ErrAcceptSocket, which ends the reactor's
// Polling loop, and the reactor then shuts the whole engine down: every
// connection closes and gnet.Run returns. Accept must therefore never get
// there, and Vajra has no hook inside gnet's accept loop to keep a spare
// descriptor the way nginx and libuv do.
//
// So Vajra bounds connections below the limit: --max-connections defaults
// to RLIMIT_NOFILE minus a reserve, and a connection beyond the bound is
// answered at once with a canned 503 and closed in OnOpen. The reserve
// covers what else holds descriptors (listener, epoll and event fds,
// doorbells, logs) and the connections gnet accepts in one burst before
// any OnOpen runs: accept0 drains the whole accept queue, handing each
// connection to a loop asynchronously, so up to the listen backlog
// (net.core.somaxconn) can be open beyond the count OnOpen sees.

// DefaultRetryAfter is what a request refused for overload is told to wait
// before retrying: about one engine step for a slot to free at typical
// output lengths is far less, but retrying sooner than a second mostly
// adds load to a full server. Override with Options.RetryAfter
// (--retry-after).
const DefaultRetryAfter = time.Second

// fdReserve is the minimum of descriptors kept free below the process
// limit for everything but client connections.
const fdReserve = 256

// DefaultMaxConnections is the process's open-file limit (RLIMIT_NOFILE,
// soft; Go raises it to the hard limit at start) minus a reserve of
// fdReserve plus the listen backlog (at most half the limit). With the
// usual limits (20,000 here, somaxconn 4096) that is 15,648. Safe for
// concurrent use.
func DefaultMaxConnections() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY || rl.Cur > 1<<30 {
		return 1 << 20
	}
	limit := int(rl.Cur)
	// The reserve never takes more than half of a small limit.
	return max(1, limit-min(fdReserve+listenBacklog(), limit/2))
}

// listenBacklog is the kernel's cap on a listener's accept queue, which
// bounds how many connections gnet may accept in one burst.
func listenBacklog() int {
	b, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if err != nil {
		return unix.SOMAXCONN
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return unix.SOMAXCONN
	}
	return n
}

// busyResponse answers a connection over --max-connections (or one
// accepted while draining) before it sent anything.
var busyResponse = func() []byte {
	const body = `{"error":{"message":"Too many connections; retry later.","type":"server_error","code":null}}`
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nRetry-After: 1\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

// refused is the context of a connection closed in OnOpen.
type refused struct{}
