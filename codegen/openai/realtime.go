package openai

//go:generate go tool easyjson -no_std_marshalers realtime.go

import (
	"strconv"

	"github.com/mailru/easyjson/jlexer"
	"github.com/mailru/easyjson/jwriter"
	"github.com/mailru/easyjson/opt"
)

// This file holds the schemas of the OpenAI Realtime API
// (GET /v1/realtime, WebSocket): the client events Vajra understands and
// the session objects it sends back. Codecs for the structs marked
// easyjson:json are generated into realtime_easyjson.go. Both the GA names
// (output_modalities, max_output_tokens, audio.input.format) and the beta
// names (modalities, max_response_output_tokens, input_audio_format) are
// read; which ones the server writes follows the session's shape.
// Fields Vajra does not serve (voice, tools, turn_detection, ...) are
// skipped when the client sends them.

// RealtimeClientEvent is one client event. Which members matter depends on
// Type; the others are left zero.
//
//easyjson:json
type RealtimeClientEvent struct {
	Type    string `json:"type"`
	EventID string `json:"event_id"`
	// session.update
	Session *RealtimeSessionParam `json:"session"`
	// conversation.item.create
	Item           *RealtimeItemParam `json:"item"`
	PreviousItemID opt.String         `json:"previous_item_id"`
	// conversation.item.delete, conversation.item.retrieve
	ItemID string `json:"item_id"`
	// response.create
	Response *RealtimeResponseParam `json:"response"`
	// response.cancel
	ResponseID string `json:"response_id"`
	// input_audio_buffer.append: base64 of the audio's bytes, decoded by
	// the session (so that bad base64 gets an error naming "audio")
	Audio string `json:"audio"`
}

// RealtimeSessionParam is session.update's session (and a response's
// configuration shares its knobs: RealtimeResponseParam).
//
//easyjson:json
type RealtimeSessionParam struct {
	// Type is "realtime" or "transcription" (GA); it must match the
	// session's kind when given.
	Type                    string              `json:"type"`
	Model                   string              `json:"model"`
	Instructions            opt.String          `json:"instructions"`
	OutputModalities        []string            `json:"output_modalities"`
	Modalities              []string            `json:"modalities"`
	MaxOutputTokens         RealtimeMaxTokens   `json:"max_output_tokens"`
	MaxResponseOutputTokens RealtimeMaxTokens   `json:"max_response_output_tokens"`
	Temperature             opt.Float64         `json:"temperature"`
	Audio                   *RealtimeAudioParam `json:"audio"`
	// InputAudioFormat is the beta shape's input format ("pcm16", ...).
	InputAudioFormat string `json:"input_audio_format"`
	// InputAudioTranscription is the beta transcription session's model.
	InputAudioTranscription *RealtimeTranscriptionParam `json:"input_audio_transcription"`
}

// RealtimeAudioParam is a GA session's audio configuration.
//
//easyjson:json
type RealtimeAudioParam struct {
	Input *RealtimeAudioInputParam `json:"input"`
}

// RealtimeAudioInputParam is a GA session's input audio configuration.
//
//easyjson:json
type RealtimeAudioInputParam struct {
	Format        *RealtimeAudioFormat        `json:"format"`
	Transcription *RealtimeTranscriptionParam `json:"transcription"`
}

// RealtimeAudioFormat is a GA audio format: {"type":"audio/pcm","rate":24000}.
//
//easyjson:json
type RealtimeAudioFormat struct {
	Type string  `json:"type"`
	Rate opt.Int `json:"rate"`
}

// RealtimeTranscriptionParam names the transcription model.
//
//easyjson:json
type RealtimeTranscriptionParam struct {
	Model    string `json:"model"`
	Language string `json:"language"`
	Prompt   string `json:"prompt"`
}

// RealtimeItemParam is a conversation item from the client.
//
//easyjson:json
type RealtimeItemParam struct {
	ID      string                 `json:"id"`
	Type    string                 `json:"type"`
	Role    string                 `json:"role"`
	Status  string                 `json:"status"`
	Content []RealtimeContentParam `json:"content"`
}

// RealtimeContentParam is one content part of a client's item.
//
//easyjson:json
type RealtimeContentParam struct {
	Type       string `json:"type"`
	Text       string `json:"text"`
	Transcript string `json:"transcript"`
	Audio      string `json:"audio"`
}

