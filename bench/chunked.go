package bench

import (
	"errors"
	"math"

	"github.com/vajra-go/vajra/httpparse"
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

// responseLimits bound a chunked response: a stream's body is as long as
// the run makes it, so only the grammar, the extensions and the framing
// overhead are held to the server's defaults.
var responseLimits = httpparse.Limits{MaxBody: math.MaxInt64}

// bodyDecoder delimits one response body in a stream of bytes and yields its
// payload segments; a chunked body is decoded by httpparse's ChunkedDecoder,
// the server's own decoder of chunked requests. Zero value is not ready:
// call start.
type bodyDecoder struct {
	mode      bodyMode
	remaining int64 // bodyLength: bytes left
	finished  bool
	chunked   httpparse.ChunkedDecoder
}

func (d *bodyDecoder) start(mode bodyMode, length int64) {
	d.mode, d.remaining = mode, length
	d.finished = mode == bodyNone || (mode == bodyLength && length == 0)
	if mode == bodyChunked {
		d.chunked.Reset(responseLimits)
	}
}

// done reports whether the whole body has been seen.
func (d *bodyDecoder) done() bool { return d.finished }

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
		d.finished = d.remaining == 0
		return p[:n], n, nil
	case bodyNone:
		return nil, 0, nil
	}
	if d.chunked.Last() {
		n, err = d.chunked.SkipTrailers(p)
		d.finished = d.chunked.Done()
	} else {
		seg, n, err = d.chunked.Decode(p)
	}
	if err != nil {
		return nil, n, errors.Join(ErrBadChunk, err)
	}
	return seg, n, nil
}
