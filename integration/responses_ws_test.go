package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/internal/eventually"
)

// The Responses API over WebSocket end to end with openai-go v3.99's
// client.Responses.Connect: streamed responses, FinalResponse, chaining,
// the store, lanes, bad events, and the abort on a dropped socket.

func wsCreate(input string, maxTokens int64) responses.ResponsesClientEventResponseCreateParam {
	return responses.ResponsesClientEventResponseCreateParam{
		Model:           vajra.DefaultModelName,
		Input:           responses.ResponsesClientEventResponseCreateInputUnionParam{OfString: openai.String(input)},
		MaxOutputTokens: openai.Int(maxTokens),
	}
}

func connectWS(t *testing.T, client openai.Client) *responses.ResponseConnection {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := client.Responses.Connect(ctx, responses.ResponseConnectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// wsEnvelope is what every event carries beside its variant's fields.
type wsEnvelope struct {
	SequenceNumber *int64 `json:"sequence_number"`
	StreamID       string `json:"stream_id"`
}

// recvResponse reads one response's events with Recv up to its terminal
// event and checks them: numbered from 0 in order, response.created first,
// the deltas' concatenation equal to the final response's text, usage
// present. It returns the final response.
func recvResponse(t *testing.T, ctx context.Context, recv func(context.Context) (responses.ResponsesServerEventUnion, error), streamID string) responses.Response {
	t.Helper()
	var text strings.Builder
	for i := int64(0); i < 100000; i++ {
		ev, err := recv(ctx)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		var env wsEnvelope
		if err := json.Unmarshal([]byte(ev.RawJSON()), &env); err != nil {
			t.Fatal(err)
		}
		if env.SequenceNumber == nil || *env.SequenceNumber != i || env.StreamID != streamID {
			t.Fatalf("event %d: %s", i, ev.RawJSON())
		}
		if i == 0 && ev.Type != "response.created" {
			t.Fatalf("first event %s", ev.RawJSON())
		}
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.OfResponsesServerEventResponseTextWsDelta.Delta)
		case "response.completed", "response.incomplete":
			r := ev.OfResponsesServerEventResponseWsCompleted.Response
			if ev.Type == "response.incomplete" {
				r = ev.OfResponsesServerEventResponseWsIncomplete.Response
			}
			if r.OutputText() == "" || r.OutputText() != text.String() || r.Usage.OutputTokens == 0 ||
				r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens {
				t.Fatalf("deltas %q, final %s", text.String(), r.RawJSON())
			}
			return r
		case "response.failed", "error":
			t.Fatalf("event %s", ev.RawJSON())
		}
	}
	t.Fatal("no terminal event")
	return responses.Response{}
}

func TestResponsesWSStreamFinalAndChain(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	conn := connectWS(t, client)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if err := conn.Create(ctx, wsCreate(question, 200)); err != nil {
		t.Fatal(err)
	}
	first := recvResponse(t, ctx, conn.Recv, "")

	// Chained on the same socket, read with FinalResponse: the second turn
	// sees the first's conversation (its prompt holds the first's input
	// and answer).
	next := wsCreate("And then?", 200)
	next.PreviousResponseID = openai.String(first.ID)
	if err := conn.Create(ctx, next); err != nil {
		t.Fatal(err)
	}
	second, err := conn.FinalResponse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second.ID == first.ID || second.PreviousResponseID != first.ID || second.OutputText() == "" ||
		second.Usage.InputTokens <= first.Usage.InputTokens+first.Usage.OutputTokens {
		t.Fatalf("chained response %s after %s", second.RawJSON(), first.RawJSON())
	}

	// store is honoured: both stored responses are there over HTTP, an
	// unstored one is not.
	for _, r := range []*responses.Response{&first, second} {
		got, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
		if err != nil || got.ID != r.ID || got.OutputText() != r.OutputText() {
			t.Fatalf("GET %s: %v", r.ID, err)
		}
	}
	unstored := wsCreate("hi", 8)
	unstored.Store = openai.Bool(false)
	if err := conn.Create(ctx, unstored); err != nil {
		t.Fatal(err)
	}
	u, err := conn.FinalResponse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *openai.Error
	if _, err := client.Responses.Get(ctx, u.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("GET of an unstored response: %v", err)
	}
	// The connection keeps its unstored response to chain from, as OpenAI
	// does (store: false over WebSocket); another connection cannot.
	chained := wsCreate("More.", 8)
	chained.Store = openai.Bool(false)
	chained.PreviousResponseID = openai.String(u.ID)
	if err := conn.Create(ctx, chained); err != nil {
		t.Fatal(err)
	}
	c, err := conn.FinalResponse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.PreviousResponseID != u.ID || c.Usage.InputTokens <= u.Usage.InputTokens+u.Usage.OutputTokens {
		t.Fatalf("chained to an unstored response: %s after %s", c.RawJSON(), u.RawJSON())
	}
	other := connectWS(t, client)
	if err := other.Create(ctx, chained); err != nil {
		t.Fatal(err)
	}
	var pe *responses.ResponseProtocolError
	if _, err := other.FinalResponse(ctx); !errors.As(err, &pe) || pe.Event.OfResponsesServerEventResponseWsError.Error.Code != "previous_response_not_found" {
		t.Fatalf("another connection chained to an unstored response: %v", err)
	}
}

