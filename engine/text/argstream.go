package text

// Streaming a tool call's arguments while they are generated (vLLM streams
// them the same way): a call object {"name": "…", "arguments"|"parameters":
// {…}, …} is read as it comes, and once its name is known and its
// arguments object has begun, the call is committed: its start goes out
// and every later byte of the arguments object goes out as it arrives.
// Objects written in another order (arguments before name, other keys
// first), or with escapes in a key or the name, are not streamed: the call
// goes out whole when it closes, as before.

// argStream phases.
const (
	asOpen  uint8 = iota // before the object's "{"
	asKey                // expecting a key (or the end)
	asColon              // after a key
	asValue              // after the colon
	asComma              // after the name's value
	asArgs               // inside the arguments object: streaming
	asDone               // the arguments object has closed
	asBail               // not streamable: the call goes out whole
)

// argStream keys.
const (
	keyName uint8 = iota + 1
	keyArgs
)

// argStream reads one call object's text so far (every call gives it the
// whole object from its start, a longer prefix each time). Positions are
// relative to the object's start, so the owner may move the text between
// calls. Loop-only, like Parser; allocates only the name, once.
type argStream struct {
	phase uint8
	key   uint8
	pos   int    // next byte to read
	name  string // the call's name, once read
	args  int    // the arguments object's start
	sent  int    // bytes of the arguments object handed out
	scan  jsonScan
	fresh bool // startArgs: the next step commits
}

func (a *argStream) reset() { *a = argStream{} }

// startArgs begins a call whose name is already known (mistral v11), its
// arguments object starting at at.
func (a *argStream) startArgs(name string, at int) {
	*a = argStream{phase: asArgs, name: name, args: at, fresh: true}
}

// committed reports whether the call's start has been handed out.
func (a *argStream) committed() bool { return a.phase == asArgs || a.phase == asDone }

// step reads b, the call object's text so far, and returns whether the
// call has just been committed and the arguments bytes due now (a
// subslice of b). Bytes after the arguments object are never returned.
func (a *argStream) step(b []byte) (commit bool, out []byte) {
	commit, a.fresh = a.fresh, false
	for {
		switch a.phase {
		case asArgs:
			n := jsonDepth(b[a.args:], &a.scan)
			hi := len(b)
			if n >= 0 {
				hi = a.args + n
				a.phase = asDone
			}
			out = b[a.args+a.sent : hi]
			a.sent = hi - a.args
			return commit, out
		case asDone, asBail:
			return commit, nil
		}
		i := skipSpace(b, a.pos)
		if i == len(b) {
			a.pos = i
			return commit, nil
		}
		c := b[i]
		switch a.phase {
		case asOpen:
			if c != '{' {
				a.phase = asBail
				continue
			}
			a.pos, a.phase = i+1, asKey
		case asKey:
			if c != '"' {
				a.phase = asBail
				continue
			}
			j := strEnd(b, i+1)
			switch {
			case j == -1:
				a.pos = i
				return commit, nil
			case j < 0:
				a.phase = asBail
				continue
			}
			switch string(b[i+1 : j]) {
			case "name":
				a.key = keyName
			case "arguments", "parameters":
				a.key = keyArgs
			default:
				a.phase = asBail
				continue
			}
			a.pos, a.phase = j+1, asColon
		case asColon:
			if c != ':' {
				a.phase = asBail
				continue
			}
			a.pos, a.phase = i+1, asValue
		case asValue:
			if a.key == keyArgs {
				if a.name == "" || c != '{' {
					a.phase = asBail
					continue
				}
				a.phase, a.args, a.scan, commit = asArgs, i, jsonScan{}, true
				continue
			}
			if a.name != "" || c != '"' {
				a.phase = asBail
				continue
			}
			j := strEnd(b, i+1)
			switch {
			case j == -1:
				a.pos = i
				return commit, nil
			case j < 0 || !validName(string(b[i+1:j])):
				a.phase = asBail
				continue
			}
			a.name = string(b[i+1 : j])
			a.pos, a.phase = j+1, asComma
		case asComma:
			if c != ',' {
				a.phase = asBail
				continue
			}
			a.pos, a.phase = i+1, asKey
		}
	}
}

