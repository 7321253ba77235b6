package openai

import (
	"strconv"
	"strings"
	"time"

	"github.com/mailru/easyjson/jwriter"
	"github.com/mailru/easyjson/opt"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/engine"
)

// This file builds and renders the Responses API's response object (the
// same builder serves the non-streamed body, the stream's opening and final
// events, and the store), its output items, the input items listing and the
// deletion body.

// Response statuses.
const (
	ResponseCompleted  = "completed"
	ResponseIncomplete = "incomplete"
	ResponseFailed     = "failed"
	ResponseCancelled  = "cancelled"
	ResponseInProgress = "in_progress"
	// ResponseQueued is a background response accepted and not begun.
	ResponseQueued = "queued"
)

// ResponseStatusFinal reports whether status is terminal: the response
// will not change any more.
func ResponseStatusFinal(status string) bool {
	return status != ResponseQueued && status != ResponseInProgress
}

// ResponseMeta is what a response object echoes of its request, plus its id
// and times. Build it with ResponsesRequest.Meta.
type ResponseMeta struct {
	ID        string // "resp_…"
	Model     string
	CreatedAt int64 // Unix seconds
	// CompletedAt is the completion time; 0 means "now" when the response
	// completes (set it for reproducible output).
	CompletedAt        int64
	Instructions       string // "" renders null
	PreviousResponseID string // "" renders null
	Store              bool
	// Background: the response runs after its HTTP exchange (background:
	// true), polled with GET /v1/responses/{id}.
	Background        bool
	Tools             []ResponsesTool
	ToolChoice        ResponsesToolChoice
	ParallelToolCalls bool
	Temperature       float64
	TopP              float64
	MaxOutputTokens   int // 0 renders null
	MaxToolCalls      opt.Int
	TopLogprobs       int
	ReasoningEffort   string
	ReasoningSummary  string
	Format            ResponseFormatEcho
	Truncation        string
	User              string
	Metadata          ResponsesMetadata
}

// Meta returns the echo of a validated request for a response with the
// given id and creation time.
func (r *ResponsesRequest) Meta(id string, createdAt int64) ResponseMeta {
	m := ResponseMeta{
		ID: id, Model: r.Model, CreatedAt: createdAt,
		Instructions: r.Instructions, PreviousResponseID: r.PreviousResponseID,
		Store: r.StoreEnabled(), Background: r.Background, ToolChoice: r.ToolChoice,
		ParallelToolCalls: r.ParallelToolCalls.Get(true),
		Temperature:       r.Temperature.Get(1), TopP: r.TopP.Get(1),
		MaxOutputTokens: r.MaxOutputTokens.V, MaxToolCalls: r.MaxToolCalls, TopLogprobs: r.TopLogprobs.V, Truncation: r.Truncation,
		User: r.User, Metadata: r.Metadata, Format: ResponseFormatEcho{Type: "text"},
	}
	if m.Truncation == "" {
		m.Truncation = "disabled"
	}
	if len(r.Tools) > 0 {
		m.Tools = make([]ResponsesTool, len(r.Tools))
		for i, t := range r.Tools {
			t.Strict = opt.OBool(t.Strict.Get(true)) // strict defaults to true in this API
			m.Tools[i] = t
		}
	}
	if r.Reasoning != nil {
		m.ReasoningEffort, m.ReasoningSummary = r.Reasoning.Effort, r.Reasoning.Summary
	}
	if r.Text != nil && r.Text.Format.Type != "" {
		f := &r.Text.Format
		m.Format = ResponseFormatEcho{Type: f.Type, Name: f.Name, Description: f.Description, Schema: f.Schema}
		if f.Type == "json_schema" {
			m.Format.Strict = opt.OBool(f.Strict.V)
		}
	}
	return m
}

