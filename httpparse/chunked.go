package httpparse

// ChunkedDecoder decodes the chunked transfer coding (RFC 9112 section 7.1)
// as its bytes arrive, without copying: each call returns the chunk data it
// reached as a slice of the bytes it was given. The request Parser decodes
// chunked request bodies with it, and a client (vajra bench) decodes chunked
// responses with it, so that both sides hold the wire to the same grammar
// and the same limits.
//
//	chunked-body   = *chunk last-chunk trailer-section CRLF
//	chunk          = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//	chunk-size     = 1*HEXDIG
//	last-chunk     = 1*("0") [ chunk-ext ] CRLF
//	chunk-ext      = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//	chunk-ext-val  = token / quoted-string
//
// Lines end with CRLF; a bare CR or LF is an error, as in the request line
// and the header section. Limits, each decided at the same byte however the
// input is split:
//   - the decoded data: at most MaxBody bytes, decided when a chunk size
//     says so (ErrBodyTooLarge);
//   - the extensions of all the chunks together: at most MaxChunkExt bytes
//     (ErrChunkExtensionTooLong);
//   - the framing (size lines without extensions, CRLFs): at most one byte
//     per decoded byte plus chunkOverheadAllowance (ErrChunkOverhead), so
//     that a peer cannot hold a buffer with millions of one-byte chunks.
//
// The decoder stops after the last-chunk line (Last reports it): the trailer
// section follows, which the request Parser parses as it parses a header
// section and a client may skip with SkipTrailers.
//
// Loop-only: a ChunkedDecoder belongs to one body and is not safe for
// concurrent use. The zero value is not ready: call Reset.
type ChunkedDecoder struct {
	maxBody     uint64
	maxChunkExt int

	state    uint8
	size     uint64 // the chunk size being read, then the chunk data left
	digits   int    // hex digits of the size read so far
	ext      int    // bytes of the current line's extensions so far
	extTotal int    // extension bytes of completed lines
	overhead int64  // framing bytes so far (size lines without extensions, CRLFs)
	decoded  uint64 // data bytes returned so far
	trailer  int    // bytes of the trailer section skipped so far
}

// The decoder's states.
const (
	chunkSize      uint8 = iota // in the hex chunk size
	chunkExtWS                  // BWS after the size or an extension; ';' expected
	chunkExtSemi                // after ';', BWS then extension name
	chunkExtName                // in an extension name
	chunkExtEqWS                // BWS after a name; '=' or ';' or CR expected
	chunkExtValWS               // after '=', BWS then value
	chunkExtToken               // in a token value
	chunkExtQuoted              // in a quoted-string value
	chunkExtPair                // after '\' in a quoted-string
	chunkExtAfterQ              // after the closing '"' of a quoted-string
	chunkSizeLF                 // CR of the chunk-size line seen, LF expected
	chunkData                   // in chunk data
	chunkDataCR                 // after chunk data, CR expected
	chunkDataLF                 // after chunk data and CR, LF expected
	chunkLast                   // the last-chunk line is complete: the trailer section follows
	chunkTrailer                // SkipTrailers: inside a trailer field line
	chunkTrailerLF              // SkipTrailers: CR of a trailer line seen, LF expected
	chunkDone                   // SkipTrailers: the final CRLF is consumed
)

// Reset readies d for a new body with limits l (zero fields mean the
// defaults; MaxBody and MaxChunkExt apply).
//
// Loop-only.
func (d *ChunkedDecoder) Reset(l Limits) {
	l = l.withDefaults()
	*d = ChunkedDecoder{maxBody: uint64(l.MaxBody), maxChunkExt: l.MaxChunkExt}
}

// Last reports whether the last-chunk line has been decoded: all the data
// has been returned and the trailer section follows.
//
// Loop-only.
func (d *ChunkedDecoder) Last() bool { return d.state >= chunkLast }

// Done reports whether SkipTrailers has consumed the whole body, through
// its final CRLF.
//
// Loop-only.
func (d *ChunkedDecoder) Done() bool { return d.state == chunkDone }

// Decoded returns the data bytes decoded so far.
//
// Loop-only.
func (d *ChunkedDecoder) Decoded() int64 { return int64(d.decoded) }