// strEnd returns the index of the quote that ends the JSON string whose
// text starts at b[from], -1 when it has not ended yet, or -2 when it
// holds an escape or a control character (not streamed).
func strEnd(b []byte, from int) int {
	for i := from; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i
		case c == '\\' || c < ' ':
			return -2
		}
	}
	return -1
}

// arrayStream events.
const (
	aeNone  uint8 = iota // nothing more until more text comes
	aeStart              // element call committed: its name is as.name
	aeArgs               // arguments bytes of the current element
	aeClose              // the current committed element has closed
)

// arrayStream reads a JSON array of call objects as it is generated ([{…},
// {…}]), streaming each element's arguments with an argStream. Once an
// element cannot be streamed, no later one is (the calls keep their
// order). Positions are relative to the array's "[". Loop-only.
type arrayStream struct {
	phase uint8
	pos   int // next byte to read, outside elements
	elem  int // the current element's start
	end   int // the current element's length once it has closed, else -1
	scan  jsonScan
	as    argStream
	n     int    // committed elements closed
	pend  bool   // out is due after the aeStart just returned
	out   []byte // (a subslice of the caller's text)
}

// arrayStream phases.
const (
	apOpen  uint8 = iota // before "["
	apElem               // expecting an element
	apIn                 // inside an element
	apAfter              // after an element: "," or "]"
	apEnd                // the array has ended, or cannot be streamed
)

func (w *arrayStream) reset() { *w = arrayStream{} }

// next reads b, the array's text so far, and returns its next event: for
// aeArgs the bytes (a subslice of b). Call it until it returns aeNone,
// with the same b (text may be added between rounds, never changed).
// After aeClose, closedArgs gives the element's whole arguments text.
func (w *arrayStream) next(b []byte) (ev uint8, out []byte) {
	for {
		switch w.phase {
		case apEnd:
			return aeNone, nil
		case apIn:
			if w.pend {
				w.pend = false
				if len(w.out) > 0 {
					return aeArgs, w.out
				}
				continue
			}
			if w.end < 0 {
				w.end = jsonDepth(b[w.elem:], &w.scan)
			}
			view := b[w.elem:]
			if w.end >= 0 {
				view = b[w.elem : w.elem+w.end]
			}
			commit, args := w.as.step(view)
			switch {
			case commit:
				w.pend, w.out = true, args
				return aeStart, nil
			case len(args) > 0:
				return aeArgs, args
			case w.as.phase == asBail:
				w.phase = apEnd
				return aeNone, nil
			case w.end < 0:
				return aeNone, nil
			case w.as.phase != asDone:
				// The element closed before its arguments did: malformed.
				w.phase = apEnd
				return aeNone, nil
			}
			w.n++
			w.pos, w.phase = w.elem+w.end, apAfter
			return aeClose, nil
		}
		i := skipSpace(b, w.pos)
		if i == len(b) {
			w.pos = i
			return aeNone, nil
		}
		c := b[i]
		switch w.phase {
		case apOpen:
			if c != '[' {
				w.phase = apEnd
				continue
			}
			w.pos, w.phase = i+1, apElem
		case apElem:
			if c != '{' {
				w.phase = apEnd
				continue
			}
			w.elem, w.end, w.scan, w.phase = i, -1, jsonScan{}, apIn
			w.as.reset()
		case apAfter:
			if c != ',' {
				w.phase = apEnd
				continue
			}
			w.pos, w.phase = i+1, apElem
		}
	}
}

// closedArgs returns the arguments text of the element that just closed,
// from b, the array's text.
func (w *arrayStream) closedArgs(b []byte) []byte {
	return b[w.elem+w.as.args : w.elem+w.as.args+w.as.sent]
}

// openArgs returns the arguments text streamed so far of the current
// element, when it is committed and not closed (the output ended in it).
func (w *arrayStream) openArgs(b []byte) ([]byte, bool) {
	if w.phase != apIn || !w.as.committed() {
		return nil, false
	}
	return b[w.elem+w.as.args : w.elem+w.as.args+w.as.sent], true
}
