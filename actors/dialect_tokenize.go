package actors

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// tokenizeDialect is vLLM's POST /tokenize: a completion prompt is
// tokenized as is, chat messages are rendered with the engine's own chat
// template and tokenized (Engine.Prepare, which neither queues nor
// generates). It answers from decode: {"count","max_model_len","tokens"},
// and "token_strs" when asked. Errors keep the shapes the route had when
// netio answered it: 400 invalid_request_error, 404 model_not_found.
type tokenizeDialect struct {
	body []byte
}

// tokenizeRequest is the /tokenize body: a completion prompt or chat
// messages.
type tokenizeRequest struct {
	Model               string            `json:"model"`
	Prompt              *string           `json:"prompt"`
	Messages            []tokenizeMessage `json:"messages"`
	Tools               []tokenizeTool    `json:"tools"`
	AddGenerationPrompt *bool             `json:"add_generation_prompt"`
	// ContinueFinalMessage leaves the final assistant turn open (vLLM's;
	// see engine.Request.ContinueFinalMessage).
	ContinueFinalMessage bool `json:"continue_final_message"`
	ReturnTokenStrs      bool `json:"return_token_strs"`
	// AddSpecialTokens is vLLM's add_special_tokens (see
	// engine.Request.SpecialTokens).
	AddSpecialTokens *bool `json:"add_special_tokens"`
}

type tokenizeMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCallID string          `json:"tool_call_id"`
}

type tokenizeTool struct {
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

func (d *tokenizeDialect) decode(ss *session) *apiError {
	// encoding/json would turn invalid UTF-8 and lone surrogates into
	// U+FFFD: refuse them as the API endpoints do (codegen.CheckText).
	if te := codegen.CheckText(ss.req.Body); te != nil {
		return tokenizeBadRequest("", te.Message())
	}
	var req tokenizeRequest
	if err := json.Unmarshal(ss.req.Body, &req); err != nil {
		return tokenizeBadRequest("", "The body is not valid JSON for /tokenize.")
	}
	if ae := tokenizeModel(ss, req.Model); ae != nil {
		return ae
	}
	eng := ss.owner.cfg.Engine
	special := engine.SpecialTokensDefault
	switch {
	case req.AddSpecialTokens == nil:
	case *req.AddSpecialTokens:
		special = engine.SpecialTokensAdd
	default:
		special = engine.SpecialTokensNone
	}
	var tokens []int
	switch {
	case req.Messages != nil:
		ereq := engine.Request{Model: req.Model, ContinueFinalMessage: req.ContinueFinalMessage,
			NoGenerationPrompt: req.AddGenerationPrompt != nil && !*req.AddGenerationPrompt, SpecialTokens: special}
		for i, m := range req.Messages {
			text, ok := messageText(m.Content)
			if !ok {
				return tokenizeBadRequest("messages", "messages["+strconv.Itoa(i)+"].content must be a string or an array of text parts.")
			}
			ereq.Messages = append(ereq.Messages, engine.Message{Role: m.Role, Content: text, Name: m.Name, ToolCallID: m.ToolCallID})
		}
		for _, t := range req.Tools {
			ereq.Tools = append(ereq.Tools, engine.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
		}
		if err := eng.Prepare(&ereq); err != nil {
			e := engine.AsError(err)
			return tokenizeBadRequest(e.Param, e.Message)
		}
		tokens = ints(ereq.PromptTokens)
	case req.Prompt != nil && special == engine.SpecialTokensNone:
		// The text's tokens only: the engine's preparation, as a
		// completion's prompt (Tokenize adds the model's BOS).
		if *req.Prompt == "" {
			break // no tokens, as Tokenize gives
		}
		ereq := engine.Request{Model: req.Model, Prompt: *req.Prompt, SpecialTokens: special}
		if err := eng.Prepare(&ereq); err != nil {
			e := engine.AsError(err)
			return tokenizeBadRequest(e.Param, e.Message)
		}
		tokens = ints(ereq.PromptTokens)
	case req.Prompt != nil:
		tokens = eng.Tokenize(*req.Prompt)
	default:
		return tokenizeBadRequest("prompt", "Give either prompt or messages.")
	}
	out := append(d.body[:0], `{"count":`...)
	out = strconv.AppendInt(out, int64(len(tokens)), 10)
	out = append(out, `,"max_model_len":`...)
	out = strconv.AppendInt(out, int64(ss.owner.cfg.MaxModelLen), 10)
	out = append(out, `,"tokens":`...)
	out = codegen.AppendIntArray(out, tokens)
	if req.ReturnTokenStrs {
		out = append(out, `,"token_strs":[`...)
		for i, id := range tokens {
			if i > 0 {
				out = append(out, ',')
			}
			out = codegen.AppendJSONStringS(out, eng.Detokenize([]int{id}))
		}
		out = append(out, ']')
	}
	d.body = append(out, '}')
	ss.finish(200, d.body)
	return errPending
}

func (d *tokenizeDialect) stream(*session) engine.Formatter { return nil }

func (d *tokenizeDialect) appendStreamError(dst []byte, _ *session, _ *engine.Error) []byte {
	return dst // never streams
}

func (d *tokenizeDialect) appendResponse(dst []byte, _ *session, _ *engine.Result) []byte {
	return dst
}

func (d *tokenizeDialect) appendError(dst []byte, e *apiError) []byte {
	return appendOpenAIError(dst, e)
}

func (d *tokenizeDialect) engineError(e *engine.Error, _ *engine.Request) *apiError {
	return tokenizeBadRequest(e.Param, e.Message)
}

func (d *tokenizeDialect) streamContentType() string { return "text/event-stream" }

// detokenizeDialect is vLLM's POST /detokenize: {"model","tokens"} →
// {"prompt"}. It answers from decode.
type detokenizeDialect struct {
	tokenizeDialect
}

func (d *detokenizeDialect) decode(ss *session) *apiError {
	var req struct {
		Model  string `json:"model"`
		Tokens []int  `json:"tokens"`
	}
	if te := codegen.CheckText(ss.req.Body); te != nil {
		return tokenizeBadRequest("", te.Message())
	}
	if err := json.Unmarshal(ss.req.Body, &req); err != nil {
		return tokenizeBadRequest("", "The body is not valid JSON for /detokenize: tokens must be an array of integers.")
	}
	if ae := tokenizeModel(ss, req.Model); ae != nil {
		return ae
	}
	for i, id := range req.Tokens {
		if id < 0 {
			return tokenizeBadRequest("tokens", "tokens["+strconv.Itoa(i)+"] is negative.")
		}
	}
	out := append(d.body[:0], `{"prompt":`...)
	out = codegen.AppendJSONStringS(out, ss.owner.cfg.Engine.Detokenize(req.Tokens))
	d.body = append(out, '}')
	ss.finish(200, d.body)
	return errPending
}

// tokenizeModel refuses a model the server does not serve; an empty model
// means the default, as in vLLM.
func tokenizeModel(ss *session, model string) *apiError {
	if model == "" || ss.owner.servesModel(model) {
		return nil
	}
	// Type "" takes the type of the status from codegen's table.
	return &apiError{Status: 404, Code: "model_not_found", Message: "The model does not exist."}
}

func tokenizeBadRequest(param, msg string) *apiError {
	return &apiError{Status: 400, Type: "invalid_request_error", Param: param, Message: msg}
}

// messageText flattens a message content: a string, or text parts.
func messageText(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" && p.Type != "input_text" {
			return "", false
		}
		b.WriteString(p.Text)
	}
	return b.String(), true
}

// ints is a prompt's ids as /tokenize lists them.
func ints(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}
