// Package zmtp speaks ZeroMQ's wire protocol, ZMTP 3.x with the NULL
// security mechanism, on connections that Vajra accepts: the listening
// side of vLLM's engine-core sockets (ROUTER for the handshake, ROUTER for
// requests, PULL for outputs), whose peers are libzmq DEALER and PUSH
// sockets inside the engine.
//
// It is deliberately small: one Conn is one peer, so a ROUTER is a set of
// Conns keyed by the peer's identity (kept by the caller), and a PULL is
// one Conn read on one goroutine. Owning the wire, rather than wrapping
// libzmq, gives what vLLM's protocol needs and a socket library hides: a
// peer that disappears (a killed engine, which sends nothing) is a read
// error on its own connection at once, and a received message lands in a
// buffer the reader reuses, so the output path allocates nothing per
// message. docs/architecture.md ("vLLM's engine core") has the figures.
//
// Not supported (vLLM does not use them on these sockets): CURVE and PLAIN
// security, ZMTP 1.0/2.0 peers, PUB/SUB subscriptions. PING commands
// (ZMTP 3.1 heartbeats) are answered with PONG.
package zmtp

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

var (
	// ErrProtocol reports a peer that broke ZMTP (a bad greeting, a frame
	// too large, a command out of place).
	ErrProtocol = errors.New("zmtp: protocol error")
	// ErrEndpoint reports an endpoint that is not tcp://HOST:PORT or
	// ipc://PATH.
	ErrEndpoint = errors.New("zmtp: bad endpoint")
)

// MaxFrame caps one frame's size (a corrupt length must not make the
// reader allocate without bound).
const MaxFrame = 1 << 30

// Listen binds endpoint, tcp://HOST:PORT or ipc:///PATH, as libzmq's bind
// does. An ipc path left by a dead process is removed first.
func Listen(endpoint string) (net.Listener, error) {
	network, addr, err := Split(endpoint)
	if err != nil {
		return nil, err
	}
	if network == "unix" {
		if fi, err := os.Stat(addr); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(addr)
		}
	}
	return net.Listen(network, addr)
}

// Split turns a ZeroMQ endpoint into a net network and address.
func Split(endpoint string) (network, addr string, err error) {
	switch {
	case strings.HasPrefix(endpoint, "tcp://"):
		return "tcp", endpoint[len("tcp://"):], nil
	case strings.HasPrefix(endpoint, "ipc://"):
		return "unix", endpoint[len("ipc://"):], nil
	}
	return "", "", fmt.Errorf("%w: %q (want tcp://HOST:PORT or ipc://PATH)", ErrEndpoint, endpoint)
}

// Endpoint is the ZeroMQ endpoint of a listener's address.
func Endpoint(a net.Addr) string {
	if a.Network() == "unix" {
		return "ipc://" + a.String()
	}
	return "tcp://" + a.String()
}

// Conn is one ZMTP connection. Reads are for one goroutine; WriteMsg is
// safe for concurrent use.
type Conn struct {
	nc net.Conn
	r  *bufio.Reader

	// PeerType is the peer's Socket-Type ("DEALER", "PUSH"); Identity its
	// routing id (libzmq sends it when the peer set ZMQ_ROUTING_ID).
	PeerType string
	Identity []byte

	wmu  sync.Mutex
	wbuf []byte

	// buf holds the frames of the last message read; frames the slices
	// into it that ReadMsg returns.
	buf    []byte
	frames [][]byte
	ends   []int
}

// Server runs the ZMTP greeting and handshake on nc as the accepting side
// of a socket of type sockType ("ROUTER", "PULL"), within timeout.
func Server(nc net.Conn, sockType string, timeout time.Duration) (*Conn, error) {
	return handshake(nc, sockType, true, timeout)
}

// Client runs the greeting and handshake on nc as the connecting side
// (the engine's role; tests and fakes use it).
func Client(nc net.Conn, sockType string, identity []byte, timeout time.Duration) (*Conn, error) {
	c, err := handshakeID(nc, sockType, false, identity, timeout)
	return c, err
}

func handshake(nc net.Conn, sockType string, server bool, timeout time.Duration) (*Conn, error) {
	return handshakeID(nc, sockType, server, nil, timeout)
}

