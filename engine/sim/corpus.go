package sim

import (
	"math"
	"sort"
	"strings"
)

// corpusText is the prose the text mode's Markov chain is built from: plain
// sentences written for this simulator, in the manner of an old almanac, with
// no quotes or markup so that any walk through it reads as fluent text.
const corpusText = `The river runs slowly past the old mill, and the miller watches the water turn the great wheel. In the morning the light comes over the hills and falls on the fields of barley. The farmers walk to the fields before the sun is high, and they work until the heat drives them into the shade. A good harvest depends on patience, on rain at the right time, and on the care of many hands. The village keeps a record of every season in a large book that rests in the hall. Each year the elders read from the book and remind the young of the dry summers and the long winters. The book says that the river once froze from bank to bank, and that the children walked across it to the far shore. It also says that a storm once tore the roof from the hall, and that the people built it again in a single week.

The road to the town follows the river for a mile and then climbs into the forest. Travelers say that the forest is quiet in the day and full of sound at night. Owls call from the high branches, and small animals move through the leaves. A careful traveler carries a lamp, a warm coat, and enough bread for two days. The town lies beyond the forest, on a hill above the sea. Its market opens at dawn, and merchants come from the coast with fish, salt, and cloth. The market is loud and bright, and the smell of bread and smoke fills the square. Prices rise in the winter and fall in the spring, as they have done for as long as anyone can remember.

A good engine, like a good mill, turns steadily and wastes nothing. It takes each request in order, gives each one a fair share of the work, and returns the answer as soon as it is ready. When the line grows long, the engine does not panic; it serves the first in line, keeps the rest waiting in good order, and tells the newcomers when there is no more room. The best engines measure everything they do. They count the tokens that pass through them, the time each request waits, and the memory each one holds. With these numbers an operator can see the load at a glance and decide whether to add another machine or to let the queue drain on its own.

The sea is calm in the summer and wild in the autumn. Fishermen read the sky before they set out, and they return early when the clouds gather in the west. The harbor is small but deep, and the boats rest there safely through the worst storms. On clear nights the lighthouse sends its beam across the water, and the sailors know that they are close to home. Many stories are told about the sea, and most of them are true in some small way. The old sailors say that the water remembers every ship that crossed it, and that the wind carries the voices of those who never came back.

Learning is slow work, and it rewards those who return to it every day. A student who reads a little each morning will know more by the end of the year than one who reads a great deal once a month. The teacher in the village says that questions matter more than answers, because a good question leads to many answers and a poor answer leads nowhere. She asks her students to explain what they have learned in their own words, and she listens carefully to each of them. When a student makes a mistake, she does not scold; she asks another question, and the student finds the error alone.

In the evening the village grows quiet. The lamps are lit one by one, and the smoke from the chimneys rises straight into the still air. Families gather around the table and talk about the day. The children ask for a story, and the grandmother tells them about the winter when the river froze and the whole village walked across the ice. Then the fire burns low, the stars come out over the hills, and the mill wheel turns on in the dark, patient and steady, waiting for the morning.`

// piece is one word (with its leading space) or punctuation mark of the
// corpus, with its token ids and its successors in the corpus.
type piece struct {
	text string
	toks []int // token ids of text as it appears after another piece
	bare []int // token ids without the leading space (start of an output)
	end  bool  // ends a sentence
	word bool  // a word, not punctuation
	succ []succ
}

// succ is a successor of a piece, with log of its corpus count.
type succ struct {
	next int32
	logw float32
}

// maxSucc caps the successors kept per piece (the most frequent), which
// bounds the per-step scratch arrays.
const maxSucc = 32

// maxCand bounds the candidates of one decision: the successors, and for a
// shaped request (shape.go) the filler pieces besides.
const maxCand = maxSucc + len(fillerTexts)