// BuildResponse builds the response object for meta. With res nil it is the
// in-progress object that opens a stream (no output, no usage); otherwise
// it is the final object from res's first choice: status completed,
// incomplete (finish reason length: incomplete_details.reason
// "max_output_tokens"), cancelled (aborted) or failed (res.Err, with
// error.code and error.message). Output items come in the order a stream
// emits them — reasoning, message, function calls — with ids derived from
// meta.ID and their output index by engine.ItemID, so the streamed and
// stored ids agree (whoever wrote the stream).
func BuildResponse(meta *ResponseMeta, res *engine.Result) *ResponseObject {
	r := &ResponseObject{
		ID: meta.ID, Object: "response", CreatedAt: meta.CreatedAt, Status: ResponseInProgress, Background: meta.Background,
		Model: meta.Model, Output: []ResponseItem{}, ParallelToolCalls: meta.ParallelToolCalls,
		ServiceTier: "default", Store: meta.Store, Temperature: meta.Temperature,
		Text:       ResponseTextEcho{Format: meta.Format, Verbosity: "medium"},
		ToolChoice: meta.ToolChoice, Tools: meta.Tools, TopLogprobs: meta.TopLogprobs, TopP: meta.TopP, Truncation: meta.Truncation,
		Metadata: meta.Metadata,
	}
	if r.Tools == nil {
		r.Tools = []ResponsesTool{}
	}
	if meta.Instructions != "" {
		r.Instructions = opt.OString(meta.Instructions)
	}
	if meta.PreviousResponseID != "" {
		r.PreviousResponseID = opt.OString(meta.PreviousResponseID)
	}
	if meta.MaxOutputTokens > 0 {
		r.MaxOutputTokens = opt.OInt(meta.MaxOutputTokens)
	}
	r.MaxToolCalls = meta.MaxToolCalls
	if meta.ReasoningEffort != "" {
		r.Reasoning.Effort = opt.OString(meta.ReasoningEffort)
	}
	if meta.ReasoningSummary != "" {
		r.Reasoning.Summary = opt.OString(meta.ReasoningSummary)
	}
	if meta.User != "" {
		r.User = opt.OString(meta.User)
	}
	if res == nil {
		return r
	}

	u := &res.Usage
	r.Usage = &ResponseUsage{
		InputTokens: u.PromptTokens, InputTokensDetails: ResponseInputDetails{CachedTokens: u.CachedTokens},
		OutputTokens: u.CompletionTokens, OutputTokensDetails: ResponseOutputDetails{ReasoningTokens: u.ReasoningTokens},
		TotalTokens: u.TotalTokens(),
	}
	var c engine.Choice
	if len(res.Choices) > 0 {
		c = res.Choices[0]
	}
	status, itemStatus := ResultStatus(res), ResponseIncomplete
	switch status {
	case ResponseCompleted:
		itemStatus = ResponseCompleted
	case ResponseFailed:
		r.Error = &ResponseErrorObject{Code: responseErrorCode(res.Err.Kind), Message: orDefault(res.Err.Message, "The engine failed to complete the request.")}
	case ResponseIncomplete:
		r.IncompleteDetails = &ResponseIncompleteDetails{Reason: "max_output_tokens"}
	}
	r.Status = status
	if status == ResponseCompleted {
		at := meta.CompletedAt
		if at == 0 {
			at = time.Now().Unix()
		}
		r.CompletedAt = opt.OInt64(at)
	}
	if c.Reasoning != "" {
		r.Output = append(r.Output, ResponseItem{Type: "reasoning", ID: engine.ItemID(engine.ItemReasoning, meta.ID, len(r.Output)),
			Content: []ResponsesContentPart{{Type: "reasoning_text", Text: c.Reasoning}}})
	}
	if c.Text != "" {
		r.Output = append(r.Output, ResponseItem{Type: "message", ID: engine.ItemID(engine.ItemMessage, meta.ID, len(r.Output)),
			Status: ResponseCompleted, Role: "assistant", Content: []ResponsesContentPart{{Type: "output_text", Text: c.Text, Logprobs: c.Logprobs}}})
	}
	for i := range c.ToolCalls {
		tc := &c.ToolCalls[i]
		n := len(r.Output)
		callID := tc.ID
		if callID == "" {
			callID = engine.ItemID(engine.ItemCallID, meta.ID, n)
		}
		r.Output = append(r.Output, ResponseItem{Type: "function_call", ID: engine.ItemID(engine.ItemCall, meta.ID, n),
			Status: ResponseCompleted, CallID: callID, Name: tc.Name, Arguments: tc.Arguments})
	}
	// Only the last item can have been cut off; the ones before it were
	// complete when the next began (as the stream reports them).
	if n := len(r.Output); n > 0 && r.Output[n-1].Type != "reasoning" {
		r.Output[n-1].Status = itemStatus
	}
	return r
}

