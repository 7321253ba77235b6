package integration_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine"
	"github.com/vajra-go/vajra/internal/eventually"
	"github.com/vajra-go/vajra/internal/wiretest"
)

// The Responses API's stored statuses and background mode with openai-go:
// failed and incomplete responses are stored; background responses run
// after their HTTP exchange, are polled, resumed and cancelled. The
// failing engine is errors_test.go's failingEngine.

// TestResponsesFailedAndIncompleteStored: a response that fails after its
// stream opened is stored with status failed and its error; one cut short
// by max_output_tokens is stored incomplete with incomplete_details.
func TestResponsesFailedAndIncompleteStored(t *testing.T) {
	_, _, base := startServerWrapped(t, nil, func(e engine.Engine) engine.Engine { return failingEngine{e} })
	client := newClient(base)
	ctx := context.Background()

	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(failMidStream),
	})
	var id, last string
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "response.created" {
			id = ev.Response.ID
		}
		last = ev.Type
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if id == "" || last != "response.failed" {
		t.Fatalf("stream: id %q, last event %q", id, last)
	}
	got, err := client.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != responses.ResponseStatusFailed || got.Error.Code != "server_error" || got.Error.Message != "simulated engine failure" {
		t.Fatalf("stored failed response %s", got.RawJSON())
	}

	res, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(3),
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err = client.Responses.Get(ctx, res.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != responses.ResponseStatusIncomplete || got.IncompleteDetails.Reason != "max_output_tokens" || got.RawJSON() != res.RawJSON() {
		t.Fatalf("stored incomplete response %s\nPOST answered %s", got.RawJSON(), res.RawJSON())
	}
}

// endless is an engine whose requests ignore end of sequence: each runs to
// its max_output_tokens, so that a test knows how long it runs (the
// simulator's own answers end after a few dozen tokens).
type endless struct{ engine.Engine }

func (e endless) Start(req *engine.Request, sink engine.Sink) (engine.Session, error) {
	req.Sampling.IgnoreEOS = true
	return e.Engine.Start(req, sink)
}

// startSlowServer is a server whose engine takes itl per token and runs
// every request to its max_output_tokens.
func startSlowServer(t *testing.T, itl time.Duration) (*vajra.Server, *observed, string) {
	return startServerWrapped(t, func(c *vajra.Config) { c.Sim.ITL = itl },
		func(e engine.Engine) engine.Engine { return endless{e} })
}

