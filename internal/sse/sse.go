// Package sse reads text/event-stream bodies (WHATWG HTML §9.2.6)
// incrementally, as bytes arrive: the one SSE reader of the tree, used by
// the load generator (bench), by the llama-server client
// (engine/remote/llamaserver) and by the tests' wiretest.SSEEvents.
package sse

import (
	"bytes"
	"errors"
	"fmt"
)

// MaxEventBytes bounds one SSE event (its data lines together, or one line
// that spans reads). 1 MiB is far above any token event; a larger event means
// a broken or hostile server, and the stream is failed with ErrEventTooLarge.
const MaxEventBytes = 1 << 20

// maxEventName bounds the `event:` field; longer names are truncated (no
// dialect has a type name near 64 bytes).
const maxEventName = 64

// ErrEventTooLarge is returned by Reader.Feed when an event or a line
// exceeds MaxEventBytes.
var ErrEventTooLarge = errors.New("sse: event too large")

// Handler receives dispatched SSE events. name is the `event:` field
// (empty when absent) and data the joined `data:` lines; both are valid only
// during the call.
type Handler interface {
	OnEvent(name, data []byte)
}

// Reader splits a text/event-stream body into events incrementally, as
// bytes arrive (WHATWG HTML §9.2.6). Lines end in LF or CRLF; a bare CR is
// not a line end (no dialect sends one, see WIRE.md). Comments (`:`) and the
// id and retry fields are ignored.
//
// Zero-copy on the common path: when an event's single data line lies whole
// in the bytes given to Feed, the handler sees a slice of them. A line that
// spans two Feed calls is copied once into a scratch buffer, and so is a
// pending event's data at the end of a Feed (the caller reuses its buffer).
// Not safe for concurrent use; Reset keeps capacity.
type Reader struct {
	carry   []byte // partial line left by the previous Feed
	name    [maxEventName]byte
	nameLen int
	inline  []byte // single data line, a slice of the current Feed input
	scratch []byte // data copied out of the input
	state   uint8
}

const (
	sseNoData  uint8 = iota // no data line yet in this event
	sseInline               // data is inline (a slice of the input)
	sseScratch              // data is in scratch
)

// Reset clears all state, keeping buffers.
func (r *Reader) Reset() {
	r.carry = r.carry[:0]
	r.nameLen = 0
	r.inline = nil
	r.scratch = r.scratch[:0]
	r.state = sseNoData
}

// Pending reports whether bytes of an unfinished line or event are held: at
// the end of a stream that means the last event was truncated.
func (r *Reader) Pending() bool {
	return len(r.carry) > 0 || r.state != sseNoData
}

// Feed parses p and calls h for every event completed in it. p may be reused
// by the caller once Feed returns.
func (r *Reader) Feed(p []byte, h Handler) error {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(r.carry)+len(p) > MaxEventBytes {
				return fmt.Errorf("%w: line over %d bytes", ErrEventTooLarge, MaxEventBytes)
			}
			r.carry = append(r.carry, p...)
			break
		}
		var err error
		if len(r.carry) > 0 {
			// The line began in an earlier Feed: finish it in carry.
			if len(r.carry)+i > MaxEventBytes {
				return fmt.Errorf("%w: line over %d bytes", ErrEventTooLarge, MaxEventBytes)
			}
			r.carry = append(r.carry, p[:i]...)
			err = r.line(r.carry, true, h)
			r.carry = r.carry[:0]
		} else {
			err = r.line(p[:i], false, h)
		}
		if err != nil {
			return err
		}
		p = p[i+1:]
	}
	if r.state == sseInline {
		// The caller will reuse p: keep the pending data.
		r.scratch = append(r.scratch[:0], r.inline...)
		r.inline = nil
		r.state = sseScratch
	}
	return nil
}

// line handles one line without its LF. copied says the line lives in carry
// (and so must not be kept inline).
func (r *Reader) line(l []byte, copied bool, h Handler) error {
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	if len(l) == 0 {
		r.dispatch(h)
		return nil
	}
	if l[0] == ':' {
		return nil // comment, e.g. a keep-alive
	}
	field, value := l, l[:0]
	if c := bytes.IndexByte(l, ':'); c >= 0 {
		field, value = l[:c], l[c+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) { // no allocation: the compiler special-cases this
	case "data":
		switch r.state {
		case sseNoData:
			if copied {
				r.scratch = append(r.scratch[:0], value...)
				r.state = sseScratch
			} else {
				r.inline = value
				r.state = sseInline
			}
		case sseInline:
			r.scratch = append(r.scratch[:0], r.inline...)
			r.inline = nil
			r.state = sseScratch
			fallthrough
		case sseScratch:
			if len(r.scratch)+1+len(value) > MaxEventBytes {
				return fmt.Errorf("%w: data over %d bytes", ErrEventTooLarge, MaxEventBytes)
			}
			r.scratch = append(r.scratch, '\n')
			r.scratch = append(r.scratch, value...)
		}
	case "event":
		r.nameLen = copy(r.name[:], value)
	}
	return nil
}

func (r *Reader) dispatch(h Handler) {
	var data []byte
	switch r.state {
	case sseNoData:
		r.nameLen = 0 // an event without data is not dispatched
		return
	case sseInline:
		data = r.inline
	case sseScratch:
		data = r.scratch
	}
	h.OnEvent(r.name[:r.nameLen], data)
	r.nameLen = 0
	r.inline = nil
	r.scratch = r.scratch[:0]
	r.state = sseNoData
}