// RealtimeResponseParam is response.create's response.
//
//easyjson:json
type RealtimeResponseParam struct {
	Instructions            opt.String        `json:"instructions"`
	OutputModalities        []string          `json:"output_modalities"`
	Modalities              []string          `json:"modalities"`
	MaxOutputTokens         RealtimeMaxTokens `json:"max_output_tokens"`
	MaxResponseOutputTokens RealtimeMaxTokens `json:"max_response_output_tokens"`
	Temperature             opt.Float64       `json:"temperature"`
	// Conversation is "auto" (the default: the response reads and joins
	// the conversation) or "none" (out of band: it does neither).
	Conversation string `json:"conversation"`
	// Input, when given, is the response's whole context instead of the
	// conversation.
	Input []RealtimeItemParam `json:"input"`
}

// RealtimeMaxTokens is a max_output_tokens value: an integer or "inf".
type RealtimeMaxTokens struct {
	Set bool // the member was present
	// N is the cap; 0 means "inf" (up to the context).
	N   int
	Bad bool // present but neither a positive integer nor "inf"
}

// UnmarshalEasyJSON implements easyjson.Unmarshaler. A value out of range
// is kept as Bad for the caller to refuse with its own message.
func (m *RealtimeMaxTokens) UnmarshalEasyJSON(in *jlexer.Lexer) {
	*m = RealtimeMaxTokens{Set: true}
	switch in.CurrentToken() {
	case jlexer.TokenNull:
		in.Skip()
		m.Set = false
	case jlexer.TokenString:
		if in.String() != "inf" {
			m.Bad = true
		}
	case jlexer.TokenNumber:
		v := in.Int()
		if v < 1 {
			m.Bad = true
		}
		m.N = v
	default:
		unionError(in, `an integer or "inf"`)
	}
}

// MarshalEasyJSON implements easyjson.Marshaler: the number, or "inf".
func (m RealtimeMaxTokens) MarshalEasyJSON(w *jwriter.Writer) {
	if m.N <= 0 {
		w.RawString(`"inf"`)
		return
	}
	w.Int(m.N)
}

// appendMaxTokens appends n as a max_output_tokens value ("inf" for 0).
func appendMaxTokens(dst []byte, n int) []byte {
	if n <= 0 {
		return append(dst, `"inf"`...)
	}
	return strconv.AppendInt(dst, int64(n), 10)
}

// DecodeRealtimeClientEvent decodes one client event into ev (reset first).
// The decoder copies what it keeps: msg may be reused after it returns.
func DecodeRealtimeClientEvent(msg []byte, ev *RealtimeClientEvent) error {
	*ev = RealtimeClientEvent{}
	if pe := checkText(msg); pe != nil {
		return pe
	}
	in := jlexer.Lexer{Data: msg}
	ev.UnmarshalEasyJSON(&in)
	if err := in.Error(); err != nil {
		return decodeError(msg, err)
	}
	return nil
}

// RealtimeSessionObject is the session of session.created and
// session.updated, in the GA shape or the beta shape: the session fills
// the members of its shape and leaves the other shape's empty (omitted);
// RealtimeEvents.AppendSession renders it.
//
//easyjson:json
type RealtimeSessionObject struct {
	Type   string `json:"type,omitempty"`
	Object string `json:"object"`
	ID     string `json:"id"`
	Model  string `json:"model,omitempty"`
	// GA: output_modalities; beta: modalities.
	OutputModalities []string `json:"output_modalities,omitempty"`
	Modalities       []string `json:"modalities,omitempty"`
	Instructions     *string  `json:"instructions,omitempty"`
	// GA: audio.input.format (and the transcription model); beta:
	// input_audio_format and input_audio_transcription.
	Audio                   *RealtimeAudioObject        `json:"audio,omitempty"`
	InputAudioFormat        string                      `json:"input_audio_format,omitempty"`
	InputAudioTranscription *RealtimeTranscriptionParam `json:"input_audio_transcription,omitempty"`
	TurnDetection           *RealtimeNull               `json:"turn_detection,omitempty"`
	Tools                   []struct{}                  `json:"tools,omitempty"`
	ToolChoice              string                      `json:"tool_choice,omitempty"`
	Temperature             opt.Float64                 `json:"temperature,omitempty"`
	// GA: max_output_tokens; beta: max_response_output_tokens.
	MaxOutputTokens         *RealtimeMaxTokens `json:"max_output_tokens,omitempty"`
	MaxResponseOutputTokens *RealtimeMaxTokens `json:"max_response_output_tokens,omitempty"`
	ExpiresAt               int64              `json:"expires_at"`
}

// RealtimeNull renders as null: a member the API shape always carries
// that Vajra has no value for (turn_detection: Vajra does no voice
// activity detection).
type RealtimeNull struct{}