// The same under /openai/v1/, and with lanes: two stream_ids at once, each
// lane's events carrying its id, read by the SDK's lanes; then a third lane
// forks the first's conversation.
func TestResponsesWSLanes(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := openai.NewClient(option.WithBaseURL(base+"/openai/v1/"), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
	conn := connectWS(t, client)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lanes := map[string]*responses.ResponseLane{}
	for _, id := range []string{"a", "b-2"} {
		lane, err := conn.Lane(id)
		if err != nil {
			t.Fatal(err)
		}
		lanes[id] = lane
		c := wsCreate(question, 40)
		c.StreamID = openai.String(id)
		if err := conn.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	finals := map[string]responses.Response{}
	for id, lane := range lanes {
		finals[id] = recvResponse(t, ctx, lane.Recv, id)
	}

	// A new lane forks lane a's conversation: stream_id routes,
	// previous_response_id is the lineage.
	fork, err := conn.Lane("fork")
	if err != nil {
		t.Fatal(err)
	}
	c := wsCreate("Go on.", 40)
	c.StreamID = openai.String("fork")
	c.PreviousResponseID = openai.String(finals["a"].ID)
	if err := conn.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	r := recvResponse(t, ctx, fork.Recv, "fork")
	if r.PreviousResponseID != finals["a"].ID || r.Usage.InputTokens <= finals["a"].Usage.InputTokens+finals["a"].Usage.OutputTokens {
		t.Fatalf("fork %s of %s", r.RawJSON(), finals["a"].RawJSON())
	}
}

func TestResponsesWSBadEventsThenServes(t *testing.T) {
	_, _, base := startServer(t, nil)
	conn := connectWS(t, newClient(base))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	bad := wsCreate(question, 8)
	bad.Temperature = openai.Float(9)
	if err := conn.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	_, err := conn.FinalResponse(ctx)
	var pe *responses.ResponseProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("invalid create: %v", err)
	}
	e := pe.Event.OfResponsesServerEventResponseWsError
	if pe.Event.Type != "error" || e.Status != 400 || e.Error.Type != "invalid_request_error" || e.Error.Param != "temperature" || e.Error.Message == "" {
		t.Fatalf("error event %s", pe.Event.RawJSON())
	}

	for _, raw := range []string{`{"type":"response.create",`, `{"type":"response.nope"}`} {
		if err := conn.SendRaw(ctx, json.RawMessage(raw)); err != nil {
			t.Fatal(err)
		}
		ev, err := conn.Recv(ctx)
		if err != nil || ev.Type != "error" || ev.OfResponsesServerEventResponseWsError.Status != 400 {
			t.Fatalf("%s: %v %s", raw, err, ev.RawJSON())
		}
	}

	// The socket still serves.
	if err := conn.Create(ctx, wsCreate(question, 16)); err != nil {
		t.Fatal(err)
	}
	recvResponse(t, ctx, conn.Recv, "")
}

// A socket dropped (TCP) or closed (close frame) mid-response aborts the
// engine session: its final comes back aborted and the engine's slot is
// free, within milliseconds.
func TestResponsesWSDisconnectAborts(t *testing.T) {
	for _, how := range []string{"abort", "close"} {
		t.Run(how, func(t *testing.T) {
			_, obs, base := startServer(t, func(c *vajra.Config) { c.Sim.ITL = 5 * time.Millisecond })
			conn := connectWS(t, newClient(base))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			long := wsCreate(question, 4000)
			long.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffortHigh}
			if err := conn.Create(ctx, long); err != nil {
				t.Fatal(err)
			}
			for deltas := 0; deltas < 3; {
				ev, err := conn.Recv(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasSuffix(ev.Type, ".delta") {
					deltas++
				}
			}
			if got := obs.Stats().Running; got != 1 {
				t.Fatalf("running mid-stream %d", got)
			}
			gone := time.Now()
			if how == "abort" {
				conn.Abort()
			} else {
				_ = conn.Close()
			}
			select {
			case res := <-obs.finals:
				if res.Err == nil || res.Err.Kind != engine.KindAborted {
					t.Fatalf("final after the disconnect: %+v", res.Err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("not aborted after the disconnect")
			}
			waitEngine(t, obs, func(st engine.Stats) bool { return st.Running == 0 })
			if d := time.Since(gone); d > 10*time.Second { // a stall detector; milliseconds expected
				t.Fatalf("engine slot freed only %v after the disconnect", d)
			}
		})
	}
}

// Over WebSocket a response's events are, byte for byte, the data of the
// same response's SSE events: the golden stream of responses.sse, each
// event in one text frame. With a stream_id, each event carries it after
// its type.
func TestResponsesWSGolden(t *testing.T) {
	var body string
	for _, c := range goldenCases {
		if c.name == "responses" {
			body = c.body
		}
	}
	want := goldenSSEData(t, filepath.Join("testdata", "golden", "responses.sse"))
	for _, streamID := range []string{"", "g1"} {
		_, _, base := startServer(t, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/responses",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer test-key"}}, CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			t.Fatal(err)
		}
		create := `{"type":"response.create",` + strings.TrimPrefix(strings.ReplaceAll(body, "\n", ""), "{")
		if streamID != "" {
			create = `{"stream_id":"` + streamID + `",` + create[1:]
		}
		if err := ws.Write(ctx, websocket.MessageText, []byte(create)); err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			typ, got, err := ws.Read(ctx)
			if err != nil || typ != websocket.MessageText {
				t.Fatalf("event %d: %v %v", i, typ, err)
			}
			if streamID != "" {
				q := strings.IndexByte(w[len(`{"type":"`):], '"') + len(`{"type":"`) + 1
				w = w[:q] + `,"stream_id":"` + streamID + `"` + w[q:]
			}
			if got := normalise(got); string(got) != w {
				t.Fatalf("event %d:\n got %s\nwant %s", i, got, w)
			}
		}
		_ = ws.Close(websocket.StatusNormalClosure, "")
	}
}