// Decode consumes buf[:n] and returns the chunk data found there, a slice of
// buf (empty when buf ends inside framing). It stops after one run of data,
// at the end of buf, after the last-chunk line (Last is then true and
// buf[n:] starts the trailer section) or at a malformed byte: then err is
// one of the package's sentinel errors and buf[n] is the byte at fault.
// Call it again with the rest of buf, and with more bytes when buf is used
// up. After an error the decoder's state is undefined: Reset it.
//
// Loop-only. Decode does not allocate.
func (d *ChunkedDecoder) Decode(buf []byte) (data []byte, n int, err error) {
	i := 0
	// In extensions, extS is where the current line's extensions began,
	// relative to buf (negative when they began in an earlier call); the
	// byte at extEnd may only be the CR that ends them. Scanning stops one
	// past it, so the budget is enforced at the same byte however the
	// input was split.
	extS := -d.ext
	defer func() {
		if d.state >= chunkExtWS && d.state <= chunkSizeLF {
			d.ext = n - extS // the line's bytes since extS, its CR included
		}
	}()
scan:
	for {
		end := len(buf)
		if inExt := d.state >= chunkExtWS && d.state <= chunkExtAfterQ; inExt {
			extEnd := extS + d.maxChunkExt - d.extTotal
			if end > extEnd+1 {
				end = extEnd + 1
			}
			if i >= end && end == extEnd+1 {
				return nil, extEnd, ErrChunkExtensionTooLong
			}
		}
		if i >= end || d.state >= chunkLast {
			return nil, i, nil
		}
		c := buf[i]
		switch d.state {
		case chunkSize:
			for {
				v := unhex[c]
				if v < 0 {
					break
				}
				// At most 16 hex digits: enough for any int64 and the
				// bound that keeps the arithmetic exact (net/http's
				// limit too).
				if d.digits == 16 {
					return nil, i, ErrChunkSize
				}
				d.digits++
				d.size = d.size<<4 | uint64(v)
				if d.size > d.maxBody-d.decoded {
					return nil, i, ErrBodyTooLarge
				}
				i++
				if i == end {
					continue scan
				}
				c = buf[i]
			}
			if d.digits == 0 {
				return nil, i, ErrChunkSize // no empty size, e.g. a missing last-chunk
			}
			extS = i
			switch c {
			case '\r':
				d.state = chunkSizeLF
			case ';':
				d.state = chunkExtSemi
			case ' ', '\t':
				d.state = chunkExtWS
			case '\n':
				return nil, i, ErrBareLF
			default:
				return nil, i, ErrChunkSize
			}
			i++
			continue

		case chunkExtWS: // BWS, then ';' (the next extension)
			for c == ' ' || c == '\t' {
				if i++; i == end {
					continue scan
				}
				c = buf[i]
			}
			if c != ';' {
				return nil, i, ErrChunkExtension
			}
			d.state = chunkExtSemi

		case chunkExtSemi: // BWS, then the extension name
			for c == ' ' || c == '\t' {
				if i++; i == end {
					continue scan
				}
				c = buf[i]
			}
			if !isToken[c] {
				return nil, i, ErrChunkExtension
			}
			d.state = chunkExtName

		case chunkExtName:
			for isToken[c] {
				if i++; i == end {
					continue scan
				}
				c = buf[i]
			}
			switch c {
			case ' ', '\t':
				d.state = chunkExtEqWS
			case '=':
				d.state = chunkExtValWS
			case ';':
				d.state = chunkExtSemi
			case '\r':
				d.state = chunkSizeLF
			default:
				return nil, i, ErrChunkExtension
			}

		case chunkExtEqWS: // BWS after a name: '=' or the next ';'
			for c == ' ' || c == '\t' {
				if i++; i == end {
					continue scan
				}
				c = buf[i]
			}
			switch c {
			case '=':
				d.state = chunkExtValWS
			case ';':
				d.state = chunkExtSemi
			default:
				return nil, i, ErrChunkExtension
			}

		case chunkExtValWS: // BWS after '=', then token or quoted-string
			for c == ' ' || c == '\t' {
				if i++; i == end {
					continue scan
				}
				c = buf[i]
			}
			switch {
			case c == '"':
				d.state = chunkExtQuoted
			case isToken[c]:
				d.state = chunkExtToken
			default:
				return nil, i, ErrChunkExtension
			}

		case chunkExtToken:
			for isToken[c] {
				if i++; i == end {
					continue scan
				}
				c = buf[i]
			}
			switch c {
			case ' ', '\t':
				d.state = chunkExtWS
			case ';':
				d.state = chunkExtSemi
			case '\r':
				d.state = chunkSizeLF
			default:
				return nil, i, ErrChunkExtension
			}

		case chunkExtQuoted:
			// qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text
			// (RFC 9110 section 5.6.4): isValue minus '"' and '\'.
			for isValue[c] && c != '"' && c != '\\' {
				if i++; i == end {
					continue scan
				}
				c = buf[i]
			}
			switch c {
			case '\\':
				d.state = chunkExtPair
			case '"':
				d.state = chunkExtAfterQ
			default:
				return nil, i, ErrChunkExtension // CR, LF, CTL: unterminated
			}

		case chunkExtAfterQ: // what may follow a value
			switch c {
			case ' ', '\t':
				d.state = chunkExtWS
			case ';':
				d.state = chunkExtSemi
			case '\r':
				d.state = chunkSizeLF
			default:
				return nil, i, ErrChunkExtension
			}

		case chunkExtPair:
			// quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )
			if !isValue[c] {
				return nil, i, ErrChunkExtension
			}
			d.state = chunkExtQuoted

		case chunkSizeLF:
			if c != '\n' {
				return nil, i, ErrBareCR
			}
			// Extensions are [extS, CR); the rest of the line is framing.
			ext := i - 1 - extS
			d.extTotal += ext
			d.ext = 0
			if d.extTotal > d.maxChunkExt {
				return nil, i, ErrChunkExtensionTooLong
			}
			i++
			if err := d.addOverhead(int64(d.digits + 2)); err != nil {
				return nil, i, err
			}
			if d.size == 0 {
				d.state = chunkLast
				return nil, i, nil
			}
			d.state = chunkData
			continue

		case chunkData:
			k := uint64(len(buf) - i)
			if k > d.size {
				k = d.size
			}
			data = buf[i : i+int(k)]
			i += int(k)
			d.size -= k
			d.decoded += k
			if d.size == 0 {
				d.state = chunkDataCR
			}
			return data, i, nil

		case chunkDataCR:
			switch c {
			case '\r':
				d.state = chunkDataLF
			case '\n':
				return nil, i, ErrBareLF
			default:
				return nil, i, ErrChunkData
			}

		case chunkDataLF:
			if c != '\n' {
				return nil, i, ErrBareCR
			}
			i++
			if err := d.addOverhead(2); err != nil {
				return nil, i, err
			}
			d.size, d.digits = 0, 0
			d.state = chunkSize
			continue
		}
		// The state's last byte was examined and accepted.
		i++
	}
}

