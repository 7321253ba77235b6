package openai

import (
	"encoding/json"
	"testing"

	"github.com/vajra-go/vajra/codegen"
)

// FuzzDecodeRealtimeClientEvent decodes arbitrary client events: decoding,
// applying a session update or a response's settings and validating items
// must never panic; every rejection names a code; an accepted session is
// rendered as valid JSON.
func FuzzDecodeRealtimeClientEvent(f *testing.F) {
	for _, s := range []string{
		`{"type":"session.update","event_id":"e","session":{"type":"realtime","instructions":"x","output_modalities":["text"],"max_output_tokens":"inf","temperature":0.5}}`,
		`{"type":"session.update","session":{"modalities":["text"],"max_response_output_tokens":7,"input_audio_format":"pcm16","audio":{"input":{"format":{"type":"audio/pcm","rate":24000},"transcription":{"model":"m"}}}}}`,
		`{"type":"conversation.item.create","previous_item_id":"root","item":{"id":"a","type":"message","role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_audio","transcript":"t"}]}}`,
		`{"type":"response.create","response":{"conversation":"none","input":[{"type":"message","role":"system","content":[]}],"max_output_tokens":3}}`,
		`{"type":"input_audio_buffer.append","audio":"AAAA"}`,
		`{"type":"response.cancel","response_id":"r"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		var ev RealtimeClientEvent
		if DecodeRealtimeClientEvent(msg, &ev) != nil {
			return
		}
		code := func(pe *ParamError) {
			if pe != nil && pe.Code == "" {
				t.Fatalf("error without code: %+v", pe)
			}
		}
		var c RealtimeConfig
		if ev.Session != nil {
			for _, tr := range []bool{false, true} {
				_, pe := ev.Session.Apply(&c, tr)
				code(pe)
			}
			var w RealtimeEvents
			w.Reset([]byte("e_"), codegen.FramingWebSocket, false)
			mt := RealtimeMaxTokens{N: c.MaxOutputTokens}
			out := w.AppendSession(nil, "session.updated", &RealtimeSessionObject{Instructions: &c.Instructions, MaxOutputTokens: &mt})
			if p := wsPayloads(t, out); len(p) != 1 || !json.Valid(p[0]) {
				t.Fatalf("session event is not JSON: %s", out)
			}
		}
		if ev.Response != nil {
			code(ev.Response.Apply(&c))
			for i := range ev.Response.Input {
				_, pe := ev.Response.Input[i].Message("response.input")
				code(pe)
			}
		}
		if ev.Item != nil {
			m, pe := ev.Item.Message("item")
			code(pe)
			if pe == nil {
				var w RealtimeEvents
				w.Reset([]byte("e_"), codegen.FramingWebSocket, true)
				out := w.AppendItemRetrieved(nil, &RealtimeItem{ID: ev.Item.ID, Role: m.Role, Text: m.Text, Status: "completed"})
				if p := wsPayloads(t, out); len(p) != 1 || !json.Valid(p[0]) {
					t.Fatalf("item event is not JSON: %s", out)
				}
			}
		}
	})
}