// goldenSSEData returns the data of each event of an SSE golden file.
func goldenSSEData(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var data []string
	err = sseEvents(bytes.NewReader(b), func(_, d string) bool {
		data = append(data, d)
		return true
	})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(data) < 5 {
		t.Fatalf("%s: %d events", path, len(data))
	}
	return data
}

// An engine failure after the stream started ends the response with
// response.failed at the next sequence_number (carrying the lane's
// stream_id), FinalResponse returns the failed response, and the socket
// serves the next create.
func TestResponsesWSFailureMidStream(t *testing.T) {
	_, _, base := startServerWrapped(t, nil, func(e engine.Engine) engine.Engine { return failingEngine{e} })
	conn := connectWS(t, newClient(base))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lane, err := conn.Lane("f")
	if err != nil {
		t.Fatal(err)
	}
	c := wsCreate(failMidStream, 16)
	c.StreamID = openai.String("f")
	if err := conn.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	var last responses.ResponsesServerEventUnion
	for i := int64(0); ; i++ {
		ev, err := lane.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var env wsEnvelope
		if err := json.Unmarshal([]byte(ev.RawJSON()), &env); err != nil || env.SequenceNumber == nil || *env.SequenceNumber != i || env.StreamID != "f" {
			t.Fatalf("event %d: %s", i, ev.RawJSON())
		}
		if ev.Type == "response.failed" || ev.Type == "error" || ev.Type == "response.completed" {
			last = ev
			break
		}
	}
	r := last.OfResponsesServerEventResponseWsFailed.Response
	if last.Type != "response.failed" || r.Status != responses.ResponseStatusFailed || r.Error.Message == "" {
		t.Fatalf("terminal event %s", last.RawJSON())
	}
	if err := conn.Create(ctx, wsCreate(question, 16)); err != nil {
		t.Fatal(err)
	}
	recvResponse(t, ctx, conn.Recv, "")
}

