package actors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/vajra-go/vajra/engine"
)

// A session that fails after the 200 ends its stream with the dialect's
// error event, written by the session from what it knows (StreamInfo and
// where the forwarded stream stopped), never with the engine's Formatter.
// These tests drive a real session actor with an engine that writes its own
// frames and has no Formatter at all, and make the session panic in the
// middle of the stream.

// handFramed is an engine whose frames the test writes by hand: Start takes
// the Formatter away (the session must not need it) and hands the request's
// StreamInfo and the sink to the test, which plays the engine.
type handFramed struct {
	started chan handFramedStart
	aborted chan struct{}
}

type handFramedStart struct {
	si   engine.StreamInfo
	sink engine.Sink
}

func (e *handFramed) Prepare(req *engine.Request) error {
	req.PromptTokens = []int32{1, 2, 3}
	return nil
}

func (e *handFramed) Start(req *engine.Request, sink engine.Sink) (engine.Session, error) {
	req.Formatter = nil
	e.started <- handFramedStart{req.StreamInfo, sink}
	return handFramedSession{e, sink}, nil
}

func (e *handFramed) Tokenize(string) []int   { return nil }
func (e *handFramed) Detokenize([]int) string { return "" }
func (e *handFramed) Stats() engine.Stats     { return engine.Stats{Healthy: true} }
func (e *handFramed) Close() error            { return nil }

type handFramedSession struct {
	e    *handFramed
	sink engine.Sink
}

// Abort delivers the final Result, as the engine contract asks.
func (s handFramedSession) Abort() {
	s.sink.Deliver(nil, &engine.Result{Err: &engine.Error{Kind: engine.KindAborted}})
	close(s.e.aborted)
}

// panicConn records a streamed response and panics in the Send numbered
// panicAt (from 1), on the session's goroutine: a session failure after the
// 200, with part of the stream out.
type panicConn struct {
	t       *testing.T
	panicAt int

	mu    sync.Mutex
	body  bytes.Buffer
	sends int
	sent  chan struct{}
	ended chan struct{}
}

func (c *panicConn) Respond(status int, _ string, _ []byte, body []byte) {
	c.t.Errorf("Respond(%d, %s) on a streamed response", status, body)
	close(c.ended)
}

func (c *panicConn) StartStream(string, []byte) bool { return true }

func (c *panicConn) Send(p []byte) {
	c.mu.Lock()
	c.sends++
	n := c.sends
	if n != c.panicAt {
		c.body.Write(p)
	}
	c.mu.Unlock()
	if n == c.panicAt {
		panic("connection exploded")
	}
	c.sent <- struct{}{}
}

func (c *panicConn) EndStream(last []byte) {
	c.mu.Lock()
	c.body.Write(last)
	c.mu.Unlock()
	close(c.ended)
}

func (c *panicConn) Abandon() {
	c.t.Error("Abandon: the stream got no error event")
	close(c.ended)
}

// unchunk returns the payloads of a chunked body (RFC 9112 §7.1) and fails
// the test unless it is well formed and ends with the last chunk.
func unchunk(t *testing.T, b []byte) []string {
	t.Helper()
	var chunks []string
	for {
		line, rest, ok := bytes.Cut(b, []byte("\r\n"))
		if !ok {
			t.Fatalf("chunk size line missing in %q", b)
		}
		n, err := strconv.ParseUint(string(line), 16, 32)
		if err != nil {
			t.Fatalf("chunk size %q: %v", line, err)
		}
		if n == 0 {
			if string(rest) != "\r\n" {
				t.Fatalf("after the last chunk: %q", rest)
			}
			return chunks
		}
		if uint64(len(rest)) < n+2 || string(rest[n:n+2]) != "\r\n" {
			t.Fatalf("chunk of %d bytes malformed: %q", n, rest)
		}
		chunks = append(chunks, string(rest[:n]))
		b = rest[n+2:]
	}
}

// sseData returns an SSE event's "event:" name and its data.
func sseData(t *testing.T, ev string) (name, data string) {
	t.Helper()
	if !strings.HasSuffix(ev, "\n\n") {
		t.Fatalf("event %q does not end with a blank line", ev)
	}
	for _, line := range strings.Split(strings.TrimSuffix(ev, "\n\n"), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		switch k {
		case "event":
			name = v
		case "data":
			data = v
		default:
			t.Fatalf("event line %q", line)
		}
	}
	return name, data
}

