package httpparse

// chunked runs the chunked-body states (RFC 9112 section 7.1) from offset i
// until it needs more bytes, fails, or reaches the trailer section (which
// the header states parse, with r.trailer set). Chunk data is copied into
// the Parser's scratch buffer as it arrives, so no byte is copied twice.
//
//	chunked-body   = *chunk last-chunk trailer-section CRLF
//	chunk          = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//	chunk-size     = 1*HEXDIG
//	last-chunk     = 1*("0") [ chunk-ext ] CRLF
//	chunk-ext      = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//	chunk-ext-val  = token / quoted-string
func (p *Parser) chunked(buf []byte, i int) (int, error) {
	r := &p.r
	extEnd := 0
scan:
	for {
		// In extensions, the byte at extEnd may only be the CR that ends
		// them; scanning stops one past it, so the budget is enforced at
		// the same byte however the input was split.
		n := len(buf)
		if inExt := r.state >= stateChunkExtWS && r.state <= stateChunkExtAfterQ; inExt {
			extEnd = r.extS + p.lim.MaxChunkExt - r.extTotal
			if n > extEnd+1 {
				n = extEnd + 1
			}
			if i >= n && n == extEnd+1 {
				return extEnd, ErrChunkExtensionTooLong
			}
		}
		if i >= n {
			return i, nil
		}
		c := buf[i]
		switch r.state {
		case stateChunkSize:
			for {
				v := unhex[c]
				if v < 0 {
					break
				}
				// At most 16 hex digits: enough for any int64 and the
				// bound that keeps the arithmetic exact (the issue's
				// rule; net/http's limit too).
				if r.digits == 16 {
					return i, ErrChunkSize
				}
				r.digits++
				r.size = r.size<<4 | uint64(v)
				if r.size > uint64(p.lim.MaxBody)-uint64(len(p.body)) {
					return i, ErrBodyTooLarge
				}
				i++
				if i == n {
					continue scan
				}
				c = buf[i]
			}
			if r.digits == 0 {
				return i, ErrChunkSize // no empty size, e.g. a missing last-chunk
			}
			switch c {
			case '\r':
				r.extS = i
				r.state = stateChunkSizeLF
			case ';':
				r.extS = i
				r.state = stateChunkExtSemi
			case ' ', '\t':
				r.extS = i
				r.state = stateChunkExtWS
			case '\n':
				return i, ErrBareLF
			default:
				return i, ErrChunkSize
			}
			i++
			continue

		case stateChunkExtWS: // BWS, then ';' (the next extension)
			for c == ' ' || c == '\t' {
				if i++; i == n {
					continue scan
				}
				c = buf[i]
			}
			if c != ';' {
				return i, ErrChunkExtension
			}
			r.state = stateChunkExtSemi

		case stateChunkExtSemi: // BWS, then the extension name
			for c == ' ' || c == '\t' {
				if i++; i == n {
					continue scan
				}
				c = buf[i]
			}
			if !isToken[c] {
				return i, ErrChunkExtension
			}
			r.state = stateChunkExtName

		case stateChunkExtName:
			for isToken[c] {
				if i++; i == n {
					continue scan
				}
				c = buf[i]
			}
			switch c {
			case ' ', '\t':
				r.state = stateChunkExtEqWS
			case '=':
				r.state = stateChunkExtValWS
			case ';':
				r.state = stateChunkExtSemi
			case '\r':
				r.state = stateChunkSizeLF
			default:
				return i, ErrChunkExtension
			}

		case stateChunkExtEqWS: // BWS after a name: '=' or the next ';'
			for c == ' ' || c == '\t' {
				if i++; i == n {
					continue scan
				}
				c = buf[i]
			}
			switch c {
			case '=':
				r.state = stateChunkExtValWS
			case ';':
				r.state = stateChunkExtSemi
			default:
				return i, ErrChunkExtension
			}

		case stateChunkExtValWS: // BWS after '=', then token or quoted-string
			for c == ' ' || c == '\t' {
				if i++; i == n {
					continue scan
				}
				c = buf[i]
			}
			switch {
			case c == '"':
				r.state = stateChunkExtQuoted
			case isToken[c]:
				r.state = stateChunkExtToken
			default:
				return i, ErrChunkExtension
			}

		case stateChunkExtToken:
			for isToken[c] {
				if i++; i == n {
					continue scan
				}
				c = buf[i]
			}
			switch c {
			case ' ', '\t':
				r.state = stateChunkExtWS
			case ';':
				r.state = stateChunkExtSemi
			case '\r':
				r.state = stateChunkSizeLF
			default:
				return i, ErrChunkExtension
			}

		case stateChunkExtQuoted:
			// qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text
			// (RFC 9110 section 5.6.4): isValue minus '"' and '\'.
			for isValue[c] && c != '"' && c != '\\' {
				if i++; i == n {
					continue scan
				}
				c = buf[i]
			}
			switch c {
			case '\\':
				r.state = stateChunkExtPair
			case '"':
				r.state = stateChunkExtAfterQ
			default:
				return i, ErrChunkExtension // CR, LF, CTL: unterminated
			}

		case stateChunkExtAfterQ: // what may follow a value
			switch c {
			case ' ', '\t':
				r.state = stateChunkExtWS
			case ';':
				r.state = stateChunkExtSemi
			case '\r':
				r.state = stateChunkSizeLF
			default:
				return i, ErrChunkExtension
			}

		case stateChunkExtPair:
			// quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text )
			if !isValue[c] {
				return i, ErrChunkExtension
			}
			r.state = stateChunkExtQuoted

		case stateChunkSizeLF:
			if c != '\n' {
				return i, ErrBareCR
			}
			// Extensions are [extS, CR); the rest of the line is framing.
			ext := i - 1 - r.extS
			r.extTotal += ext
			if r.extTotal > p.lim.MaxChunkExt {
				return i, ErrChunkExtensionTooLong
			}
			i++
			if err := p.overhead(int64(i - r.lineS - ext)); err != nil {
				return i, err
			}
			if r.size == 0 {
				// last-chunk: the trailer section follows, parsed like a
				// header section with its own MaxHeaderBytes budget.
				r.trailer = true
				r.limEnd = i + p.lim.MaxHeaderBytes
				r.state = stateLineStart
				return i, nil
			}
			r.state = stateChunkData
			continue

		case stateChunkData:
			k := uint64(len(buf) - i)
			if k > r.size {
				k = r.size
			}
			p.body = append(p.body, buf[i:i+int(k)]...)
			i += int(k)
			r.size -= k
			if r.size == 0 {
				r.state = stateChunkDataCR
			}
			continue

		case stateChunkDataCR:
			switch c {
			case '\r':
				r.state = stateChunkDataLF
			case '\n':
				return i, ErrBareLF
			default:
				return i, ErrChunkData
			}

		case stateChunkDataLF:
			if c != '\n' {
				return i, ErrBareCR
			}
			i++
			if err := p.overhead(2); err != nil {
				return i, err
			}
			r.size, r.digits = 0, 0
			r.lineS = i
			r.state = stateChunkSize
			continue

		default:
			return i, nil // left the chunked states
		}
		// The state's last byte was examined and accepted.
		i++
	}
}

// overhead adds n framing bytes and checks them against the data decoded so
// far plus chunkOverheadAllowance.
func (p *Parser) overhead(n int64) error {
	p.r.overhead += n
	if p.r.overhead > int64(len(p.body))+chunkOverheadAllowance {
		return ErrChunkOverhead
	}
	return nil
}