// pollUntil GETs id until done says so about what the client sees, or
// fails the test after a bound.
func pollUntil(t *testing.T, client openai.Client, id string, done func(*responses.Response) bool) *responses.Response {
	t.Helper()
	var got *responses.Response
	eventually.True(t, "response "+id+": the condition", func() bool {
		var err error
		got, err = client.Responses.Get(context.Background(), id, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if done(got) {
			return true
		}
		switch got.Status {
		case responses.ResponseStatusQueued, responses.ResponseStatusInProgress:
		default:
			t.Fatalf("status %q while polling: %s", got.Status, got.RawJSON())
		}
		return false
	})
	return got
}

// TestResponsesBackgroundPoll: a background create answers at once,
// queued; GET shows it in progress with its output so far, then the stored
// final object, which input_items and previous_response_id can use.
func TestResponsesBackgroundPoll(t *testing.T) {
	_, _, base := startSlowServer(t, 10*time.Millisecond)
	client := newClient(base)
	ctx := context.Background()
	res, err := client.Responses.New(ctx, responses.ResponseNewParams{
		// 1 s at 10 ms a token: long enough to be seen in progress.
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(100),
		Background: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != responses.ResponseStatusQueued || !res.Background || len(res.Output) != 0 || !strings.HasPrefix(res.ID, "resp_") {
		t.Fatalf("background create answered %s", res.RawJSON())
	}
	partial := pollUntil(t, client, res.ID, func(r *responses.Response) bool {
		return r.Status == responses.ResponseStatusInProgress && r.OutputText() != ""
	})
	final := pollUntil(t, client, res.ID, func(r *responses.Response) bool { return !inFlight(r.Status) })
	if final.Status != responses.ResponseStatusIncomplete || final.Usage.OutputTokens != 100 {
		t.Fatalf("final %s", final.RawJSON())
	}
	if !final.Background || final.Usage.OutputTokens == 0 || !strings.HasPrefix(final.OutputText(), partial.OutputText()) {
		t.Fatalf("final %q does not extend the partial %q: %s", final.OutputText(), partial.OutputText(), final.RawJSON())
	}
	again, err := client.Responses.Get(ctx, res.ID, responses.ResponseGetParams{})
	if err != nil || again.RawJSON() != final.RawJSON() {
		t.Fatalf("stored object changed: %v\n%s\n%s", err, again.RawJSON(), final.RawJSON())
	}
	page, err := client.Responses.InputItems.List(ctx, res.ID, responses.InputItemListParams{})
	if err != nil || len(page.Data) != 1 {
		t.Fatalf("input items: %v", err)
	}
	// Cancelling a finished background response answers it unchanged.
	c, err := client.Responses.Cancel(ctx, res.ID)
	if err != nil || c.RawJSON() != final.RawJSON() {
		t.Fatalf("cancel of a finished response: %v %s", err, c.RawJSON())
	}
	next, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput("More."), MaxOutputTokens: openai.Int(4),
		PreviousResponseID: openai.String(res.ID),
	})
	if err != nil || next.Usage.InputTokens <= final.Usage.InputTokens {
		t.Fatalf("chained to a background response: %v", err)
	}
}

func inFlight(s responses.ResponseStatus) bool {
	return s == responses.ResponseStatusQueued || s == responses.ResponseStatusInProgress
}

// TestResponsesBackgroundCancel: cancelling a running background response
// aborts its engine session (the slot is free at once), stores it
// cancelled with the output it had, and answers that object; a second
// cancel answers it unchanged.
func TestResponsesBackgroundCancel(t *testing.T) {
	_, obs, base := startSlowServer(t, 10*time.Millisecond)
	client := newClient(base)
	ctx := context.Background()
	res, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(5000),
		Background: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	partial := pollUntil(t, client, res.ID, func(r *responses.Response) bool { return r.OutputText() != "" })
	addr := strings.TrimPrefix(base, "http://")
	if v := value(scrape(t, addr), "vajra_responses_background_running"); v != 1 {
		t.Fatalf("background_running %v while it runs, want 1", v)
	}
	// While it runs: its input items are there; it cannot be deleted or
	// continued yet.
	if page, err := client.Responses.InputItems.List(ctx, res.ID, responses.InputItemListParams{}); err != nil || len(page.Data) != 1 {
		t.Fatalf("input_items while running: %v", err)
	}
	var apiErr *openai.Error
	if err := client.Responses.Delete(ctx, res.ID); !asError(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("delete while running: %v", err)
	}
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput("next"), PreviousResponseID: openai.String(res.ID),
	})
	if !asError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "previous_response_id" {
		t.Fatalf("continuing a running response: %v", err)
	}
	c, err := client.Responses.Cancel(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != responses.ResponseStatusCancelled || c.ID != res.ID || !strings.HasPrefix(c.OutputText(), partial.OutputText()) {
		t.Fatalf("cancel answered %s (partial %q)", c.RawJSON(), partial.OutputText())
	}
	select {
	case final := <-obs.finals:
		if final.Err == nil || final.Err.Kind != engine.KindAborted {
			t.Fatalf("engine final %+v", final.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the engine never ended the cancelled request")
	}
	// The engine publishes its figures as it ends the step: a bounded wait.
	waitEngine(t, obs, func(st engine.Stats) bool { return st.Running == 0 && st.Waiting == 0 })
	got, err := client.Responses.Get(ctx, res.ID, responses.ResponseGetParams{})
	if err != nil || got.RawJSON() != c.RawJSON() {
		t.Fatalf("stored after cancel: %v\n%s\n%s", err, got.RawJSON(), c.RawJSON())
	}
	// The GET found the final record, so the store has dropped the live entry.
	if v := value(scrape(t, addr), "vajra_responses_background_running"); v != 0 {
		t.Fatalf("background_running %v after the cancel, want 0", v)
	}
	again, err := client.Responses.Cancel(ctx, res.ID)
	if err != nil || again.RawJSON() != c.RawJSON() {
		t.Fatalf("second cancel: %v %s", err, again.RawJSON())
	}
}

// TestResponsesBackgroundRefusals: background needs store; a foreground
// response can be neither cancelled nor streamed again; an unknown id is
// 404.
func TestResponsesBackgroundRefusals(t *testing.T) {
	_, _, base := startServer(t, nil)
	client := newClient(base)
	ctx := context.Background()
	var apiErr *openai.Error
	_, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput("hi"), Background: openai.Bool(true), Store: openai.Bool(false),
	})
	if !asError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "background" {
		t.Fatalf("background without store: %v", err)
	}
	res, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput("hi"), MaxOutputTokens: openai.Int(4),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Responses.Cancel(ctx, res.ID); !asError(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "synchronous") {
		t.Fatalf("cancel of a foreground response: %v", err)
	}
	s := client.Responses.GetStreaming(ctx, res.ID, responses.ResponseGetParams{})
	for s.Next() {
	}
	if err := s.Err(); !asError(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "stream" {
		t.Fatalf("streaming a foreground response again: %v", err)
	}
	if _, err := client.Responses.Cancel(ctx, "resp_unknown"); !asError(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("cancel of an unknown id: %v", err)
	}
}

// readStream reads a Responses event stream to its end: the events'
// sequence_numbers must count up from first; it returns the text deltas,
// the last event's type and its response object.
func readStream(t *testing.T, s interface {
	Next() bool
	Current() responses.ResponseStreamEventUnion
	Err() error
}, first int64) (text string, last string, final responses.Response) {
	t.Helper()
	var b strings.Builder
	seq := first
	for s.Next() {
		ev := s.Current()
		if ev.SequenceNumber != seq {
			t.Fatalf("sequence_number %d, want %d", ev.SequenceNumber, seq)
		}
		seq++
		if ev.Type == "response.output_text.delta" {
			b.WriteString(ev.Delta)
		}
		last, final = ev.Type, ev.Response
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String(), last, final
}

// TestResponsesBackgroundStreamResume: a streamed background response
// whose client leaves goes on (it completes and is stored);
// GetStreaming with StartingAfter resumes at the next sequence_number with
// the logged events and then the live ones, to the end; once finished, its
// kept events replay the same way.
func TestResponsesBackgroundStreamResume(t *testing.T) {
	_, _, base := startSlowServer(t, 10*time.Millisecond)
	client := newClient(base)
	ctx := context.Background()
	postCtx, leave := context.WithCancel(ctx)
	defer leave()
	stream := client.Responses.NewStreaming(postCtx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(80),
		Background: openai.Bool(true),
	})
	var id string
	var seen strings.Builder
	last := int64(-1)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != last+1 {
			t.Fatalf("sequence_number %d after %d", ev.SequenceNumber, last)
		}
		last = ev.SequenceNumber
		switch ev.Type {
		case "response.created":
			id = ev.Response.ID
			if !ev.Response.Background {
				t.Fatalf("created %s", ev.Response.RawJSON())
			}
		case "response.output_text.delta":
			seen.WriteString(ev.Delta)
		}
		if seen.Len() > 0 && last >= 6 {
			break
		}
	}
	leave() // the client disconnects mid-stream
	stream.Close()
	if id == "" || seen.Len() == 0 {
		t.Fatalf("stream before the disconnect: id %q, text %q, err %v", id, seen.String(), stream.Err())
	}

	resumed := client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(last)})
	rest, end, final := readStream(t, resumed, last+1)
	if rest == "" || end != "response.completed" && end != "response.incomplete" {
		t.Fatalf("resumed stream: text %q, ended with %q", rest, end)
	}
	if final.OutputText() != seen.String()+rest {
		t.Fatalf("final text %q, streamed %q + resumed %q", final.OutputText(), seen.String(), rest)
	}
	got, err := client.Responses.Get(ctx, id, responses.ResponseGetParams{})
	if err != nil || got.Status != final.Status || got.OutputText() != final.OutputText() || !got.Background {
		t.Fatalf("stored after the disconnect: %v %s", err, got.RawJSON())
	}

	// Finished: the kept events replay, from the start or after n.
	all, end2, final2 := readStream(t, client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{}), 0)
	if all != final.OutputText() || end2 != end || final2.RawJSON() != final.RawJSON() {
		t.Fatalf("replay: text %q end %q", all, end2)
	}
	tail, _, _ := readStream(t, client.Responses.GetStreaming(ctx, id, responses.ResponseGetParams{StartingAfter: openai.Int(last)}), last+1)
	if tail != rest {
		t.Fatalf("replay after %d: %q, want %q", last, tail, rest)
	}

	// OpenAI's documented form, the query's stream=true, over HTTP/1.0:
	// the events unframed, the body ended by the close.
	addr := strings.TrimPrefix(base, "http://")
	conn := wiretest.DialRaw(t, addr)
	fmt.Fprintf(conn, "GET /v1/responses/%s?stream=true&starting_after=%d HTTP/1.0\r\nAuthorization: Bearer test-key\r\n\r\n", id, last)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	raw, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	head, body, _ := strings.Cut(string(raw), "\r\n\r\n")
	if !strings.HasPrefix(head, "HTTP/1.0 200") || !strings.Contains(head, "text/event-stream") ||
		!strings.HasPrefix(body, "event: ") || !strings.Contains(body, fmt.Sprintf(`"sequence_number":%d}`, last+1)) ||
		strings.Contains(body, fmt.Sprintf(`"sequence_number":%d}`, last)) {
		t.Fatalf("raw resume:\n%s", raw)
	}
}

