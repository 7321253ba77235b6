package netio

import (
	"encoding/json"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/httpparse"
	"github.com/vajra-go/vajra/metrics"
)

// addFleetRoutes registers what a node of a load-balanced fleet serves
// besides the APIs: metrics, load, version, tokenize.
//
// /load and /version are answered on the loop (a few atomic loads). The
// others are not cheap (rendering every metric, decoding a body, running
// the tokenizer): they run off the loop (offloop.go), through the same
// exchange plumbing as sessions, so pipelined responses stay in order.
// /metrics is public unless Options.ProtectMetrics (setupFleet).
func addFleetRoutes(t *routeTable) {
	t.add("/metrics", &route{name: "metrics", method: "GET", public: true})
	t.add("/load", &route{name: "load", method: "GET", inline: (*Server).handleLoad})
	t.add("/version", &route{name: "version", method: "GET", inline: (*Server).handleVersion})
	t.add("/tokenize", &route{name: "tokenize", method: "POST"})
	t.add("/detokenize", &route{name: "detokenize", method: "POST"})
}

// offloopFunc answers an off-loop route from its body (a private copy).
type offloopFunc func(s *Server, body []byte) (status int, contentType string, out []byte)

// offloopRoutes are the routes answered off the loop, by route name. A
// route is off-loop when it has neither inline nor endpoint.
var offloopRoutes = map[string]offloopFunc{
	"metrics":    (*Server).serveMetrics,
	"tokenize":   (*Server).serveTokenize,
	"detokenize": (*Server).serveDetokenize,
}

// setupFleet applies the options to the fleet routes and prepares the
// per-route metrics. Called once by New.
func (s *Server) setupFleet() {
	for _, rs := range s.routes.exact {
		for _, r := range rs {
			if r.name == "metrics" {
				r.public = !s.opts.ProtectMetrics
			}
		}
	}
	s.versionBody = append(appendJSONString([]byte(`{"version":`), s.opts.Version), '}')
	s.retryHeaders = appendRetryHeaders(nil, s.opts.RetryAfter)
	s.cors = newCORSPolicy(s.opts.AllowedOrigins)
	if s.opts.MaxConcurrentRequests > 0 {
		s.adm = &admission{maxRunning: s.opts.MaxConcurrentRequests, maxQueued: max(0, s.opts.MaxQueuedRequests)}
	}
	m := s.opts.Metrics
	if m == nil {
		m = metrics.New(s.opts.Models, metrics.Sources{}) // counted, never rendered
	}
	s.rejected.overloaded = m.Rejected("overloaded")
	s.rejected.draining = m.Rejected("draining")
	s.rejected.maxConns = m.Rejected("max_connections")
	s.rejected.unauthorized = m.Rejected("unauthorized")
	s.rejected.timeout = m.Rejected("request_timeout")
	s.rejected.queueTimeout = m.Rejected("queue_timeout")
	s.rejected.descriptors = m.Rejected("descriptors")
	s.routeMetrics = map[*route]*metrics.Route{notFound: m.Route(notFound.name)}
	add := func(r *route) { s.routeMetrics[r] = m.Route(r.name) }
	for _, rs := range s.routes.exact {
		for _, r := range rs {
			add(r)
		}
	}
	for _, p := range s.routes.prefixes {
		for _, r := range p.routes {
			add(r)
		}
	}
}

// ServerStats returns the network layer's counters for metrics. Safe for
// concurrent use.
func (s *Server) ServerStats() metrics.ServerStats {
	return metrics.ServerStats{
		OpenConnections: s.openConns.Load(),
		BytesWritten:    s.bytesWritten.Load(),
		ParseErrors:     s.parseErrors.Load(),
		SlowConsumers:   s.slowConsumers.Load(),
		ClientAborts:    s.clientAborts.Load(),
		LoopWakes:       s.Wakes(),
		IdleClosed:      s.idleClosed.Load(),
	}
}

// handleLoad answers GET /load: the engine's load and Vajra's own, for
// routers that balance on it ("server_load" is vLLM's field: requests in
// flight).
func (s *Server) handleLoad(dst []byte, req *httpparse.Request) []byte {
	var st engine.Stats
	if s.opts.Engine != nil {
		st = s.opts.Engine.Stats()
	}
	var b [160]byte
	body := append(b[:0], `{"server_load":`...)
	body = strconv.AppendInt(body, s.sessions.Active(), 10)
	body = append(body, `,"running":`...)
	body = strconv.AppendInt(body, int64(st.Running), 10)
	body = append(body, `,"waiting":`...)
	body = strconv.AppendInt(body, int64(st.Waiting), 10)
	if s.adm != nil {
		body = append(body, `,"queued":`...)
		body = strconv.AppendInt(body, int64(s.adm.queuedLen()), 10)
	}
	body = append(body, `,"kv_cache_usage_perc":`...)
	body = strconv.AppendFloat(body, st.KVUsage, 'f', -1, 64)
	body = append(body, '}')
	return appendResponse(dst, req.Minor, 200, contentTypeJSON, "", nil, body, !req.KeepAlive)
}

// handleVersion answers GET /version.
func (s *Server) handleVersion(dst []byte, req *httpparse.Request) []byte {
	return appendResponse(dst, req.Minor, 200, contentTypeJSON, "", nil, s.versionBody, !req.KeepAlive)
}

