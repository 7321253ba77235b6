package remote

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/engine/pipeline"
	"github.com/vajra-go/vajra/engine/text/chattemplate"
	"github.com/vajra-go/vajra/engine/text/grammar"
)

// prepared is what Prepare leaves for Start in Request.Prepared.
type prepared struct {
	pipeline.Prepared
	e          *Engine
	m          *model
	constraint Constraint
}

// Prepare renders the prompt (the chat template for Messages), tokenizes
// it and checks it against the workers' context length, and turns tools,
// tool_choice and response_format into the worker's constraint
// (pipeline.Prepare); see engine.Engine. It fails with KindClosed while no
// worker has answered.
func (e *Engine) Prepare(req *engine.Request) error {
	m := e.model.Load()
	if m == nil || e.closed.Load() {
		return e.unavailable()
	}
	if len(req.Audio.PCM) > 0 {
		return invalid("audio", "this engine (remote text workers) does not transcribe audio")
	}
	if err := engine.CheckCapabilities(req, m.lacks(), "this engine's workers"); err != nil {
		return err
	}
	if err := engine.CheckRank(req, e.ranks()); err != nil {
		return err
	}
	m.defaults.Apply(&req.Sampling)
	p := &prepared{e: e, m: m}
	if err := pipeline.Prepare(m, req, pipeline.Limits{MaxN: MaxN, MaxStop: MaxStopStrings,
		ReasoningParser: e.cfg.ReasoningParser, ToolCallParser: e.cfg.ToolCallParser,
		DefaultMaxTokens: m.defaults.MaxTokens}, &p.Prepared); err != nil {
		return err
	}
	switch p.Format {
	case pipeline.FormatJSONObject:
		p.constraint = Constraint{Kind: ConstraintJSONObject, EBNF: jsonObjectEBNF}
	case pipeline.FormatJSONSchema:
		// llama-server converts the schema itself, with the same converter
		// as pipeline.Prepare, so that a schema it cannot enforce is a 400
		// there and not a failed stream after the 200; vLLM and SGLang get
		// the grammar.
		p.constraint = Constraint{Kind: ConstraintJSONSchema, Value: string(p.Schema), EBNF: grammar.EBNF(p.Grammar)}
	case pipeline.FormatToolCall, pipeline.FormatGrammar:
		// A regex or a list of choices too: every worker enforces the
		// same grammar, llama-server in GBNF, vLLM and SGLang in EBNF.
		p.constraint = Constraint{Kind: ConstraintGrammar, Value: p.Grammar, EBNF: grammar.EBNF(p.Grammar)}
	}
	req.Prepared = p
	return nil
}

// Lacks declares what the workers' model lacks (engine.Lacker): none
// while no worker has answered (requests are refused as unavailable
// then). Safe for concurrent use.
func (e *Engine) Lacks() engine.Capability {
	if m := e.model.Load(); m != nil {
		return m.lacks()
	}
	return 0
}

// lacks is what the workers do not return.
func (m *model) lacks() engine.Capability {
	c := (engine.CapBadWords | engine.CapAllowedTokenIDs | engine.CapPriority | engine.CapCacheSalt | engine.CapExtraArgs) &^ m.supports
	if !m.promptLogprobs {
		c |= engine.CapPromptLogprobs
	}
	return c
}

var _ engine.Lacker = (*Engine)(nil)

// The model's side of pipeline.Model and pipeline.Vocab.

func (m *model) VocabSize() int { return m.vocab }
func (m *model) MaxLen() int    { return m.maxLen }
func (m *model) AddBOS() bool   { return m.tok.AddBOS() }
func (m *model) BOSText() string {
	return m.bosText
}

func (m *model) Template(tools bool) *chattemplate.Template {
	if tools && m.toolTmpl != nil {
		return m.toolTmpl
	}
	return m.tmpl
}

// Tokenize fails with KindClosed: the tokenizer may be a worker's.
func (m *model) Tokenize(dst []int32, s string, bos bool) ([]int32, error) {
	ids, err := m.encode(dst, s, bos && m.tok.AddBOS())
	if err != nil {
		return nil, &engine.Error{Kind: engine.KindClosed, Message: "the engine worker could not tokenize the prompt (" + err.Error() + "); retry later"}
	}
	return ids, nil
}

// CheckGrammar accepts every grammar: the workers check their own.
func (m *model) CheckGrammar(string) error { return nil }

func (m *model) EOG(id int32) bool        { return m.eos[id] }
func (m *model) TokenKind(id int32) uint8 { return m.kind[id] }

// AppendText is id's piece when the parsers keep it, nothing otherwise.
func (m *model) AppendText(dst []byte, id int32, keep bool) []byte {
	if !keep {
		return dst
	}
	return m.tok.AppendPiece(dst, id)
}

var _ pipeline.Model = (*model)(nil)
var _ pipeline.Vocab = (*model)(nil)

// jsonObjectEBNF enforces response_format json_object: any JSON object.
var jsonObjectEBNF = func() string {
	g, err := grammar.FromJSONSchema([]byte(`{"type":"object"}`))
	if err != nil {
		panic(err)
	}
	return grammar.EBNF(g)
}()

func (e *Engine) unavailable() error {
	if e.closed.Load() {
		return &engine.Error{Kind: engine.KindClosed, Message: "the engine is shut down"}
	}
	if len(e.list()) == 0 {
		e.wsMu.Lock()
		pools := slices.Sorted(maps.Keys(e.pools))
		e.wsMu.Unlock()
		if len(pools) > 0 {
			// Engines attach by themselves: say where they would.
			return &engine.Error{Kind: engine.KindClosed, Message: "no engine has attached to " +
				strings.Join(pools, ", ") + " yet (start one with vllm serve MODEL --headless " +
				"--data-parallel-address HOST --data-parallel-rpc-port PORT); retry later"}
		}
	}
	return &engine.Error{Kind: engine.KindClosed, Message: "no engine worker is available (" +
		strconv.Itoa(len(e.list())) + " configured, none healthy); retry later"}
}

// unavailableFor is unavailable for a request that found no worker: for
// one pinned to a rank, that rank's worker is not up.
func (e *Engine) unavailableFor(q *Query) error {
	if !q.Pinned || e.closed.Load() {
		return e.unavailable()
	}
	return &engine.Error{Kind: engine.KindClosed, Message: "no engine worker of data-parallel rank " +
		strconv.Itoa(q.Rank) + " (X-data-parallel-rank) is available; retry later"}
}

func invalid(param, msg string) error {
	return &engine.Error{Kind: engine.KindInvalid, Param: param, Message: msg}
}

// ParsesOutput implements engine.OutputParser.
func (e *Engine) ParsesOutput() bool { return e.cfg.HasParsers() }
