package llamaserver

import (
	"errors"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/vajra-go/vajra/engine/remote"
)

// event is one /completion stream event as far as the client reads it
// (llama-server's server_task_result_cmpl_partial and _final, the
// non-OpenAI form): every slice is reused from event to event.
//
//	{"index":0,"content":"…","tokens":[42],"stop":false,"id_slot":0,
//	 "tokens_predicted":1,"tokens_evaluated":7,
//	 "completion_probabilities":[{"id":42,"token":"…","bytes":[…],
//	   "logprob":-0.1,"top_logprobs":[{"id":42,"token":"…","bytes":[…],"logprob":-0.1},…]}]}
//
// The final event has "stop":true, "stop_type" ("eos", "limit", "word"),
// "tokens_evaluated" and "timings" {"cache_n": prompt tokens reused}. An
// error after the status line is {"error":{"code":500,"message":…,"type":…}}.
type event struct {
	content   []byte // the raw (escaped) JSON string; a view of the input
	tokens    []int32
	logprobs  []float32
	top       [][]remote.TopLogprob
	stop      bool
	stopType  stopType
	predicted int
	evaluated int
	cacheN    int
	hasError  bool
	errCode   int
	errMsg    []byte
}

type stopType uint8

const (
	stopNone stopType = iota
	stopEOS
	stopLimit
	stopWord
)

func (ev *event) reset() {
	ev.tokens, ev.content = ev.tokens[:0], nil
	ev.logprobs = ev.logprobs[:0]
	ev.top = ev.top[:0]
	ev.stop, ev.stopType, ev.hasError = false, stopNone, false
	ev.predicted, ev.evaluated, ev.cacheN, ev.errCode = 0, 0, 0, 0
	ev.errMsg = ev.errMsg[:0]
}

// errSyntax is a stream event that is not the JSON llama-server writes.
var errSyntax = errors.New("llamaserver: malformed stream event")

// scanner reads JSON values from b; pos is the next byte.
type scanner struct {
	b   []byte
	pos int
	err bool
}

func (s *scanner) ws() {
	for s.pos < len(s.b) {
		switch s.b[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.pos >= len(s.b) {
		return 0
	}
	return s.b[s.pos]
}

func (s *scanner) expect(c byte) bool {
	if s.peek() != c {
		s.err = true
		return false
	}
	s.pos++
	return true
}

// str returns the raw bytes of the string at pos (escapes left as they
// are: the keys and values read here have none that matter).
func (s *scanner) str() []byte {
	if !s.expect('"') {
		return nil
	}
	start := s.pos
	for s.pos < len(s.b) {
		switch s.b[s.pos] {
		case '\\':
			s.pos += 2
			continue
		case '"':
			v := s.b[start:s.pos]
			s.pos++
			return v
		}
		s.pos++
	}
	s.err = true
	return nil
}

// number returns the bytes of the number at pos.
func (s *scanner) number() []byte {
	s.ws()
	start := s.pos
	for s.pos < len(s.b) {
		c := s.b[s.pos]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			s.pos++
			continue
		}
		break
	}
	if s.pos == start {
		s.err = true
	}
	return s.b[start:s.pos]
}

func (s *scanner) int() int {
	n := s.number()
	v, neg := 0, false
	for i, c := range n {
		switch {
		case c == '-' && i == 0:
			neg = true
		case c >= '0' && c <= '9':
			v = v*10 + int(c-'0')
		default:
			// A float where an int was expected: take its integer part.
			if neg {
				return -v
			}
			return v
		}
	}
	if neg {
		return -v
	}
	return v
}

func (s *scanner) float() float32 {
	n := s.number()
	if len(n) == 0 {
		return 0
	}
	// unsafe.String: ParseFloat does not keep its argument.
	f, err := strconv.ParseFloat(unsafe.String(&n[0], len(n)), 32)
	if err != nil {
		s.err = true
	}
	return float32(f)
}

func (s *scanner) boolean() bool {
	s.ws()
	switch {
	case hasPrefix(s.b[s.pos:], "true"):
		s.pos += 4
		return true
	case hasPrefix(s.b[s.pos:], "false"):
		s.pos += 5
		return false
	}
	s.err = true
	return false
}

// skip skips one value of any kind.
func (s *scanner) skip() {
	switch s.peek() {
	case '"':
		s.str()
	case '{', '[':
		depth := 0
		for s.pos < len(s.b) {
			switch s.b[s.pos] {
			case '"':
				s.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.pos++
					return
				}
			}
			s.pos++
		}
		s.err = true
	case 't', 'f':
		s.boolean()
	case 'n':
		if hasPrefix(s.b[s.pos:], "null") {
			s.pos += 4
			return
		}
		s.err = true
	default:
		s.number()
	}
}

// object calls member for each member of the object at pos; member must
// consume the value.
func (s *scanner) object(member func(key []byte)) {
	if !s.expect('{') {
		return
	}
	if s.peek() == '}' {
		s.pos++
		return
	}
	for !s.err {
		key := s.str()
		if !s.expect(':') {
			return
		}
		member(key)
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return
		default:
			s.err = true
		}
	}
}

