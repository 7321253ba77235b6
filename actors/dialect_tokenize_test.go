package actors

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/engine"
)

// wordEngine tokenizes by bytes: token i is byte i of the text. Its
// Prepare records the request's add_special_tokens.
type wordEngine struct {
	handFramed
	special atomic.Uint32
}

func (*wordEngine) Tokenize(s string) []int {
	ids := make([]int, len(s))
	for i := range s {
		ids[i] = int(s[i])
	}
	return ids
}

func (*wordEngine) Detokenize(ids []int) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b)
}

func (e *wordEngine) Prepare(req *engine.Request) error {
	e.special.Store(uint32(req.SpecialTokens))
	if req.Prompt != "" {
		req.PromptTokens = make([]int32, len(req.Prompt))
		for i := range req.Prompt {
			req.PromptTokens[i] = int32(req.Prompt[i])
		}
		return nil
	}
	if len(req.Messages) == 0 {
		return &engine.Error{Kind: engine.KindInvalid, Param: "messages", Message: "no messages"}
	}
	req.PromptTokens = make([]int32, len(req.Messages[0].Content))
	return nil
}

// answerConn records the one response a session answers from decode.
type answerConn struct {
	mu     sync.Mutex
	status int
	body   string
	done   chan struct{}
}

func (c *answerConn) Respond(status int, _ string, _ []byte, body []byte) {
	c.mu.Lock()
	c.status, c.body = status, string(body)
	c.mu.Unlock()
	close(c.done)
}
func (c *answerConn) StartStream(string, []byte) bool { return false }
func (c *answerConn) Send([]byte)                     {}
func (c *answerConn) EndStream([]byte)                {}
func (c *answerConn) Abandon()                        {}

// TestTokenizeDialects: /tokenize and /detokenize answer from decode, with
// the bodies and error shapes netio answered them with before they moved.
func TestTokenizeDialects(t *testing.T) {
	s, err := NewSessions(Config{Engine: &wordEngine{}, Models: []string{"m"}, MaxModelLen: 64, Logger: zap.NewNop(), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	f := func(ep Endpoint, body string, status int, want string) {
		t.Helper()
		c := &answerConn{done: make(chan struct{})}
		s.Start(c, NewRequest(ep, "r", []byte(body)))
		wait(t, c.done, "answer")
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.status != status || c.body != want {
			t.Errorf("%v %s: %d %s, want %d %s", ep, body, c.status, c.body, status, want)
		}
	}
	f(EndpointTokenize, `{"prompt":"hi"}`, 200, `{"count":2,"max_model_len":64,"tokens":[104,105]}`)
	f(EndpointTokenize, `{"model":"m","prompt":"hi","return_token_strs":true}`, 200, `{"count":2,"max_model_len":64,"tokens":[104,105],"token_strs":["h","i"]}`)
	f(EndpointTokenize, `{"messages":[{"role":"user","content":[{"type":"text","text":"abc"}]}]}`, 200, `{"count":3,"max_model_len":64,"tokens":[0,0,0]}`)
	f(EndpointTokenize, `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400,
		`{"error":{"message":"messages[0].content must be a string or an array of text parts.","type":"invalid_request_error","param":"messages","code":null}}`)
	// vLLM's add_special_tokens reaches the engine's preparation.
	we := s.cfg.Engine.(*wordEngine)
	for _, c := range []struct {
		body string
		want engine.SpecialTokens
	}{
		{`{"messages":[{"role":"user","content":"abc"}],"add_special_tokens":true}`, engine.SpecialTokensAdd},
		{`{"messages":[{"role":"user","content":"abc"}],"add_special_tokens":false}`, engine.SpecialTokensNone},
		{`{"messages":[{"role":"user","content":"abc"}]}`, engine.SpecialTokensDefault},
		{`{"prompt":"hi","add_special_tokens":false}`, engine.SpecialTokensNone},
	} {
		we.special.Store(99)
		f(EndpointTokenize, c.body, 200, map[bool]string{true: `{"count":2,"max_model_len":64,"tokens":[104,105]}`,
			false: `{"count":3,"max_model_len":64,"tokens":[0,0,0]}`}[strings.Contains(c.body, "prompt")])
		if got := engine.SpecialTokens(we.special.Load()); got != c.want {
			t.Errorf("%s: the engine prepared with special tokens %d, want %d", c.body, got, c.want)
		}
	}
	f(EndpointTokenize, `{"messages":[]}`, 400, `{"error":{"message":"no messages","type":"invalid_request_error","param":"messages","code":null}}`)
	f(EndpointTokenize, `{"model":"other","prompt":"x"}`, 404, `{"error":{"message":"The model does not exist.","type":"not_found_error","param":null,"code":"model_not_found"}}`)
	f(EndpointTokenize, `{"model":"m"}`, 400, `{"error":{"message":"Give either prompt or messages.","type":"invalid_request_error","param":"prompt","code":null}}`)
	f(EndpointTokenize, `not json`, 400, `{"error":{"message":"The body is not valid JSON for /tokenize.","type":"invalid_request_error","param":null,"code":null}}`)
	f(EndpointDetokenize, `{"model":"m","tokens":[104,105]}`, 200, `{"prompt":"hi"}`)
	f(EndpointDetokenize, `{"tokens":[-1]}`, 400, `{"error":{"message":"tokens[0] is negative.","type":"invalid_request_error","param":"tokens","code":null}}`)
	f(EndpointDetokenize, `{"tokens":"abc"}`, 400,
		`{"error":{"message":"The body is not valid JSON for /detokenize: tokens must be an array of integers.","type":"invalid_request_error","param":null,"code":null}}`)
	f(EndpointDetokenize, `{"model":"other","tokens":[]}`, 404, `{"error":{"message":"The model does not exist.","type":"not_found_error","param":null,"code":"model_not_found"}}`)
}