// The agent loop WebSocket mode is for, unstored: a forced function call
// (its arguments streamed as deltas), then its output as the next turn's
// input, chained with previous_response_id on the same socket.
func TestResponsesWSToolLoopUnstored(t *testing.T) {
	_, _, base := startServer(t, nil)
	conn := connectWS(t, newClient(base))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tool := responses.ToolParamOfFunction("get_weather", map[string]any{
		"type":       "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string"}},
		"required":   []string{"city", "unit"},
	}, true)
	first := wsCreate("Weather in Oslo?", 200)
	first.Store = openai.Bool(false)
	first.Tools = []responses.ToolUnionParam{tool}
	first.ToolChoice = responses.ResponsesClientEventResponseCreateToolChoiceUnionParam{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "get_weather"}}
	if err := conn.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	var args strings.Builder
	var res responses.Response
	for done := false; !done; {
		ev, err := conn.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case "response.function_call_arguments.delta":
			args.WriteString(ev.OfResponsesServerEventResponseFunctionCallArgumentsWsDelta.Delta)
		case "response.completed":
			res, done = ev.OfResponsesServerEventResponseWsCompleted.Response, true
		case "response.failed", "response.incomplete", "error":
			t.Fatalf("event %s", ev.RawJSON())
		}
	}
	var call responses.ResponseOutputItemUnion
	for _, it := range res.Output {
		if it.Type == "function_call" {
			call = it
		}
	}
	if call.CallID == "" || call.Arguments.OfString != args.String() {
		t.Fatalf("function call %s, streamed arguments %q", res.RawJSON(), args.String())
	}
	checkWeatherArgs(t, call.Name, call.Arguments.OfString)

	next := responses.ResponsesClientEventResponseCreateParam{
		Model: vajra.DefaultModelName, MaxOutputTokens: openai.Int(8), Store: openai.Bool(false),
		PreviousResponseID: openai.String(res.ID), Tools: []responses.ToolUnionParam{tool},
		Input: responses.ResponsesClientEventResponseCreateInputUnionParam{OfResponse: &responses.ResponseInputParam{
			functionCallOutput(call.CallID, `{"temp":3}`),
		}},
	}
	if err := conn.Create(ctx, next); err != nil {
		t.Fatal(err)
	}
	r, err := conn.FinalResponse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.PreviousResponseID != res.ID || r.Usage.InputTokens <= res.Usage.InputTokens {
		t.Fatalf("second turn %s after %s", r.RawJSON(), res.RawJSON())
	}
}

// Many sockets at once, each with responses on two lanes, left in every
// way (a close frame mid-response, a TCP drop mid-response, a close after
// the responses ended): the server returns to idle (no session, engine
// request, exchange or connection left).
func TestResponsesWSManySocketsReturnToIdle(t *testing.T) {
	srv, _, base := startServer(t, func(c *vajra.Config) { c.Sim.ITL = 2 * time.Millisecond })
	client := newClient(base)
	const sockets = 12
	errs := make(chan error, sockets)
	for i := range sockets {
		go func() {
			errs <- func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				conn, err := client.Responses.Connect(ctx, responses.ResponseConnectionOptions{})
				if err != nil {
					return err
				}
				for _, lane := range []string{"x", "y"} {
					c := wsCreate(question, 60)
					c.StreamID = openai.String(lane)
					if err := conn.Create(ctx, c); err != nil {
						return err
					}
				}
				for ended := 0; ended < 2; {
					ev, err := conn.Recv(ctx)
					if err != nil {
						return err
					}
					switch {
					case ev.Type == "response.output_text.delta" && i%3 == 0:
						return conn.Close() // close frame mid-response
					case ev.Type == "response.output_text.delta" && i%3 == 1:
						conn.Abort() // TCP drop mid-response
						return nil
					case ev.Type == "response.completed" || ev.Type == "response.incomplete":
						ended++
					case ev.Type == "error" || ev.Type == "response.failed":
						return errors.New(ev.RawJSON())
					}
				}
				return conn.Close()
			}()
		}()
	}
	for range sockets {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	eventually.Report(t, "the server is idle", func() bool {
		l := srv.Live()
		return l.Sessions == 0 && l.Running == 0 && l.Waiting == 0 && l.InFlight == 0 && l.Connections == 0
	}, func() string { return fmt.Sprintf("%+v", srv.Live()) })
}