// corpus is the word-level Markov chain (bigram) of corpusText, tokenized
// once. Read-only after buildCorpus.
type corpus struct {
	pieces []piece
	starts []int32 // pieces that start a sentence
	words  []int32 // pieces that are words, for JSON string values
	// fillers are common token ids used as low-probability alternatives in
	// top_logprobs, most frequent first.
	fillers []int
	// fillerPieces are the pieces whose text is a filler, in the same
	// order: a shaped request's alternatives at every decision (shape.go).
	fillerPieces []int32

	// The candidate tokens are the first tokens of the pieces: the tokens
	// a decision emits, on which penalties and biases act. candIdx maps a
	// token id to 1 + its index among them (0 for other tokens), pieceCand
	// a piece to the index of its first token; ncandTok counts them.
	candIdx   []uint16
	pieceCand []uint16
	ncandTok  int
}

// fillerTexts are frequent tokens; each must tokenize to a single id.
var fillerTexts = [...]string{
	" the", ",", ".", " and", " of", " to", " a", " in", " is", " that",
	" it", " for", " was", " on", " with", " as", " be", " at", " by", " this",
	" not", " are", " from", " or", " have", " an", " but",
}

// buildCorpus splits text into pieces and counts the bigrams.
func buildCorpus(v *vocab, text string) *corpus {
	c := &corpus{}
	index := map[string]int32{}
	var seq []int32
	add := func(s string) {
		id, ok := index[s]
		if !ok {
			id = int32(len(c.pieces))
			index[s] = id
			p := piece{text: s, toks: v.encode(s)}
			p.end = s == "." || s == "?" || s == "!"
			p.word = strings.HasPrefix(s, " ")
			if p.word {
				p.bare = v.encode(s[1:])
			} else {
				p.bare = p.toks
			}
			c.pieces = append(c.pieces, p)
		}
		seq = append(seq, id)
	}
	for _, f := range strings.Fields(text) {
		w := strings.TrimRight(f, ".,;?!")
		if w != "" {
			add(" " + w)
		}
		for _, r := range f[len(w):] {
			add(string(r))
		}
	}
	counts := make([]map[int32]int, len(c.pieces))
	for i, id := range seq {
		next := seq[(i+1)%len(seq)]
		if counts[id] == nil {
			counts[id] = map[int32]int{}
		}
		counts[id][next]++
	}
	isStart := make([]bool, len(c.pieces))
	for i, id := range seq {
		if c.pieces[id].end && c.pieces[seq[(i+1)%len(seq)]].word {
			isStart[seq[(i+1)%len(seq)]] = true
		}
	}
	for id := range c.pieces {
		p := &c.pieces[id]
		for next, n := range counts[id] {
			p.succ = append(p.succ, succ{next: next, logw: float32(math.Log(float64(n)))})
		}
		sort.Slice(p.succ, func(i, j int) bool {
			a, b := p.succ[i], p.succ[j]
			if a.logw != b.logw {
				return a.logw > b.logw
			}
			return a.next < b.next
		})
		if len(p.succ) > maxSucc {
			p.succ = p.succ[:maxSucc]
		}
		if isStart[id] {
			c.starts = append(c.starts, int32(id))
		}
		if p.word && len(p.text) > 3 {
			c.words = append(c.words, int32(id))
		}
	}
	for _, f := range fillerTexts {
		if ids := v.encode(f); len(ids) == 1 {
			c.fillers = append(c.fillers, ids[0])
			if id, ok := index[f]; ok {
				c.fillerPieces = append(c.fillerPieces, id)
			}
		}
	}
	c.candIdx = make([]uint16, v.strs.len())
	c.pieceCand = make([]uint16, len(c.pieces))
	for i := range c.pieces {
		tok := c.pieces[i].toks[0]
		if c.candIdx[tok] == 0 {
			c.ncandTok++
			c.candIdx[tok] = uint16(c.ncandTok)
		}
		c.pieceCand[i] = c.candIdx[tok] - 1
	}
	return c
}

// word returns a corpus word (without its leading space) picked by r.
func (c *corpus) word(r *rng) string {
	return c.pieces[c.words[r.intn(len(c.words))]].text[1:]
}

// phrase appends n corpus words, space-separated, to dst.
func (c *corpus) phrase(dst []byte, r *rng, n int) []byte {
	for i := range n {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, c.word(r)...)
	}
	return dst
}