// ResultStatus is the status of the final response of res: cancelled
// (aborted), failed (res.Err), incomplete (the first choice ran out of
// tokens: finish reason length) or completed.
func ResultStatus(res *engine.Result) string {
	switch {
	case res.Err != nil && res.Err.Kind == engine.KindAborted:
		return ResponseCancelled
	case res.Err != nil:
		return ResponseFailed
	case len(res.Choices) > 0 && res.Choices[0].FinishReason == engine.FinishLength:
		return ResponseIncomplete
	}
	return ResponseCompleted
}

// responseErrorCode maps an engine error onto the codes the SDK's
// ResponseError knows.
func responseErrorCode(k engine.ErrorKind) string {
	switch k {
	case engine.KindInvalid, engine.KindContextLength:
		return "invalid_prompt"
	case engine.KindOverloaded:
		return "rate_limit_exceeded"
	}
	return "server_error"
}

// inputItemID derives the id of input item i ("msg_abc123_in0").
func inputItemID(prefix, respID string, i int) string {
	return prefix + strings.TrimPrefix(respID, "resp_") + "_in" + strconv.Itoa(i)
}

// AppendResponse appends r as JSON.
func AppendResponse(dst []byte, r *ResponseObject) []byte {
	w := jwriter.Writer{Flags: jwriter.NilSliceAsEmpty}
	r.MarshalEasyJSON(&w)
	// DumpTo hands the writer's pooled chunks back; dst is never pooled.
	w.Buffer.DumpTo((*appendWriter)(&dst))
	return dst
}

// appendWriter is an io.Writer appending to a byte slice.
type appendWriter []byte

func (a *appendWriter) Write(p []byte) (int, error) {
	*a = append(*a, p...)
	return len(p), nil
}

// MarshalEasyJSON implements easyjson.Marshaler: each item type with exactly
// the members OpenAI gives it.
func (it ResponseItem) MarshalEasyJSON(w *jwriter.Writer) {
	var buf [512]byte
	w.Raw(appendItem(buf[:0], &it), nil)
}

// appendItem appends an output or input item as stored and listed. The
// stream's item events do not use it: ResponsesFormatter.appendOpenItem
// renders its open item from its own buffers, without building a
// ResponseItem per event.
func appendItem(dst []byte, it *ResponseItem) []byte {
	dst = append(dst, `{"id":`...)
	dst = codegen.AppendJSONStringS(dst, it.ID)
	dst = append(dst, `,"type":`...)
	dst = codegen.AppendJSONStringS(dst, it.Type)
	switch it.Type {
	case "reasoning":
		dst = append(dst, `,"summary":[]`...)
		if len(it.Content) > 0 {
			dst = append(dst, `,"content":`...)
			dst = appendParts(dst, it.Content)
		}
	case "function_call":
		if it.Status != "" {
			dst = append(dst, `,"status":`...)
			dst = codegen.AppendJSONStringS(dst, it.Status)
		}
		dst = append(dst, `,"arguments":`...)
		dst = codegen.AppendJSONStringS(dst, it.Arguments)
		dst = append(dst, `,"call_id":`...)
		dst = codegen.AppendJSONStringS(dst, it.CallID)
		dst = append(dst, `,"name":`...)
		dst = codegen.AppendJSONStringS(dst, it.Name)
	case "function_call_output":
		if it.Status != "" {
			dst = append(dst, `,"status":`...)
			dst = codegen.AppendJSONStringS(dst, it.Status)
		}
		dst = append(dst, `,"call_id":`...)
		dst = codegen.AppendJSONStringS(dst, it.CallID)
		dst = append(dst, `,"output":`...)
		dst = codegen.AppendJSONStringS(dst, it.Output)
	default: // message
		if it.Status != "" {
			dst = append(dst, `,"status":`...)
			dst = codegen.AppendJSONStringS(dst, it.Status)
		}
		dst = append(dst, `,"content":`...)
		dst = appendParts(dst, it.Content)
		dst = append(dst, `,"role":`...)
		dst = codegen.AppendJSONStringS(dst, it.Role)
	}
	return append(dst, '}')
}

