package text

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vajra-go/vajra/engine"
)

// ErrUnknownParser is wrapped by the errors NewParser and Reset return for
// a reasoning or tool parser name that does not exist.
var ErrUnknownParser = errors.New("text: unknown parser")

// reasonKind selects a reasoning parser's behaviour.
type reasonKind uint8

const (
	reasonNone  reasonKind = iota // all text is content
	reasonThink                   // <think>…</think>, reasoning from the start
)

// reasoningParsers maps vLLM's --reasoning-parser names to behaviours.
//
// deepseek_r1 (vLLM DeepSeekR1ReasoningParser): the chat template may
// already have opened <think> in the prompt, so the output starts in
// reasoning; a leading <think> is dropped; everything up to the first
// </think> is reasoning and everything after it content. Output that never
// closes the block is all reasoning (vLLM: "assume the reasoning content is
// always at the start").
//
// qwen3 (vLLM Qwen3ReasoningParser, Qwen3 and Qwen3.5): the same. Since
// Qwen3.5 the template opens <think> in the prompt; older templates let the
// model write it, and it is dropped. With thinking enabled (the default) a
// missing </think> means the output was cut short and all of it is
// reasoning; with enable_thinking=false (Options.ReasoningOff) all of it is
// content. vLLM's Qwen3.5 rule that a "<tool_call>" followed by
// "<function=" ends reasoning implicitly belongs to the qwen3_coder XML tool
// format, which this package does not parse; it is not implemented.
var reasoningParsers = map[string]reasonKind{
	"deepseek_r1": reasonThink,
	"qwen3":       reasonThink,
}

// ReasoningParsers returns the names of the reasoning parsers, sorted.
// Safe for concurrent use.
func ReasoningParsers() []string { return sortedKeys(reasoningParsers) }

func lookupReasoning(name string) (reasonKind, error) {
	if name == "" {
		return reasonNone, nil
	}
	k, ok := reasoningParsers[name]
	if !ok {
		return 0, fmt.Errorf("%w: reasoning parser %q (known: %s)",
			ErrUnknownParser, name, strings.Join(ReasoningParsers(), ", "))
	}
	return k, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// The think tags. They never reach either output stream.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// thinkStage states.
const (
	thinkStateStart   uint8 = iota // nothing decided: a leading <think> may come
	thinkStateReason               // inside the think block
	thinkStateContent              // after </think>, or no reasoning parser
)

// thinkStage splits text into reasoning and content.
type thinkStage struct {
	state uint8
	held  []byte // a possible start of a tag, not yet emitted
}

func (t *thinkStage) reset(k reasonKind) {
	t.held = t.held[:0]
	t.state = thinkStateContent
	if k == reasonThink {
		t.state = thinkStateStart
	}
}

func (t *thinkStage) feed(p *Parser, text []byte) {
	if t.state == thinkStateContent {
		p.contentText(text)
		return
	}
	if len(text) == 0 {
		return
	}
	buf := text
	if len(t.held) > 0 {
		t.held = append(t.held, text...)
		buf = t.held
	}
	i := 0
	if t.state == thinkStateStart {
		if len(buf) < len(thinkOpen) && thinkOpen[:len(buf)] == string(buf) {
			t.keep(buf, 0)
			return
		}
		if len(buf) >= len(thinkOpen) && string(buf[:len(thinkOpen)]) == thinkOpen {
			i = len(thinkOpen)
		}
		t.state = thinkStateReason
	}
	rest := buf[i:]
	if j := indexString(rest, thinkClose); j >= 0 {
		p.emit(engine.DeltaReasoning, 0, rest[:j])
		t.state = thinkStateContent
		p.contentText(rest[j+len(thinkClose):])
		t.held = t.held[:0]
		return
	}
	k := len(rest) - partialSuffix(rest, thinkClose)
	p.emit(engine.DeltaReasoning, 0, rest[:k])
	t.keep(buf, i+k)
}

// keep holds buf[from:], which may alias t.held.
func (t *thinkStage) keep(buf []byte, from int) {
	if len(t.held) > 0 {
		t.held = t.held[:copy(t.held, buf[from:])]
		return
	}
	t.held = append(t.held, buf[from:]...)
}

// finish emits held bytes: the output ended before they became a tag.
func (t *thinkStage) finish(p *Parser) {
	if t.state != thinkStateContent {
		p.emit(engine.DeltaReasoning, 0, t.held)
	}
	t.held = t.held[:0]
}
