package actors

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vajra-go/vajra/codegen"
)

func TestParseCreate(t *testing.T) {
	f := func(msg, wantStreamID, wantBody string) {
		t.Helper()
		ev, body, ae := parseCreate([]byte(msg), nil)
		id := ev.streamID
		if ae != nil {
			t.Fatalf("%s: refused: %+v", msg, ae)
		}
		if id != wantStreamID || string(body) != wantBody {
			t.Fatalf("%s:\n got %q %s\nwant %q %s", msg, id, body, wantStreamID, wantBody)
		}
		if !json.Valid(body) {
			t.Fatalf("%s: body %s is not JSON", msg, body)
		}
	}
	f(`{"type":"response.create"}`, "", `{"stream":true}`)
	f(`{"type":"response.create","model":"m","input":[{"role":"user","content":"hi"}]}`, "",
		`{"model":"m","input":[{"role":"user","content":"hi"}],"stream":true}`)
	f(` { "model" : "m" , "type" : "response.create", "stream":false, "stream_id":"A-z_0.9", "generate":true, "background":false } `, "A-z_0.9",
		`{"model":"m","stream":true}`)
	if ev, _, _ := parseCreate([]byte(`{"type":"response.create","previous_response_id":"resp_\u0031"}`), nil); ev.previousID != "resp_1" {
		t.Fatalf("previous_response_id %q", ev.previousID)
	}
	f(`{"type":"response.create","previous_response_id":"resp_1"}`, "", `{"previous_response_id":"resp_1","stream":true}`)
	f(`{"type":"response.create","stream_id":null,"generate":null,"background":null,"a\u00e9":1}`, "", `{"aé":1,"stream":true}`)
	f(`{"type":"response.create","stream_id":"l\u0061ne"}`, "lane", `{"stream":true}`)
	f(`{"type":"response.create","stream_id":"`+strings.Repeat("x", 256)+`"}`, strings.Repeat("x", 256), `{"stream":true}`)

	refused := func(msg, code, param string) {
		t.Helper()
		_, _, ae := parseCreate([]byte(msg), nil)
		if ae == nil || ae.Status != 400 || ae.Code != code || ae.Param != param {
			t.Fatalf("%s: got %+v, want %s on %q", msg, ae, code, param)
		}
	}
	refused(``, "invalid_json", "")
	refused(`"response.create"`, "invalid_json", "")
	refused(`{"type":"response.create"} {}`, "invalid_json", "")
	refused(`{"type":"response.create","input":}`, "invalid_json", "")
	refused(`{"type":1}`, "invalid_json", "")
	refused(`{"type":null}`, "missing_required_parameter", "type")
	refused(`{"type":"response.create","stream_id":""}`, "invalid_stream_id", "stream_id")
	refused(`{"type":"response.create","stream_id":"`+strings.Repeat("x", 257)+`"}`, "invalid_stream_id", "stream_id")
	refused(`{"type":"response.create","stream_id":"a\"b"}`, "invalid_stream_id", "stream_id")
	refused(`{"type":"response.cancel"}`, "unknown_event_type", "type")
}

// An unknown type is quoted escaped and cut short in the error message.
func TestParseCreateDoesNotEchoRaw(t *testing.T) {
	_, _, ae := parseCreate([]byte(`{"type":"<script>\u0000`+strings.Repeat("y", 500)+`"}`), nil)
	if ae == nil || strings.Contains(ae.Message, "\x00") || len(ae.Message) > 200 {
		t.Fatalf("%+v", ae)
	}
}