// TestResponsesBackgroundStop: a server that stops aborts its background
// responses (no connection of theirs is left to close), so Stop returns at
// once rather than when they would have finished.
func TestResponsesBackgroundStop(t *testing.T) {
	srv, _, base := startSlowServer(t, 10*time.Millisecond) // 50 s to its end
	client := newClient(base)
	res, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(5000),
		Background: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(t, client, res.ID, func(r *responses.Response) bool { return r.OutputText() != "" })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("stop with a background response running: %v after %v", err, time.Since(start))
	}
}

// TestResponsesBackgroundStreamBound: at most 16 clients stream one
// background response at once (429 past it), and the place of each that
// leaves is free again.
func TestResponsesBackgroundStreamBound(t *testing.T) {
	_, _, base := startSlowServer(t, 10*time.Millisecond)
	client := newClient(base)
	ctx := context.Background()
	res, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: vajra.DefaultModelName, Input: textInput(question), MaxOutputTokens: openai.Int(5000),
		Background: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Responses.Cancel(ctx, res.ID)
	addr := strings.TrimPrefix(base, "http://")
	follow := func() (net.Conn, int) {
		conn := wiretest.DialRaw(t, addr)
		fmt.Fprintf(conn, "GET /v1/responses/%s?stream=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test-key\r\n\r\n", res.ID)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var status int
		fmt.Sscanf(line, "HTTP/1.1 %d", &status)
		return conn, status
	}
	var open []net.Conn
	for range 16 {
		conn, status := follow()
		if status != 200 {
			t.Fatalf("follower %d: status %d", len(open)+1, status)
		}
		open = append(open, conn)
	}
	if conn, status := follow(); status != 429 {
		t.Fatalf("17th follower: status %d, want 429", status)
	} else {
		conn.Close()
	}
	for _, c := range open {
		c.Close()
	}
	// The leavers' places come back as their sessions hear of it.
	eventually.True(t, "a follower is served after 16 left", func() bool {
		conn, status := follow()
		conn.Close()
		return status == 200
	})
}