// The connection-local chain continues exactly the conversation the store
// would: the same turns chained through a stored and an unstored response
// (deterministic, temperature 0) give the second turn the same prompt.
func TestResponsesWSUnstoredChainMatchesStored(t *testing.T) {
	_, _, base := startServer(t, nil)
	conn := connectWS(t, newClient(base))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prompts := map[bool]int64{}
	for _, store := range []bool{true, false} {
		c := wsCreate(question, 24)
		c.Temperature = openai.Float(0)
		c.Instructions = openai.String("Be brief.") // instructions do not carry over either way
		c.Store = openai.Bool(store)
		if err := conn.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		first, err := conn.FinalResponse(ctx)
		if err != nil {
			t.Fatal(err)
		}
		next := wsCreate("And then?", 4)
		next.Temperature = openai.Float(0)
		next.Store = openai.Bool(store)
		next.PreviousResponseID = openai.String(first.ID)
		if err := conn.Create(ctx, next); err != nil {
			t.Fatal(err)
		}
		second, err := conn.FinalResponse(ctx)
		if err != nil {
			t.Fatal(err)
		}
		prompts[store] = second.Usage.InputTokens
	}
	if prompts[true] != prompts[false] || prompts[true] == 0 {
		t.Fatalf("chained prompt: %d tokens through the store, %d through the connection", prompts[true], prompts[false])
	}
}

// Reasoning over WebSocket: the SDK decodes every event of a response with
// a reasoning item, numbered in order, and the final response carries the
// reasoning item, then the message, with reasoning tokens in its usage.
func TestResponsesWSReasoning(t *testing.T) {
	_, _, base := startServer(t, nil)
	conn := connectWS(t, newClient(base))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := wsCreate(question, 400)
	c.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffortLow}
	if err := conn.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	r := recvResponse(t, ctx, conn.Recv, "")
	var kinds []string
	for _, it := range r.Output {
		kinds = append(kinds, it.Type)
	}
	if len(kinds) != 2 || kinds[0] != "reasoning" || kinds[1] != "message" || r.Usage.OutputTokensDetails.ReasoningTokens == 0 {
		t.Fatalf("output %v, usage %s", kinds, r.Usage.RawJSON())
	}
}

// A create takes an admission permit as an HTTP request does: with one
// permit and no queue, a running WebSocket response makes an HTTP request
// and another create 429, and its socket's close returns the permit.
func TestResponsesWSAdmission(t *testing.T) {
	srv, _, base := startServer(t, func(c *vajra.Config) {
		c.Sim.ITL = 5 * time.Millisecond
		c.MaxConcurrentRequests, c.MaxQueuedRequests = 1, 0
	})
	client := newClient(base)
	conn := connectWS(t, client)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	long := wsCreate(question, 4000)
	long.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffortHigh}
	if err := conn.Create(ctx, long); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := conn.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(ev.Type, ".delta") {
			break
		}
	}
	var apiErr *openai.Error
	if _, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: vajra.DefaultModelName, Input: textInput("hi")}); !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
		t.Fatalf("HTTP request while the socket holds the permit: %v", err)
	}
	lane, err := conn.Lane("b")
	if err != nil {
		t.Fatal(err)
	}
	other := wsCreate("hi", 4)
	other.StreamID = openai.String("b")
	if err := conn.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	ev, err := lane.Recv(ctx)
	if err != nil || ev.Type != "error" || ev.OfResponsesServerEventResponseWsError.Status != 429 {
		t.Fatalf("second create: %v %s", err, ev.RawJSON())
	}
	conn.Abort()
	eventually.True(t, "the permit is returned", func() bool { return srv.Live().InFlight == 0 })
	if _, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: vajra.DefaultModelName, Input: textInput("hi"), MaxOutputTokens: openai.Int(4)}); err != nil {
		t.Fatalf("after the socket closed: %v", err)
	}
}

// With a queue, a create waits for a permit (its lane with it) and runs
// when the HTTP request holding it ends.
func TestResponsesWSAdmissionQueue(t *testing.T) {
	srv, obs, base := startServer(t, func(c *vajra.Config) {
		c.Sim.ITL = 2 * time.Millisecond
		c.MaxConcurrentRequests, c.MaxQueuedRequests = 1, 4
	})
	client := newClient(base)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: vajra.DefaultModelName, Input: textInput(question),
		MaxOutputTokens: openai.Int(2000), Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortMedium}})
	if !st.Next() { // the HTTP stream holds the permit
		t.Fatal(st.Err())
	}
	conn := connectWS(t, client)
	if err := conn.Create(ctx, wsCreate(question, 8)); err != nil {
		t.Fatal(err)
	}
	// The create is in flight (admitted or queued: 3 with the HTTP stream
	// and the WebSocket itself) but not running: it waits for the HTTP
	// stream's permit.
	eventually.True(t, "the create reaches admission", func() bool { return srv.Live().InFlight == 3 })
	if got := obs.Stats().Running; got != 1 {
		t.Fatalf("running %d while the create waits for a permit, want 1", got)
	}
	for st.Next() {
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	recvResponse(t, ctx, conn.Recv, "")
}