func TestSessionFailureMidStreamWritesErrorEvent(t *testing.T) {
	const failed = "The session failed; see the server log."
	type errorBody struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
		SequenceNumber int `json:"sequence_number"`
		Response       struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Error  struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"response"`
	}
	for _, tc := range []struct {
		name string
		ep   Endpoint
		body string
		// first and second are the engine's two batches, written by hand;
		// the session fails while forwarding the second.
		first, second func(si *engine.StreamInfo) string
		// check judges the events after the first batch's.
		check func(t *testing.T, si *engine.StreamInfo, events []string)
	}{{
		name: "chat", ep: EndpointChatCompletions,
		body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		first: func(si *engine.StreamInfo) string {
			return fmt.Sprintf(`data: {"id":%q,"object":"chat.completion.chunk","created":%d,"model":%q,"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"logprobs":null,"finish_reason":null}]}`+"\n\n", si.ID, si.Created, si.Model)
		},
		second: func(si *engine.StreamInfo) string {
			return fmt.Sprintf(`data: {"id":%q,"object":"chat.completion.chunk","created":%d,"model":%q,"choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":null}]}`+"\n\n", si.ID, si.Created, si.Model)
		},
		check: func(t *testing.T, _ *engine.StreamInfo, events []string) {
			if len(events) != 2 || events[1] != "data: [DONE]\n\n" {
				t.Fatalf("after the error: %q, want the error and data: [DONE]", events)
			}
			_, data := sseData(t, events[0])
			var e errorBody
			// OpenAI's table words internal errors itself (it never
			// repeats an internal message).
			if err := json.Unmarshal([]byte(data), &e); err != nil || e.Error.Type != "server_error" || e.Error.Message == "" {
				t.Fatalf("error event %q (%v)", data, err)
			}
		},
	}, {
		name: "responses", ep: EndpointResponses,
		body: `{"model":"m","input":"hi","stream":true}`,
		first: func(si *engine.StreamInfo) string {
			var b strings.Builder
			for i, typ := range []string{"response.created", "response.in_progress"} {
				fmt.Fprintf(&b, "event: %s\ndata: {\"type\":%q,\"response\":{\"id\":%q,\"object\":\"response\",\"created_at\":%d,\"status\":\"in_progress\",\"model\":%q,\"output\":[]},\"sequence_number\":%d}\n\n",
					typ, typ, si.ID, si.Created, si.Model, si.FirstSequence+i)
			}
			return b.String()
		},
		second: func(si *engine.StreamInfo) string {
			return fmt.Sprintf("event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":%q,\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],\"role\":\"assistant\"},\"sequence_number\":%d}\n\n",
				engine.ItemID(engine.ItemMessage, si.ID, 0), si.FirstSequence+2)
		},
		check: func(t *testing.T, si *engine.StreamInfo, events []string) {
			if len(events) != 1 {
				t.Fatalf("after the error: %q, want response.failed alone", events)
			}
			name, data := sseData(t, events[0])
			var e errorBody
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatalf("response.failed %q: %v", data, err)
			}
			// The second batch never reached the client: the error
			// follows the last event it got.
			if name != "response.failed" || e.Type != name || e.SequenceNumber != si.FirstSequence+2 {
				t.Fatalf("event %q, sequence_number %d; want response.failed, %d", name, e.SequenceNumber, si.FirstSequence+2)
			}
			if e.Response.ID != si.ID || e.Response.Status != "failed" || e.Response.Error.Code != "server_error" || e.Response.Error.Message != failed {
				t.Fatalf("response.failed %s", data)
			}
		},
	}, {
		name: "messages", ep: EndpointMessages,
		body: `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}],"stream":true}`,
		first: func(si *engine.StreamInfo) string {
			return fmt.Sprintf("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":%q,\"type\":\"message\",\"role\":\"assistant\",\"model\":%q,\"content\":[]}}\n\n", si.ID, si.Model)
		},
		second: func(*engine.StreamInfo) string {
			return "event: ping\ndata: {\"type\":\"ping\"}\n\n"
		},
		check: func(t *testing.T, _ *engine.StreamInfo, events []string) {
			if len(events) != 1 {
				t.Fatalf("after the error: %q, want one error event", events)
			}
			name, data := sseData(t, events[0])
			var e errorBody
			if err := json.Unmarshal([]byte(data), &e); err != nil || name != "error" || e.Type != "error" || e.Error.Type != "api_error" || e.Error.Message != failed {
				t.Fatalf("event %q: %q (%v)", name, data, err)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			eng := &handFramed{started: make(chan handFramedStart, 1), aborted: make(chan struct{})}
			s, err := NewSessions(Config{Engine: eng, Models: []string{"m"}, Logger: zap.NewNop(), Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			conn := &panicConn{t: t, panicAt: 2, sent: make(chan struct{}, 1), ended: make(chan struct{})}
			req := NewRequest(tc.ep, "req-1", []byte(tc.body))
			req.Chunked = true
			s.Start(conn, req)

			st := wait(t, eng.started, "engine start")
			si := &st.si
			if !si.Chunked || si.Model != "m" || si.ID == "" {
				t.Fatalf("StreamInfo %+v", *si)
			}
			first := chunk(tc.first(si))
			st.sink.Deliver([]byte(first), nil)
			wait(t, conn.sent, "first batch forwarded")
			st.sink.Deliver([]byte(chunk(tc.second(si))), nil)
			wait(t, conn.ended, "stream end")
			wait(t, eng.aborted, "engine abort")

			conn.mu.Lock()
			body := conn.body.Bytes()
			conn.mu.Unlock()
			if !bytes.HasPrefix(body, []byte(first)) {
				t.Fatalf("stream %q does not begin with the first batch", body)
			}
			events := unchunk(t, body)
			firstEvents := len(unchunk(t, []byte(first+"0\r\n\r\n")))
			tc.check(t, si, events[firstEvents:])
			if s.Failures() != 1 {
				t.Errorf("failures %d, want 1", s.Failures())
			}
		})
	}
}

// chunk frames each SSE event of events (separated by blank lines) in its
// own HTTP/1.1 chunk.
func chunk(events string) string {
	var b strings.Builder
	for _, ev := range strings.SplitAfter(events, "\n\n") {
		if ev != "" {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(ev), ev)
		}
	}
	return b.String()
}

// wait receives from ch or fails the test after a generous bound.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}