// serveMetrics renders every metric. Off-loop.
func (s *Server) serveMetrics([]byte) (int, string, []byte) {
	if s.opts.Metrics == nil {
		return 404, contentTypeJSON, appendErrorBody(nil, dialectOpenAI, 404, "not_found", "Metrics are not enabled.")
	}
	out, err := s.opts.Metrics.AppendText(nil)
	if err != nil {
		s.log.Warn("metrics: gather", zap.Error(err))
		// What gathered is still worth serving (Prometheus does the same).
	}
	return 200, metrics.ContentType, out
}

// tokenizeRequest is vLLM's POST /tokenize body: a completion prompt or
// chat messages.
type tokenizeRequest struct {
	Model               string            `json:"model"`
	Prompt              *string           `json:"prompt"`
	Messages            []tokenizeMessage `json:"messages"`
	Tools               []tokenizeTool    `json:"tools"`
	AddGenerationPrompt *bool             `json:"add_generation_prompt"`
	ReturnTokenStrs     bool              `json:"return_token_strs"`
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

// serveTokenize answers POST /tokenize: {"count","max_model_len","tokens"}
// (and "token_strs" when asked). Chat messages are rendered with the
// engine's own chat template (Engine.Prepare renders and tokenizes, and
// neither queues nor generates). Off-loop.
func (s *Server) serveTokenize(body []byte) (int, string, []byte) {
	// encoding/json would turn invalid UTF-8 and lone surrogates into
	// U+FFFD: refuse them as the API endpoints do (codegen.CheckText).
	if te := codegen.CheckText(body); te != nil {
		return badRequest("", te.Message())
	}
	var req tokenizeRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return badRequest("", "The body is not valid JSON for /tokenize.")
	}
	if st, ct, out, bad := s.checkModel(req.Model); bad {
		return st, ct, out
	}
	if s.opts.Engine == nil {
		return 503, contentTypeJSON, appendErrorBody(nil, dialectOpenAI, 503, "", "No engine.")
	}
	var tokens []int
	switch {
	case req.Messages != nil:
		ereq := engine.Request{Model: req.Model}
		for i, m := range req.Messages {
			text, ok := messageText(m.Content)
			if !ok {
				return badRequest("messages", "messages["+strconv.Itoa(i)+"].content must be a string or an array of text parts.")
			}
			ereq.Messages = append(ereq.Messages, engine.Message{Role: m.Role, Content: text, Name: m.Name, ToolCallID: m.ToolCallID})
		}
		for _, t := range req.Tools {
			ereq.Tools = append(ereq.Tools, engine.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
		}
		if err := s.opts.Engine.Prepare(&ereq); err != nil {
			e := engine.AsError(err)
			return badRequest(e.Param, e.Message)
		}
		tokens = ereq.PromptTokens
	case req.Prompt != nil:
		tokens = s.opts.Engine.Tokenize(*req.Prompt)
	default:
		return badRequest("prompt", "Give either prompt or messages.")
	}
	out := []byte(`{"count":`)
	out = strconv.AppendInt(out, int64(len(tokens)), 10)
	out = append(out, `,"max_model_len":`...)
	out = strconv.AppendInt(out, int64(s.opts.MaxModelLen), 10)
	out = append(out, `,"tokens":`...)
	out = appendIntList(out, tokens)
	if req.ReturnTokenStrs {
		out = append(out, `,"token_strs":[`...)
		for i, id := range tokens {
			if i > 0 {
				out = append(out, ',')
			}
			out = appendJSONString(out, s.opts.Engine.Detokenize([]int{id}))
		}
		out = append(out, ']')
	}
	out = append(out, '}')
	return 200, contentTypeJSON, out
}

// serveDetokenize answers POST /detokenize: {"model","tokens"} →
// {"prompt"}. Off-loop.
func (s *Server) serveDetokenize(body []byte) (int, string, []byte) {
	var req struct {
		Model  string `json:"model"`
		Tokens []int  `json:"tokens"`
	}
	if te := codegen.CheckText(body); te != nil {
		return badRequest("", te.Message())
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return badRequest("", "The body is not valid JSON for /detokenize: tokens must be an array of integers.")
	}
	if st, ct, out, bad := s.checkModel(req.Model); bad {
		return st, ct, out
	}
	for i, id := range req.Tokens {
		if id < 0 {
			return badRequest("tokens", "tokens["+strconv.Itoa(i)+"] is negative.")
		}
	}
	if s.opts.Engine == nil {
		return 503, contentTypeJSON, appendErrorBody(nil, dialectOpenAI, 503, "", "No engine.")
	}
	out := append([]byte(`{"prompt":`), nil...)
	out = appendJSONString(out, s.opts.Engine.Detokenize(req.Tokens))
	return 200, contentTypeJSON, append(out, '}')
}

// checkModel refuses a model the server does not serve (an empty model
// means the default, as in vLLM).
func (s *Server) checkModel(model string) (int, string, []byte, bool) {
	if model == "" {
		return 0, "", nil, false
	}
	for _, m := range s.opts.Models {
		if m == model {
			return 0, "", nil, false
		}
	}
	return 404, contentTypeJSON, appendErrorBody(nil, dialectOpenAI, 404, "model_not_found", "The model does not exist."), true
}

func badRequest(param, msg string) (int, string, []byte) {
	return 400, contentTypeJSON, openai.AppendErrorBody(nil, 400, "invalid_request_error", "", param, msg)
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

func appendIntList(dst []byte, ids []int) []byte {
	dst = append(dst, '[')
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(id), 10)
	}
	return append(dst, ']')
}

// appendJSONString appends s as a JSON string.
func appendJSONString(dst []byte, s string) []byte {
	b, err := json.Marshal(s)
	if err != nil {
		return append(dst, `""`...)
	}
	return append(dst, b...)
}
