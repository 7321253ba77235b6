package bench

import (
	"errors"
	"fmt"
)

// ErrBadChunk reports malformed chunked transfer coding.
var ErrBadChunk = errors.New("bench: malformed chunked encoding")

// bodyMode says how a response body is delimited (RFC 9112 §6.3).
type bodyMode uint8

const (
	bodyNone    bodyMode = iota // no body (e.g. 204)
	bodyLength                  // Content-Length bytes
	bodyChunked                 // Transfer-Encoding: chunked
	bodyClose                   // until the server closes the connection
)

// chunkState is the state of the chunked decoder.
type chunkState uint8

const (
	stateChunkSize    chunkState = iota // hex digits of a chunk size
	stateChunkExt                       // chunk extension, skipped to LF
	stateChunkData                      // chunk payload
	stateChunkDataCR                    // CR after the payload
	stateChunkDataLF                    // LF after the payload
	stateTrailerStart                   // start of a trailer line (or the final blank line)
	stateTrailerLine                    // inside a trailer field, skipped to LF
	stateBodyDone                       // the body is complete
)

// maxChunkSizeDigits bounds the hex size of one chunk: 15 digits keep the
// size below 2^60, so it cannot overflow int64.
const maxChunkSizeDigits = 15

// bodyDecoder delimits one response body in a stream of bytes and yields its
// payload segments. Zero value is not ready: call start.
type bodyDecoder struct {
	mode      bodyMode
	state     chunkState
	remaining int64 // bytes left: of the body (bodyLength) or of the chunk
	digits    int
}

func (d *bodyDecoder) start(mode bodyMode, length int64) {
	*d = bodyDecoder{mode: mode, remaining: length}
	if mode == bodyNone || (mode == bodyLength && length == 0) {
		d.state = stateBodyDone
	}
}

// done reports whether the whole body has been seen.
func (d *bodyDecoder) done() bool { return d.state == stateBodyDone }

// next consumes bytes of p and returns a payload segment (a slice of p, maybe
// empty) and how many bytes it consumed. Bytes after the end of the body are
// not consumed. Call repeatedly until p is used up or done().
func (d *bodyDecoder) next(p []byte) (seg []byte, n int, err error) {
	switch d.mode {
	case bodyClose:
		return p, len(p), nil
	case bodyLength:
		n = int(min(int64(len(p)), d.remaining))
		d.remaining -= int64(n)
		if d.remaining == 0 {
			d.state = stateBodyDone
		}
		return p[:n], n, nil
	case bodyNone:
		return nil, 0, nil
	}
	for n < len(p) {
		c := p[n]
		switch d.state {
		case stateChunkSize:
			switch {
			case c == '\r':
			case c == '\n':
				if d.digits == 0 {
					return nil, n, fmt.Errorf("%w: empty chunk size", ErrBadChunk)
				}
				d.digits = 0
				if d.remaining == 0 {
					d.state = stateTrailerStart
				} else {
					d.state = stateChunkData
				}
			case c == ';' || c == ' ' || c == '\t':
				d.state = stateChunkExt
			default:
				v := unhex(c)
				if v < 0 {
					return nil, n, fmt.Errorf("%w: byte %q in chunk size", ErrBadChunk, c)
				}
				if d.digits++; d.digits > maxChunkSizeDigits {
					return nil, n, fmt.Errorf("%w: chunk size too long", ErrBadChunk)
				}
				d.remaining = d.remaining<<4 | int64(v)
			}
			n++
		case stateChunkExt:
			if c == '\n' {
				d.state = stateChunkSize
				continue // let stateChunkSize finish the line
			}
			n++
		case stateChunkData:
			k := int(min(int64(len(p)-n), d.remaining))
			seg = p[n : n+k]
			n += k
			d.remaining -= int64(k)
			if d.remaining == 0 {
				d.state = stateChunkDataCR
			}
			return seg, n, nil
		case stateChunkDataCR:
			switch c {
			case '\r':
				d.state = stateChunkDataLF
			case '\n': // tolerate a bare LF
				d.state = stateChunkSize
			default:
				return nil, n, fmt.Errorf("%w: no CRLF after chunk data", ErrBadChunk)
			}
			n++
		case stateChunkDataLF:
			if c != '\n' {
				return nil, n, fmt.Errorf("%w: no LF after chunk data", ErrBadChunk)
			}
			d.state = stateChunkSize
			n++
		case stateTrailerStart:
			switch c {
			case '\r':
			case '\n':
				d.state = stateBodyDone
				return nil, n + 1, nil
			default:
				d.state = stateTrailerLine
			}
			n++
		case stateTrailerLine:
			if c == '\n' {
				d.state = stateTrailerStart
			}
			n++
		case stateBodyDone:
			return nil, n, nil
		}
	}
	return nil, n, nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