// array calls elem for each element of the array at pos.
func (s *scanner) array(elem func()) {
	if !s.expect('[') {
		return
	}
	if s.peek() == ']' {
		s.pos++
		return
	}
	for !s.err {
		elem()
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return
		default:
			s.err = true
		}
	}
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

// parser parses events; its closures are made once so that parsing does
// not allocate.
type parser struct {
	s  scanner
	ev *event

	topMember, probMember, timingsMember, errMember, eventMember func(key []byte)
	tokenElem, probElem, topElem                                 func()
	top                                                          []remote.TopLogprob
	tops                                                         []remote.TopLogprob // arena for this event's alternatives
	topID                                                        int32
	topLP                                                        float32
	probID                                                       int32
	probLP                                                       float32
}

func newParser() *parser {
	p := &parser{}
	s := &p.s
	p.tokenElem = func() { p.ev.tokens = append(p.ev.tokens, int32(s.int())) }
	p.topMember = func(key []byte) {
		switch string(key) {
		case "id":
			p.topID = int32(s.int())
		case "logprob":
			p.topLP = s.float()
		default:
			s.skip()
		}
	}
	p.topElem = func() {
		p.topID, p.topLP = 0, 0
		s.object(p.topMember)
		p.tops = append(p.tops, remote.TopLogprob{TokenID: p.topID, Logprob: p.topLP})
	}
	p.probMember = func(key []byte) {
		switch string(key) {
		case "id":
			p.probID = int32(s.int())
		case "logprob":
			p.probLP = s.float()
		case "top_logprobs":
			s.array(p.topElem)
		default:
			s.skip()
		}
	}
	p.probElem = func() {
		at := len(p.tops)
		p.probID, p.probLP = 0, 0
		s.object(p.probMember)
		p.ev.logprobs = append(p.ev.logprobs, p.probLP)
		p.ev.top = append(p.ev.top, p.tops[at:len(p.tops):len(p.tops)])
	}
	p.timingsMember = func(key []byte) {
		if string(key) == "cache_n" {
			p.ev.cacheN = s.int()
			return
		}
		s.skip()
	}
	p.errMember = func(key []byte) {
		switch string(key) {
		case "code":
			p.ev.errCode = s.int()
		case "message":
			p.ev.errMsg = append(p.ev.errMsg[:0], s.str()...)
		default:
			s.skip()
		}
	}
	p.eventMember = func(key []byte) {
		ev := p.ev
		switch string(key) {
		case "content":
			ev.content = s.str()
		case "tokens":
			s.array(p.tokenElem)
		case "stop":
			ev.stop = s.boolean()
		case "stop_type":
			switch string(s.str()) {
			case "eos":
				ev.stopType = stopEOS
			case "limit":
				ev.stopType = stopLimit
			case "word":
				ev.stopType = stopWord
			}
		case "tokens_predicted":
			ev.predicted = s.int()
		case "tokens_evaluated":
			ev.evaluated = s.int()
		case "completion_probabilities":
			s.array(p.probElem)
		case "timings":
			if s.peek() == '{' {
				s.object(p.timingsMember)
			} else {
				s.skip()
			}
		case "error":
			ev.hasError = true
			if s.peek() == '{' {
				s.object(p.errMember)
			} else {
				ev.errMsg = append(ev.errMsg[:0], "error"...)
				s.skip()
			}
		default:
			s.skip()
		}
	}
	return p
}

// parse reads the JSON object b into ev. b and ev's slices stay valid
// until the next parse.
func (p *parser) parse(b []byte, ev *event) error {
	ev.reset()
	p.ev, p.tops = ev, p.tops[:0]
	p.s = scanner{b: b}
	p.s.object(p.eventMember)
	if p.s.err {
		return errSyntax
	}
	return nil
}

// appendUnescaped appends the JSON string body s (without its quotes)
// decoded to dst: the escapes of RFC 8259 section 7, surrogate pairs
// joined, a lone surrogate as U+FFFD.
func appendUnescaped(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			dst = append(dst, c)
			continue
		}
		i++
		switch s[i] {
		case 'n':
			dst = append(dst, '\n')
		case 't':
			dst = append(dst, '\t')
		case 'r':
			dst = append(dst, '\r')
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'u':
			r, n := hex4(s[i+1:])
			if n < 0 {
				dst = append(dst, "\uFFFD"...)
				continue
			}
			i += 4
			if r >= 0xD800 && r < 0xDC00 && i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				if lo, m := hex4(s[i+3:]); m >= 0 && lo >= 0xDC00 && lo < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				}
			}
			if r >= 0xD800 && r < 0xE000 {
				r = 0xFFFD
			}
			dst = utf8.AppendRune(dst, r)
		default: // " \ /
			dst = append(dst, s[i])
		}
	}
	return dst
}

func hex4(b []byte) (rune, int) {
	if len(b) < 4 {
		return 0, -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, -1
		}
	}
	return r, 4
}