// appendParts appends content parts; output_text parts carry the empty
// annotations and logprobs arrays the SDK expects.
func appendParts(dst []byte, parts []ResponsesContentPart) []byte {
	dst = append(dst, '[')
	for i := range parts {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendPart(dst, &parts[i])
	}
	return append(dst, ']')
}

func appendPart(dst []byte, p *ResponsesContentPart) []byte {
	dst = append(dst, `{"type":`...)
	dst = codegen.AppendJSONStringS(dst, p.Type)
	switch p.Type {
	case "output_text":
		dst = append(dst, `,"annotations":[],"logprobs":[`...)
		for i := range p.Logprobs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendLogprobEntry(dst, &p.Logprobs[i])
		}
		dst = append(dst, `],"text":`...)
		dst = codegen.AppendJSONStringS(dst, p.Text)
	case "refusal":
		dst = append(dst, `,"refusal":`...)
		dst = codegen.AppendJSONStringS(dst, p.Refusal)
	default:
		dst = append(dst, `,"text":`...)
		dst = codegen.AppendJSONStringS(dst, p.Text)
	}
	return append(dst, '}')
}

// InputItems returns the items of r's input as the store keeps them for
// GET /v1/responses/{id}/input_items: a string input becomes one user
// message; items without an id get one derived from respID ("msg_…_in0").
// Call it on a request that passed ToEngine.
func (r *ResponsesRequest) InputItems(respID string) []ResponseItem {
	if r.Input.IsString {
		return []ResponseItem{{Type: "message", ID: inputItemID("msg_", respID, 0), Status: ResponseCompleted, Role: "user",
			Content: []ResponsesContentPart{{Type: "input_text", Text: r.Input.Text}}}}
	}
	items := make([]ResponseItem, 0, len(r.Input.Items))
	for i := range r.Input.Items {
		in := &r.Input.Items[i]
		it := ResponseItem{Type: in.Type, ID: in.ID, Status: ResponseCompleted, Role: in.Role,
			CallID: in.CallID, Name: in.Name, Arguments: in.Arguments}
		prefix := "msg_"
		switch in.Type {
		case "", "message":
			it.Type = "message"
			if in.Content.IsString {
				typ := "input_text"
				if in.Role == "assistant" {
					typ = "output_text"
				}
				it.Content = []ResponsesContentPart{{Type: typ, Text: in.Content.Text}}
			} else {
				it.Content = in.Content.Parts
			}
		case "function_call":
			prefix = "fc_"
		case "function_call_output":
			prefix = "fco_"
			it.Output = flatten(&in.Output)
		default:
			continue // reasoning and other items are not listed
		}
		if it.ID == "" {
			it.ID = inputItemID(prefix, respID, i)
		}
		items = append(items, it)
	}
	return items
}

// AppendInputItemsList appends the body of GET /v1/responses/{id}/input_items:
// {"object":"list","data":[…],"first_id","last_id","has_more"}. Paging
// (after, limit, order) is the caller's: pass the page.
func AppendInputItemsList(dst []byte, items []ResponseItem, hasMore bool) []byte {
	dst = append(dst, `{"object":"list","data":[`...)
	for i := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendItem(dst, &items[i])
	}
	dst = append(dst, `],"first_id":`...)
	if len(items) > 0 {
		dst = codegen.AppendJSONStringS(dst, items[0].ID)
		dst = append(dst, `,"last_id":`...)
		dst = codegen.AppendJSONStringS(dst, items[len(items)-1].ID)
	} else {
		dst = append(dst, `null,"last_id":null`...)
	}
	if hasMore {
		return append(dst, `,"has_more":true}`...)
	}
	return append(dst, `,"has_more":false}`...)
}

// AppendResponseDeleted appends the body of DELETE /v1/responses/{id}, as
// OpenAI documents it: {"id":…,"object":"response","deleted":true}.
func AppendResponseDeleted(dst []byte, id string) []byte {
	dst = append(dst, `{"id":`...)
	dst = codegen.AppendJSONStringS(dst, id)
	return append(dst, `,"object":"response","deleted":true}`...)
}