// MarshalEasyJSON implements easyjson.Marshaler.
func (RealtimeNull) MarshalEasyJSON(w *jwriter.Writer) { w.RawString("null") }

// RealtimeAudioObject is a GA session's audio configuration as echoed.
//
//easyjson:json
type RealtimeAudioObject struct {
	Input RealtimeAudioInputObject `json:"input"`
}

// RealtimeAudioInputObject is a GA session's input audio as echoed.
//
//easyjson:json
type RealtimeAudioInputObject struct {
	Format        RealtimeAudioFormatObject   `json:"format"`
	Transcription *RealtimeTranscriptionParam `json:"transcription"`
	TurnDetection *struct{}                   `json:"turn_detection"`
}

// RealtimeAudioFormatObject is an audio format as echoed.
//
//easyjson:json
type RealtimeAudioFormatObject struct {
	Type string `json:"type"`
	Rate int    `json:"rate"`
}

// RealtimeConfig is a session's generation settings, or one response's
// (the session's with the response's overrides).
type RealtimeConfig struct {
	Instructions string
	// MaxOutputTokens caps a response's tokens; 0 means "inf".
	MaxOutputTokens int
	Temperature     float64
}

// Realtime temperature bounds: the engine's own (the API documents 0.6 to
// 1.2 for its audio models; Vajra takes what its engines take).
const (
	RealtimeMinTemperature = 0
	RealtimeMaxTemperature = 2
	// RealtimeDefaultTemperature is the API's default.
	RealtimeDefaultTemperature = 0.8
	// RealtimeSampleRate is the only input rate served: PCM16 mono at 24 kHz.
	RealtimeSampleRate = 24000
)

// RealtimeSessionChange is what session.update asks for beyond the
// generation settings: a model to check against the served ones.
type RealtimeSessionChange struct {
	Model              string // session.model, "" when not given
	TranscriptionModel string // the transcription model, "" when not given
}

// Apply validates session.update's session p for a session of the given
// kind and applies it to c. On error c is unchanged.
func (p *RealtimeSessionParam) Apply(c *RealtimeConfig, transcription bool) (RealtimeSessionChange, *ParamError) {
	var ch RealtimeSessionChange
	want := "realtime"
	if transcription {
		want = "transcription"
	}
	if p.Type != "" && p.Type != want {
		return ch, &ParamError{Param: "session.type", Code: CodeInvalidValue,
			Message: "This is a " + want + " session; session.type cannot change to " + quoteValue(p.Type) + "."}
	}
	n := *c
	if err := applyGeneration(&n, "session.", p.Instructions, p.OutputModalities, p.Modalities,
		p.MaxOutputTokens, p.MaxResponseOutputTokens, p.Temperature); err != nil {
		return ch, err
	}
	if p.InputAudioFormat != "" && p.InputAudioFormat != "pcm16" {
		return ch, &ParamError{Param: "session.input_audio_format", Code: CodeUnsupportedValue,
			Message: "Only pcm16 input audio (PCM16 mono, 24 kHz) is supported, got " + quoteValue(p.InputAudioFormat) + "."}
	}
	if p.InputAudioTranscription != nil {
		ch.TranscriptionModel = p.InputAudioTranscription.Model
	}
	if a := p.Audio; a != nil && a.Input != nil {
		if f := a.Input.Format; f != nil {
			if f.Type != "" && f.Type != "audio/pcm" {
				return ch, &ParamError{Param: "session.audio.input.format.type", Code: CodeUnsupportedValue,
					Message: "Only audio/pcm input audio (PCM16 mono, 24 kHz) is supported, got " + quoteValue(f.Type) + "."}
			}
			if f.Rate.IsDefined() && f.Rate.V != RealtimeSampleRate {
				return ch, &ParamError{Param: "session.audio.input.format.rate", Code: CodeUnsupportedValue,
					Message: "Only a rate of 24000 is supported, got " + strconv.Itoa(f.Rate.V) + "."}
			}
		}
		if t := a.Input.Transcription; t != nil {
			ch.TranscriptionModel = t.Model
		}
	}
	ch.Model = p.Model
	*c = n
	return ch, nil
}

// Apply validates response.create's response p and applies its overrides
// to c (a copy of the session's settings).
func (p *RealtimeResponseParam) Apply(c *RealtimeConfig) *ParamError {
	if p.Conversation != "" && p.Conversation != "auto" && p.Conversation != "none" {
		return &ParamError{Param: "response.conversation", Code: CodeInvalidValue,
			Message: "response.conversation must be \"auto\" or \"none\", got " + quoteValue(p.Conversation) + "."}
	}
	return applyGeneration(c, "response.", p.Instructions, p.OutputModalities, p.Modalities,
		p.MaxOutputTokens, p.MaxResponseOutputTokens, p.Temperature)
}