func FuzzParseCreate(f *testing.F) {
	for _, s := range []string{
		`{"type":"response.create","model":"m","input":"hi","stream_id":"a"}`,
		`{"type":"response.create","stream":true,"background":false,"generate":true}`,
		`{"type":"response.steer"}`, `{}`, `[]`, `{"type":"response.create",}`, `{"a":{"b":[1,2,{"c":null}]},"type":"response.create"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		ev, body, ae := parseCreate(msg, nil)
		id := ev.streamID
		if ae != nil {
			if ae.Status != 400 || ae.Message == "" {
				t.Fatalf("refusal %+v", ae)
			}
			if id != "" && !validStreamID(id) {
				t.Fatalf("invalid stream_id %q returned", id)
			}
			return
		}
		if !json.Valid(body) || !strings.HasSuffix(string(body), `"stream":true}`) {
			t.Fatalf("body %q from %q", body, msg)
		}
		if id != "" && !validStreamID(id) {
			t.Fatalf("stream_id %q", id)
		}
	})
}

// wsFrames frames each payload as codegen's frame writers do.
func wsFrames(payloads ...string) []byte {
	var b []byte
	for _, p := range payloads {
		var mark int
		b, mark = codegen.BeginFrame(b, codegen.FramingWebSocket)
		b = append(b, p...)
		b = codegen.EndFrame(b, codegen.FramingWebSocket, mark)
	}
	return b
}

func TestAppendWithStreamID(t *testing.T) {
	long := func(n int) string {
		return `{"type":"response.output_text.delta","delta":"` + strings.Repeat("x", n) + `"}`
	}
	in := []string{
		`{"type":"response.created","sequence_number":0}`,
		long(60), long(61), long(62), // around 125/126 bytes once the member is added
		long(65480), long(65500), // around 65535
		`{"sequence_number":3}`,
	}
	out := appendWithStreamID(nil, wsFrames(in...), "lane-1")
	for i, want := range in {
		payload, rest, ok := cutTextFrame(out)
		if !ok {
			t.Fatalf("frame %d: not a whole frame", i)
		}
		if strings.HasPrefix(want, `{"type":"`) {
			q := strings.IndexByte(want[9:], '"') + 10
			want = want[:q] + `,"stream_id":"lane-1"` + want[q:]
		} else {
			want = `{"stream_id":"lane-1",` + want[1:]
		}
		if string(payload) != want {
			t.Fatalf("frame %d:\n got %.120s\nwant %.120s", i, payload, want)
		}
		var v map[string]any
		if err := json.Unmarshal(payload, &v); err != nil || v["stream_id"] != "lane-1" {
			t.Fatalf("frame %d: %v %v", i, err, v["stream_id"])
		}
		out = rest
	}
	if len(out) != 0 {
		t.Fatalf("left over %q", out)
	}
	// Bytes that are not whole text frames go as they are.
	if got := appendWithStreamID(nil, []byte{0x82, 1, 'x'}, "a"); string(got) != "\x82\x01x" {
		t.Fatalf("%q", got)
	}
}

func TestAppendWSErrorEvent(t *testing.T) {
	ae := &apiError{Status: 404, Type: "not_found_error", Code: "model_not_found", Param: "model", Message: `no "m"`}
	body := appendOpenAIError(nil, ae)
	for _, id := range []string{"", "s1"} {
		payload, rest, ok := cutTextFrame(appendWSErrorEvent(nil, 404, body, id))
		if !ok || len(rest) != 0 {
			t.Fatal("not one frame")
		}
		want := `{"type":"error",`
		if id != "" {
			want += `"stream_id":"s1",`
		}
		want += `"status":404,"error":{"message":"no \"m\"","type":"not_found_error","param":"model","code":"model_not_found"}}`
		if string(payload) != want {
			t.Fatalf("\n got %s\nwant %s", payload, want)
		}
	}
}

// discardWS is a WSConn that keeps nothing (netio's copies into its outbox
// are its own cost, measured in netio).
type discardWS struct{ n int }

func (c *discardWS) Send(p []byte)     { c.n += len(p) }
func (c *discardWS) Close(int, string) {}

// The exchange's Send forwards a delta without allocating, with and without
// a stream_id to add.
func TestResponsesWSSendAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	delta := wsFrames(`{"type":"response.output_text.delta","item_id":"msg_1_0","output_index":0,"content_index":0,"delta":" word","logprobs":[],"sequence_number":7}`)
	for _, id := range []string{"", "lane"} {
		ex := &wsExchange{ws: &responsesWS{wsBase: wsBase{conn: &discardWS{}}}, streamID: id}
		ex.Send(delta) // grows the buffer
		if n := testing.AllocsPerRun(1000, func() { ex.Send(delta) }); n != 0 {
			t.Errorf("stream_id %q: %v allocations per Send", id, n)
		}
	}
}

func BenchmarkResponsesWSSend(b *testing.B) {
	delta := wsFrames(`{"type":"response.output_text.delta","item_id":"msg_1_0","output_index":0,"content_index":0,"delta":" word","logprobs":[],"sequence_number":7}`)
	for _, id := range []string{"", "lane"} {
		name := "plain"
		if id != "" {
			name = "stream_id"
		}
		b.Run(name, func(b *testing.B) {
			ex := &wsExchange{ws: &responsesWS{wsBase: wsBase{conn: &discardWS{}}}, streamID: id}
			b.ReportAllocs()
			b.SetBytes(int64(len(delta)))
			for b.Loop() {
				ex.Send(delta)
			}
		})
	}
}