// addOverhead adds n framing bytes and checks them against the data decoded
// so far plus chunkOverheadAllowance.
func (d *ChunkedDecoder) addOverhead(n int64) error {
	d.overhead += n
	if d.overhead > int64(d.decoded)+chunkOverheadAllowance {
		return ErrChunkOverhead
	}
	return nil
}

// SkipTrailers consumes the trailer section that follows the last chunk
// (call it once Last is true) without keeping its fields, up to and
// including the final CRLF; then Done is true. It returns how many bytes of
// buf it consumed; call it again with more bytes until Done. The section
// may hold DefaultMaxHeaderBytes bytes (ErrHeadersTooLarge past that);
// lines must end with CRLF.
//
// Loop-only.
func (d *ChunkedDecoder) SkipTrailers(buf []byte) (n int, err error) {
	for n < len(buf) && d.state != chunkDone {
		if d.trailer++; d.trailer > DefaultMaxHeaderBytes {
			return n, ErrHeadersTooLarge
		}
		c := buf[n]
		switch d.state {
		case chunkLast: // the start of a line: a field or the final CRLF
			switch c {
			case '\r':
				d.state = chunkTrailerLF
				d.size = 1 // the CR began an empty line
			case '\n':
				return n, ErrBareLF
			default:
				d.state = chunkTrailer
			}
		case chunkTrailer:
			switch c {
			case '\r':
				d.state = chunkTrailerLF
				d.size = 0
			case '\n':
				return n, ErrBareLF
			}
		case chunkTrailerLF:
			if c != '\n' {
				return n, ErrBareCR
			}
			if d.size == 1 {
				d.state = chunkDone
			} else {
				d.state = chunkLast
			}
		}
		n++
	}
	return n, nil
}