// applyGeneration validates and applies the settings a session and a
// response share; prefix names the object in error params.
func applyGeneration(c *RealtimeConfig, prefix string, instr opt.String, outMods, mods []string,
	maxOut, maxResp RealtimeMaxTokens, temp opt.Float64) *ParamError {
	if instr.IsDefined() {
		c.Instructions = instr.V
	}
	for _, m := range [2]struct {
		name string
		v    []string
	}{{"output_modalities", outMods}, {"modalities", mods}} {
		if m.v == nil {
			continue
		}
		if len(m.v) == 0 {
			return &ParamError{Param: prefix + m.name, Code: CodeInvalidValue, Message: prefix + m.name + " must not be empty."}
		}
		for _, v := range m.v {
			switch v {
			case "text":
			case "audio":
				return &ParamError{Param: prefix + m.name, Code: CodeUnsupportedValue,
					Message: "Audio output is not supported by this server; use [\"text\"]."}
			default:
				return &ParamError{Param: prefix + m.name, Code: CodeInvalidValue,
					Message: "Unknown modality " + quoteValue(v) + "; supported: \"text\"."}
			}
		}
	}
	for _, m := range [2]struct {
		name string
		v    RealtimeMaxTokens
	}{{"max_output_tokens", maxOut}, {"max_response_output_tokens", maxResp}} {
		if !m.v.Set {
			continue
		}
		if m.v.Bad {
			return &ParamError{Param: prefix + m.name, Code: CodeInvalidValue,
				Message: prefix + m.name + " must be a positive integer or \"inf\"."}
		}
		c.MaxOutputTokens = m.v.N
	}
	if temp.IsDefined() {
		if temp.V < RealtimeMinTemperature || temp.V > RealtimeMaxTemperature {
			return &ParamError{Param: prefix + "temperature", Code: CodeInvalidValue,
				Message: prefix + "temperature must be between 0 and 2, got " + strconv.FormatFloat(temp.V, 'g', -1, 64) + "."}
		}
		c.Temperature = temp.V
	}
	return nil
}

// RealtimeMessage is a validated conversation message item.
type RealtimeMessage struct {
	Role string // user, assistant or system
	Text string // the text parts (and audio transcripts) joined
}

// Message validates a client's item (param names it: "item" or
// "response.input[2]") as a message and returns its role and text. Vajra
// serves message items with text content (and input_audio parts that carry
// a transcript); other item types are refused.
func (it *RealtimeItemParam) Message(param string) (RealtimeMessage, *ParamError) {
	var m RealtimeMessage
	if it.Type != "message" {
		if it.Type == "" {
			return m, &ParamError{Param: param + ".type", Code: CodeMissing, Message: param + ".type is required."}
		}
		return m, &ParamError{Param: param + ".type", Code: CodeUnsupportedValue,
			Message: "Item type " + quoteValue(it.Type) + " is not supported by this server; only \"message\" items are."}
	}
	switch it.Role {
	case "user", "assistant", "system":
	case "":
		return m, &ParamError{Param: param + ".role", Code: CodeMissing, Message: param + ".role is required."}
	default:
		return m, &ParamError{Param: param + ".role", Code: CodeInvalidValue,
			Message: "Unknown role " + quoteValue(it.Role) + "; expected user, assistant or system."}
	}
	m.Role = it.Role
	var n int
	for i := range it.Content {
		n += len(it.Content[i].Text) + len(it.Content[i].Transcript)
	}
	text := make([]byte, 0, n)
	for i := range it.Content {
		c := &it.Content[i]
		p := param + ".content[" + strconv.Itoa(i) + "]"
		switch c.Type {
		case "input_text", "output_text", "text":
			text = append(text, c.Text...)
		case "input_audio", "output_audio", "audio":
			if c.Audio != "" || c.Transcript == "" {
				return m, &ParamError{Param: p, Code: CodeUnsupportedContent,
					Message: "Audio content is served only with a transcript and no audio; send audio to a transcription session (?intent=transcription)."}
			}
			text = append(text, c.Transcript...)
		default:
			return m, &ParamError{Param: p + ".type", Code: CodeUnsupportedContent,
				Message: "Content type " + quoteValue(c.Type) + " is not supported by this server."}
		}
	}
	m.Text = string(text)
	return m, nil
}
