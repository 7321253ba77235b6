package sim

// freeList is a stack of buffers kept for reuse. Loop-only: the scheduler
// goroutine takes a request's working buffers (token ids, text, KV block
// lists) when it first admits the request, and gives them back when it
// builds the final Result, which holds copies of what it keeps. At most max
// buffers are kept, none larger than maxCap elements, so that a burst of
// long answers does not pin its memory for the engine's life.
type freeList[T any] struct {
	bufs   [][]T
	max    int // buffers kept
	maxCap int // largest capacity kept, elements
}

// get returns an empty buffer of capacity at least n: the last one given
// back, or a new one when none is free or it is too small (a sequence's
// buffers are reserved up front, so that decoding appends without
// allocating).
func (f *freeList[T]) get(n int) []T {
	if k := len(f.bufs); k > 0 {
		b := f.bufs[k-1]
		f.bufs[k-1] = nil
		f.bufs = f.bufs[:k-1]
		if cap(b) >= n {
			return b
		}
	}
	return make([]T, 0, n)
}

// put keeps b for a later get, unless it is empty, too large or the list is
// full. The caller must not use b afterwards.
func (f *freeList[T]) put(b []T) {
	if cap(b) == 0 || cap(b) > f.maxCap || len(f.bufs) >= f.max {
		return
	}
	f.bufs = append(f.bufs, b[:0])
}

// Bounds of the buffers kept for reuse: token ids up to 2,048 (16 KiB), text
// up to 16 KiB. Longer answers allocate theirs, as before reuse.
const (
	maxKeptTokens = 2048
	maxKeptBytes  = 16 << 10
)

// seqBuffers are the engine's free lists of per-request working buffers.
// Loop-only.
type seqBuffers struct {
	ids    freeList[int]
	bytes  freeList[byte]  // answer text, reasoning, tool arguments
	blocks freeList[int32] // a choice's KV blocks, a prompt's shared blocks
}

func (b *seqBuffers) init(cfg *Config) {
	// At most MaxNumSeqs choices run at once; each holds an id buffer, one
	// or two byte buffers and a block list, and its group one more list.
	b.ids = freeList[int]{max: cfg.MaxNumSeqs, maxCap: maxKeptTokens}
	b.bytes = freeList[byte]{max: 2 * cfg.MaxNumSeqs, maxCap: maxKeptBytes}
	b.blocks = freeList[int32]{max: 2 * cfg.MaxNumSeqs, maxCap: blocksFor(cfg.MaxModelLen) + 1}
}

// reservedTokens is the output a choice reserves room for at admission: its
// max tokens, up to 256 (an answer runs 136 tokens on average when it ends
// naturally); a longer one grows its buffers as it goes.
func reservedTokens(p *prepared) int { return min(p.maxTokens, 256) }

// takeBuffers gives g's choices their working buffers, at g's first
// admission.
func (e *Engine) takeBuffers(g *group) {
	p := g.prep
	n := reservedTokens(p)
	g.promptBlocks = e.bufs.blocks.get(p.promptLen / BlockSize)
	for i := range g.seqs {
		s := &g.seqs[i]
		s.ids = e.bufs.ids.get(n)
		// Text: o200k_base tokens of English average about 4.5 bytes.
		s.text = e.bufs.bytes.get(n * 6)
		if s.stop != nil {
			s.stop.UseContentBuffer(s.text)
		}
		s.blocks = e.bufs.blocks.get(blocksFor(p.promptLen%BlockSize+n) + 1)
		if s.phase == phaseReason {
			s.reasoning = e.bufs.bytes.get(0)
		}
		if s.after == phaseTool {
			s.args = e.bufs.bytes.get(0)
		}
	}
}

// giveBuffers takes g's working buffers back once its final Result, which
// holds copies of them, is built. The group may outlive this as the
// caller's Session handle; it keeps no reference to them.
func (e *Engine) giveBuffers(g *group) {
	e.bufs.blocks.put(g.promptBlocks)
	g.promptBlocks = nil
	for i := range g.seqs {
		s := &g.seqs[i]
		e.bufs.ids.put(s.ids)
		e.bufs.bytes.put(s.text)
		e.bufs.bytes.put(s.reasoning)
		e.bufs.bytes.put(s.args)
		e.bufs.blocks.put(s.blocks)
		s.ids, s.text, s.reasoning, s.args, s.blocks = nil, nil, nil, nil, nil
		s.stop = nil // its content buffer was s.text
	}
}