func handshakeID(nc net.Conn, sockType string, server bool, identity []byte, timeout time.Duration) (*Conn, error) {
	if timeout > 0 {
		nc.SetDeadline(time.Now().Add(timeout))
		defer nc.SetDeadline(time.Time{})
	}
	c := &Conn{nc: nc, r: bufio.NewReaderSize(nc, 64<<10)}
	var g [64]byte
	g[0] = 0xff
	g[9] = 0x7f
	g[10] = 3 // version 3.0
	g[11] = 0
	copy(g[12:32], "NULL")
	if server {
		g[32] = 1
	}
	if _, err := nc.Write(g[:]); err != nil {
		return nil, err
	}
	var pg [64]byte
	if _, err := io.ReadFull(c.r, pg[:]); err != nil {
		return nil, err
	}
	if pg[0] != 0xff || pg[9]&1 != 1 || pg[10] < 3 {
		return nil, fmt.Errorf("%w: greeting of ZMTP %d.%d (want 3.x)", ErrProtocol, pg[10], pg[11])
	}
	if mech := strings.TrimRight(string(pg[12:32]), "\x00"); mech != "NULL" {
		return nil, fmt.Errorf("%w: security mechanism %q (want NULL)", ErrProtocol, mech)
	}
	// READY command with our properties.
	body := make([]byte, 0, 64)
	body = append(body, 5)
	body = append(body, "READY"...)
	body = appendProp(body, "Socket-Type", []byte(sockType))
	if identity != nil {
		body = appendProp(body, "Identity", identity)
	}
	if err := c.writeFrame(body, 0x04); err != nil {
		return nil, err
	}
	flags, cmd, err := c.readFrame(nil)
	if err != nil {
		return nil, err
	}
	if flags&0x04 == 0 || len(cmd) < 6 || int(cmd[0]) != 5 || string(cmd[1:6]) != "READY" {
		return nil, fmt.Errorf("%w: first command is not READY", ErrProtocol)
	}
	props := cmd[6:]
	for len(props) > 0 {
		n := int(props[0])
		if len(props) < 1+n+4 {
			return nil, fmt.Errorf("%w: truncated READY property", ErrProtocol)
		}
		name := string(props[1 : 1+n])
		vl := int(binary.BigEndian.Uint32(props[1+n:]))
		props = props[1+n+4:]
		if vl > len(props) {
			return nil, fmt.Errorf("%w: truncated READY property %s", ErrProtocol, name)
		}
		v := props[:vl]
		props = props[vl:]
		switch strings.ToLower(name) {
		case "socket-type":
			c.PeerType = string(v)
		case "identity":
			c.Identity = append([]byte(nil), v...)
		}
	}
	return c, nil
}

func appendProp(b []byte, name string, v []byte) []byte {
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

func (c *Conn) writeFrame(body []byte, flags byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf = appendFrame(c.wbuf[:0], body, flags)
	_, err := c.nc.Write(c.wbuf)
	return err
}

func appendFrame(b, body []byte, flags byte) []byte {
	if len(body) > 255 {
		b = append(b, flags|0x02)
		b = binary.BigEndian.AppendUint64(b, uint64(len(body)))
	} else {
		b = append(b, flags, byte(len(body)))
	}
	return append(b, body...)
}

// readFrame reads one frame, appending its body to dst.
func (c *Conn) readFrame(dst []byte) (flags byte, out []byte, err error) {
	flags, err = c.r.ReadByte()
	if err != nil {
		return 0, dst, err
	}
	var size uint64
	if flags&0x02 != 0 {
		var s [8]byte
		if _, err = io.ReadFull(c.r, s[:]); err != nil {
			return 0, dst, err
		}
		size = binary.BigEndian.Uint64(s[:])
	} else {
		b, err := c.r.ReadByte()
		if err != nil {
			return 0, dst, err
		}
		size = uint64(b)
	}
	if flags&^0x07 != 0 || size > MaxFrame {
		return 0, dst, fmt.Errorf("%w: frame flags %#x size %d", ErrProtocol, flags, size)
	}
	n := len(dst)
	if cap(dst)-n < int(size) {
		nb := make([]byte, n, n+int(size)+n)
		copy(nb, dst)
		dst = nb
	}
	dst = dst[:n+int(size)]
	_, err = io.ReadFull(c.r, dst[n:])
	return flags, dst, err
}

// ReadMsg reads the next message and returns its frames, which are valid
// until the next ReadMsg (the Conn reuses one buffer). Commands between
// messages are handled (PING) or skipped. Not safe for concurrent use.
func (c *Conn) ReadMsg() ([][]byte, error) {
	c.buf = c.buf[:0]
	c.ends = c.ends[:0]
	for {
		flags, buf, err := c.readFrame(c.buf)
		if err != nil {
			return nil, err
		}
		if flags&0x04 != 0 {
			if len(c.ends) > 0 {
				return nil, fmt.Errorf("%w: command inside a message", ErrProtocol)
			}
			cmd := buf[len(c.buf):]
			if len(cmd) >= 5 && cmd[0] == 4 && string(cmd[1:5]) == "PING" {
				c.pong(cmd[5:])
			}
			continue
		}
		c.buf = buf
		c.ends = append(c.ends, len(buf))
		if flags&0x01 == 0 {
			break
		}
	}
	c.frames = c.frames[:0]
	start := 0
	for _, e := range c.ends {
		c.frames = append(c.frames, c.buf[start:e:e])
		start = e
	}
	return c.frames, nil
}

func (c *Conn) pong(ping []byte) {
	// PING: ttl (2 bytes), context (up to 16 bytes); PONG echoes the context.
	var body [5 + 16]byte
	n := copy(body[:], "\x04PONG")
	if len(ping) > 2 {
		n += copy(body[n:], ping[2:])
	}
	c.writeFrame(body[:n], 0x04)
}

// WriteMsg sends one message of the given frames. Safe for concurrent use.
func (c *Conn) WriteMsg(frames ...[]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf = c.wbuf[:0]
	for i, f := range frames {
		var flags byte
		if i < len(frames)-1 {
			flags = 0x01
		}
		c.wbuf = appendFrame(c.wbuf, f, flags)
	}
	_, err := c.nc.Write(c.wbuf)
	return err
}

// Close closes the connection; a blocked ReadMsg returns an error.
func (c *Conn) Close() error { return c.nc.Close() }

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// SetReadDeadline bounds the reads in flight and to come (zero: none).
func (c *Conn) SetReadDeadline(t time.Time) error { return c.nc.SetReadDeadline(t) }
