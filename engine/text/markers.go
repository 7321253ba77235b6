package text

// Marker is a tag a parser looks for in the text. In many vocabularies it
// is one special (control) token, which detokenization with
// skip_special_tokens leaves out: an engine must hand that token's text to
// the Parser all the same, or the parser never sees its marker (Mistral's
// [TOOL_CALLS], Llama 3.1's <|python_tag|>, and <tool_call> or <think> where
// a tokenizer makes them special). The parsers consume their markers: the
// client's text does not show them, except in what a parser gives back as
// content (a malformed call, raw, tags included, as vLLM returns it).
type Marker struct {
	Text string
	// Tool says the tool-call parser looks for it (only when the request
	// may call tools); otherwise the reasoning parser does (only when
	// reasoning is on).
	Tool bool
}

// Markers returns the markers of the named reasoning and tool-call
// parsers ("" for none); unknown names have none. Safe for concurrent use;
// it allocates, call it when a model is loaded.
func Markers(reasoning, tools string) []Marker {
	var out []Marker
	if k, err := lookupReasoning(reasoning); err == nil && k == reasonThink {
		out = append(out, Marker{Text: thinkOpen}, Marker{Text: thinkClose})
	}
	k, err := lookupTool(tools)
	if err != nil {
		return out
	}
	switch k {
	case toolHermes:
		out = append(out, Marker{hermesOpen, true}, Marker{hermesClose, true})
	case toolLlama3:
		out = append(out, Marker{pythonTag, true})
	case toolMistral:
		out = append(out, Marker{mistralBot, true}, Marker{mistralArgs, true})
	}
	return out
}

// Token kinds of a vocabulary, for an engine that decides per generated
// token whether its text goes to the Parser (see KeepToken).
const (
	TokenText        uint8 = iota // ordinary text
	TokenSpecial                  // a special (control) token
	TokenToolMarker               // a special token that is a tool-call parser's marker
	TokenThinkMarker              // a special token that is a reasoning parser's marker
)

// MarkerKind returns TokenToolMarker or TokenThinkMarker when piece, a
// special token's text, is one of markers, else TokenSpecial.
func MarkerKind(markers []Marker, piece []byte) uint8 {
	for _, m := range markers {
		if string(piece) == m.Text {
			if m.Tool {
				return TokenToolMarker
			}
			return TokenThinkMarker
		}
	}
	return TokenSpecial
}

// KeepToken reports whether a generated token of kind k has its text
// handed to the Parser for a request with opt (whose ToolsOff and
// ReasoningOff say which parsers run) and keepSpecial
// (skip_special_tokens=false). Per token: no allocation.
func KeepToken(k uint8, opt *Options, keepSpecial bool) bool {
	switch k {
	case TokenText:
		return true
	case TokenToolMarker:
		return keepSpecial || opt.Tools != "" && !opt.ToolsOff
	case TokenThinkMarker:
		return keepSpecial || opt.Reasoning != "" && !opt.ReasoningOff
	}
	return keepSpecial
}
