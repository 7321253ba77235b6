package actors

import (
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/mailru/easyjson/opt"
	"go.uber.org/zap"

	"github.com/vajra-go/vajra/codegen"
	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
)

// The OpenAI Realtime API (GET /v1/realtime, WebSocket): one actor per
// connection, which holds the session's configuration and its
// conversation and runs one engine session at a time for it: a response
// (response.create) or the transcription of committed input audio
// (?intent=transcription). netio hands each client message to Message,
// which copies it into a pooled buffer and posts a pointer to the actor;
// the actor decodes and answers it. A response's events are framed once,
// on the engine side, by the codegen formatter the actor gives the engine
// (openai.RealtimeFormatter); the actor forwards them untouched, as an
// HTTP session forwards its stream, and writes only its own events
// (session.created, the item bookkeeping, errors, the end of a cancelled
// response). See docs/compatibility.md for what is served.

// realtimeKind is what the session's engine session is doing.
type realtimeKind uint8

const (
	rtIdle realtimeKind = iota
	// rtPreparing: a response's prompt is being prepared on the prepare
	// pool, which owns ereq until prepDone (prepared).
	rtPreparing
	rtResponse
	rtTranscription
)

// Bounds of one session.
const (
	// maxRealtimeItems and maxConversationBytes (of text) bound the
	// conversation a session keeps.
	maxRealtimeItems     = 4096
	maxConversationBytes = 64 << 20
	// maxInputAudio bounds the input audio buffer: 10 minutes at 24 kHz.
	maxInputAudio = 10 * 60 * openai.RealtimeSampleRate * 2
	// minCommitAudio is the least audio a commit takes (the API's 100 ms).
	minCommitAudio = openai.RealtimeSampleRate / 10 * 2
	// maxPendingTranscriptions and maxPendingAudio (bytes of PCM) bound
	// the commits waiting for the engine.
	maxPendingTranscriptions = 64
	maxPendingAudio          = 4 * maxInputAudio
	// maxRealtimeItemID bounds a client-chosen item id (the API's 32).
	maxRealtimeItemID = 32
)

// realtimeSession is the actor of one Realtime connection.
type realtimeSession struct {
	wsBase // spawn, serve, stop, panics, the inbox (base.go, ws.go)

	transcription bool
	id            string // "sess_…"
	convID        string // "conv_…"
	model         string
	transModel    string // a transcription session's model
	cfg           openai.RealtimeConfig
	items         []openai.RealtimeItem
	itemBytes     int // the items' text, for maxConversationBytes

	ev  openai.RealtimeEvents // the session's own events
	out []byte                // the session's own events, reused
	fwd []byte                // forwarded engine frames, reused
	in  openai.RealtimeClientEvent

	// The engine session, one at a time.
	kind      realtimeKind
	ereq      engine.Request
	es        engine.Session
	sink      sink
	cancelled bool // response.cancel aborted the running (or preparing) response
	respID    string
	respConv  bool // the running response joins the conversation
	responses int  // responses and transcriptions started, for event id prefixes
	resp      openai.RealtimeFormatter
	trans     openai.RealtimeTranscriptionFormatter
	prefix    []byte

	// meta, keep and createEvent are the response being created: its
	// metadata, prepareEngine's truncation argument, and the event_id of
	// its response.create, for the error event of a refusal.
	meta        openai.RealtimeResponseMeta
	keep        int
	createEvent string

	audio        []byte          // the input audio buffer, PCM16
	pending      []realtimeAudio // committed audio waiting for the engine
	pendingBytes int             // of PCM in pending, for maxPendingAudio

	gone bool // the client left (or the session closed the connection)
}

// realtimeAudio is committed input audio to transcribe into item itemID.
type realtimeAudio struct {
	itemID string
	pcm    []byte
}

var _ WSBacklog = (*realtimeSession)(nil)

// startRealtime serves GET /v1/realtime: it spawns the connection's
// session actor, which speaks first (session.created).
func (s *Sessions) startRealtime(conn WSConn, req *WSRequest) WSHandle {
	rs := new(realtimeSession)
	rs.spawnWS(s, rs, conn, req)
	return rs
}

// Receive implements actor.Actor (actorBase.serve).
func (rs *realtimeSession) Receive(ctx actor.Context) { rs.serve(rs, ctx) }

// receive handles the session's messages but the base's.
func (rs *realtimeSession) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *framesReady:
		rs.forward()
	case *clientMsg:
		if !rs.gone {
			rs.handle(m.p)
		}
		rs.done(m)
	}
}

// clientGone runs when the client left: disconnect means abort, and the
// engine slot is freed now.
func (rs *realtimeSession) clientGone(ctx actor.Context) {
	rs.gone = true
	rs.abort()
	rs.stop(ctx)
}

func (rs *realtimeSession) abort() {
	rs.sink.detach()
	if rs.es != nil {
		rs.es.Abort()
	}
}

// cleanup runs once when the actor stopped, also after a panic.
func (rs *realtimeSession) cleanup() {
	rs.abort()
	if !rs.gone {
		rs.gone = true
		rs.conn.Close(1011, "the session failed")
	}
}

// begin checks the upgrade's query and sends session.created.
func (rs *realtimeSession) begin(ctx actor.Context) {
	sid := newID("")
	rs.id, rs.convID = "sess_"+sid, "conv_"+sid
	rs.ev.Reset(append(append(rs.out[:0], "event_"...), sid+"_"...), codegen.FramingWebSocket, rs.req.Beta)
	rs.cfg = openai.RealtimeConfig{Temperature: openai.RealtimeDefaultTemperature}
	q, err := url.ParseQuery(rs.req.Query)
	if err != nil {
		rs.refuse(openai.APIError{Kind: openai.KindInvalidRequest, Code: openai.CodeInvalidValue, Message: "The request's query string is malformed."}, "malformed query")
		return
	}
	switch intent := q.Get("intent"); intent {
	case "", "realtime", "conversation":
	case "transcription":
		rs.transcription = true
	default:
		rs.refuse(openai.APIError{Kind: openai.KindInvalidRequest, Code: openai.CodeInvalidValue, Param: "intent",
			Message: "Unknown intent " + quoteID(intent) + "; supported: transcription (or none, for a conversation)."}, "unknown intent")
		return
	}
	rs.model = q.Get("model")
	if rs.model == "" && len(rs.owner.cfg.Models) > 0 {
		// The API requires a model for a conversation; Vajra serves its
		// first model when none is named (a transcription session names
		// its model in session.update, if at all).
		rs.model = rs.owner.cfg.Models[0]
	}
	if !rs.owner.servesModel(rs.model) {
		rs.refuse(openai.APIError{Kind: openai.KindNotFound, Param: "model",
			Message: "The model " + quoteID(rs.model) + " does not exist or you do not have access to it."}, "model not found")
		return
	}
	rs.transModel = rs.model
	rs.send(rs.ev.AppendSession(rs.out[:0], rs.sessionEvent("created"), rs.sessionObject()))
}

// refuse ends a connection the session cannot serve: an error event, then
// the close handshake with 1008 (policy violation), as the API closes a
// session it refuses.
func (rs *realtimeSession) refuse(e openai.APIError, reason string) {
	rs.send(rs.ev.AppendAPIError(rs.out[:0], e, ""))
	rs.gone = true
	rs.conn.Close(1008, reason)
}

func (rs *realtimeSession) send(p []byte) {
	rs.out = p
	if len(p) > 0 && !rs.gone {
		rs.conn.Send(p)
	}
}

// fail answers the client event being handled with an error event.
func (rs *realtimeSession) fail(e openai.APIError) { rs.failEvent(e, rs.in.EventID) }

// failEvent answers the client event eventID with an error event.
func (rs *realtimeSession) failEvent(e openai.APIError, eventID string) {
	if ce := rs.owner.log.Check(zap.DebugLevel, "realtime client event refused"); ce != nil {
		ce.Write(zap.String("request_id", rs.req.RequestID), zap.String("code", e.Code), zap.String("param", e.Param))
	}
	rs.send(rs.ev.AppendAPIError(rs.out[:0], e, eventID))
}

func (rs *realtimeSession) failParam(pe *openai.ParamError) { rs.fail(pe.API()) }

func invalidEvent(code, param, msg string) openai.APIError {
	return openai.APIError{Kind: openai.KindInvalidRequest, Code: code, Param: param, Message: msg}
}

// handle decodes and serves one client event.
func (rs *realtimeSession) handle(msg []byte) {
	if err := openai.DecodeRealtimeClientEvent(msg, &rs.in); err != nil {
		if pe, ok := err.(*openai.ParamError); ok {
			rs.failParam(pe)
		} else {
			rs.fail(invalidEvent(openai.CodeInvalidJSON, "", "The event is not valid JSON."))
		}
		return
	}
	ev := &rs.in
	switch ev.Type {
	case "session.update", "transcription_session.update":
		rs.sessionUpdate()
	case "conversation.item.create":
		rs.itemCreate()
	case "conversation.item.delete":
		if i := rs.findItem(ev.ItemID); i >= 0 {
			rs.itemBytes -= itemSize(&rs.items[i])
			rs.items = slices.Delete(rs.items, i, i+1) // zeroes the tail: no text stays reachable
			rs.send(rs.ev.AppendItemDeleted(rs.out[:0], ev.ItemID))
		}
	case "conversation.item.retrieve":
		if i := rs.findItem(ev.ItemID); i >= 0 {
			rs.send(rs.ev.AppendItemRetrieved(rs.out[:0], &rs.items[i]))
		}
	case "response.create":
		rs.responseCreate()
	case "response.cancel":
		rs.responseCancel()
	case "input_audio_buffer.append":
		rs.audioAppend()
	case "input_audio_buffer.commit":
		rs.audioCommit()
	case "input_audio_buffer.clear":
		if rs.audioSession() {
			rs.audio = rs.audio[:0]
			rs.send(rs.ev.AppendCleared(rs.out[:0]))
		}
	case "":
		rs.fail(invalidEvent(openai.CodeMissing, "type", "The event has no type."))
	default:
		rs.fail(invalidEvent(openai.CodeInvalidValue, "type", "Unknown or unsupported event type "+quoteID(ev.Type)+"."))
	}
}

// findItem returns the index of item id, or -1 after an error event.
func (rs *realtimeSession) findItem(id string) int {
	if id == "" {
		rs.fail(invalidEvent(openai.CodeMissing, "item_id", "item_id is required."))
		return -1
	}
	if i := rs.itemIndex(id); i >= 0 {
		return i
	}
	rs.fail(invalidEvent("item_not_found", "item_id", "Item with item_id "+quoteID(id)+" not found."))
	return -1
}

func (rs *realtimeSession) itemIndex(id string) int {
	for i := range rs.items {
		if rs.items[i].ID == id {
			return i
		}
	}
	return -1
}

// conversationFull refuses (an error event blaming param) when the
// conversation has no room for one more item of extra bytes of text.
func (rs *realtimeSession) conversationFull(extra int, param string) bool {
	return rs.conversationFullFor(extra, param, rs.in.EventID)
}

// conversationFullFor is conversationFull answering the client event
// eventID.
func (rs *realtimeSession) conversationFullFor(extra int, param, eventID string) bool {
	if len(rs.items) < maxRealtimeItems && rs.itemBytes+extra <= maxConversationBytes {
		return false
	}
	rs.failEvent(invalidEvent("conversation_full", param, "The conversation holds "+strconv.Itoa(len(rs.items))+
		" items and "+strconv.Itoa(rs.itemBytes>>20)+" MiB of text; a session keeps at most "+
		strconv.Itoa(maxRealtimeItems)+" items and "+strconv.Itoa(maxConversationBytes>>20)+" MiB. Delete some first."), eventID)
	return true
}

// itemSize is what an item counts for maxConversationBytes.
func itemSize(it *openai.RealtimeItem) int { return len(it.Text) + len(it.Transcript) }

// lastItemID is the id of the conversation's last item ("" when empty).
func (rs *realtimeSession) lastItemID() string {
	if len(rs.items) == 0 {
		return ""
	}
	return rs.items[len(rs.items)-1].ID
}

// sessionEvent names the session's created or updated event (what):
// session.*, or in the beta shape transcription_session.* for a
// transcription session.
func (rs *realtimeSession) sessionEvent(what string) string {
	if rs.transcription && rs.ev.Beta() {
		return "transcription_session." + what
	}
	return "session." + what
}

// sessionObject is the session as session.created and session.updated
// show it, in the session's shape.
func (rs *realtimeSession) sessionObject() *openai.RealtimeSessionObject {
	beta := rs.ev.Beta()
	text := []string{"text"}
	s := &openai.RealtimeSessionObject{ID: rs.id, Object: "realtime.session"}
	trans := &openai.RealtimeTranscriptionParam{Model: rs.transModel}
	if rs.transcription {
		s.Object = "realtime.transcription_session"
		if beta {
			s.Modalities, s.InputAudioFormat, s.InputAudioTranscription = text, "pcm16", trans
			s.TurnDetection = &openai.RealtimeNull{}
		} else {
			s.Type = "transcription"
			s.Audio = &openai.RealtimeAudioObject{Input: openai.RealtimeAudioInputObject{
				Format: openai.RealtimeAudioFormatObject{Type: "audio/pcm", Rate: openai.RealtimeSampleRate}, Transcription: trans}}
		}
		return s
	}
	mt := openai.RealtimeMaxTokens{N: rs.cfg.MaxOutputTokens}
	s.Model, s.Instructions, s.Tools, s.ToolChoice = rs.model, &rs.cfg.Instructions, []struct{}{}, "auto"
	if beta {
		s.Modalities, s.InputAudioFormat, s.MaxResponseOutputTokens = text, "pcm16", &mt
		s.TurnDetection = &openai.RealtimeNull{}
		s.Temperature = opt.OFloat64(rs.cfg.Temperature)
	} else {
		s.Type, s.OutputModalities, s.MaxOutputTokens = "realtime", text, &mt
		s.Audio = &openai.RealtimeAudioObject{Input: openai.RealtimeAudioInputObject{
			Format: openai.RealtimeAudioFormatObject{Type: "audio/pcm", Rate: openai.RealtimeSampleRate}}}
	}
	return s
}

func (rs *realtimeSession) sessionUpdate() {
	p := rs.in.Session
	if p == nil {
		rs.fail(invalidEvent(openai.CodeMissing, "session", "session is required."))
		return
	}
	cfg := rs.cfg
	ch, pe := p.Apply(&cfg, rs.transcription)
	if pe != nil {
		rs.failParam(pe)
		return
	}
	if ch.Model != "" && !rs.owner.servesModel(ch.Model) {
		rs.fail(invalidEvent("model_not_found", "session.model", "The model "+quoteID(ch.Model)+" does not exist."))
		return
	}
	if ch.TranscriptionModel != "" && !rs.owner.servesModel(ch.TranscriptionModel) {
		rs.fail(invalidEvent("model_not_found", "session.audio.input.transcription.model",
			"The transcription model "+quoteID(ch.TranscriptionModel)+" does not exist."))
		return
	}
	if ch.Model != "" && !rs.transcription {
		rs.model = ch.Model
	}
	if ch.TranscriptionModel != "" {
		rs.transModel = ch.TranscriptionModel
	}
	rs.cfg = cfg
	rs.send(rs.ev.AppendSession(rs.out[:0], rs.sessionEvent("updated"), rs.sessionObject()))
}

func (rs *realtimeSession) itemCreate() {
	ev := &rs.in
	if rs.transcription {
		rs.fail(invalidEvent(openai.CodeUnsupported, "type", "A transcription session takes input audio, not conversation items."))
		return
	}
	if ev.Item == nil {
		rs.fail(invalidEvent(openai.CodeMissing, "item", "item is required."))
		return
	}
	m, pe := ev.Item.Message("item")
	if pe != nil {
		rs.failParam(pe)
		return
	}
	if rs.conversationFull(len(m.Text), "item") {
		return
	}
	it := openai.RealtimeItem{ID: ev.Item.ID, Role: m.Role, Text: m.Text, Status: openai.RealtimeCompleted}
	switch {
	case it.ID == "":
		it.ID = newID("item_")
	case len(it.ID) > maxRealtimeItemID:
		rs.fail(invalidEvent(openai.CodeInvalidValue, "item.id", "item.id is at most "+strconv.Itoa(maxRealtimeItemID)+" characters."))
		return
	case rs.itemIndex(it.ID) >= 0:
		rs.fail(invalidEvent("item_already_exists", "item.id", "An item with id "+quoteID(it.ID)+" already exists."))
		return
	}
	at := len(rs.items)
	if ev.PreviousItemID.IsDefined() {
		switch prev := ev.PreviousItemID.V; prev {
		case "root":
			at = 0
		default:
			i := rs.itemIndex(prev)
			if i < 0 {
				rs.fail(invalidEvent("item_not_found", "previous_item_id", "Item with previous_item_id "+quoteID(prev)+" not found."))
				return
			}
			at = i + 1
		}
	}
	var prev string
	if at > 0 {
		prev = rs.items[at-1].ID
	}
	rs.items = append(rs.items, openai.RealtimeItem{})
	copy(rs.items[at+1:], rs.items[at:])
	rs.items[at] = it
	rs.itemBytes += itemSize(&it)
	rs.send(rs.ev.AppendItemCreated(rs.out[:0], prev, &it))
}

// nextPrefix sets rs.prefix to the event id prefix of the next response
// or transcription: "event_<session>r<n>_", distinct from the session's
// own "event_<session>_".
func (rs *realtimeSession) nextPrefix(tag byte) {
	rs.responses++
	sid := rs.id[len("sess_"):]
	rs.prefix = append(append(append(rs.prefix[:0], "event_"...), sid...), tag)
	rs.prefix = strconv.AppendInt(rs.prefix, int64(rs.responses), 10)
	rs.prefix = append(rs.prefix, '_')
}

// prepareEngine readies rs.ereq and runs Engine.Prepare; it returns the
// engine's refusal. keep > 0 makes it truncate as the API's "auto"
// truncation does: while the prompt does not fit the context, the oldest
// messages after the first keep-1 (the instructions) are left out of it, a
// quarter at a time, down to the last one. They stay in the conversation.
func (rs *realtimeSession) prepareEngine(keep int) *engine.Error {
	r := &rs.ereq
	r.ID, r.Arrival, r.Stream = rs.req.RequestID, time.Now(), true
	r.StreamInfo = engine.StreamInfo{Model: r.Model}
	r.StreamInterval = rs.owner.cfg.StreamInterval
	estimated := false
	for {
		err := rs.owner.cfg.Engine.Prepare(r)
		if err == nil {
			return nil
		}
		ee := engine.AsError(err)
		head := keep - 1
		if keep > 0 && ee.Kind == engine.KindContextLength && len(r.Messages) > head+1 {
			if !estimated {
				// First one cut from an estimate, so that a long
				// conversation is rendered and tokenized about twice, not
				// once per quarter left out.
				estimated = true
				if n := rs.overflow(r, head); n > 0 {
					r.Messages = append(r.Messages[:head], r.Messages[head+n:]...)
					r.PromptTokens, r.Prepared = nil, nil
					continue
				}
			}
			n := min(max(1, (len(r.Messages)-head)/4), len(r.Messages)-head-1)
			r.Messages = append(r.Messages[:head], r.Messages[head+n:]...)
			r.PromptTokens, r.Prepared = nil, nil
			continue
		}
		return ee
	}
}

// messageOverhead is what overflow counts for a message's template tokens
// beyond its text's (ChatML's "<|im_start|>role\n" and "<|im_end|>\n" are
// about five): more than most templates add, so that the cut it estimates
// usually fits at once.
const messageOverhead = 8

// overflow estimates how many of r's messages after the first head must be
// left out, oldest first, for the prompt to fit the context
// (Config.MaxModelLen, less the response's MaxTokens): each message's text
// tokenized once, plus messageOverhead. It keeps at least the last message
// and returns 0 when the context length is not known.
func (rs *realtimeSession) overflow(r *engine.Request, head int) int {
	budget := rs.owner.cfg.MaxModelLen - r.Sampling.MaxTokens
	if rs.owner.cfg.MaxModelLen <= 0 || budget <= 0 {
		return 0
	}
	eng := rs.owner.cfg.Engine
	for i := range head {
		budget -= len(eng.Tokenize(r.Messages[i].Content)) + messageOverhead
	}
	last := len(r.Messages) - 1
	i := last
	for ; i >= head; i-- {
		if budget -= len(eng.Tokenize(r.Messages[i].Content)) + messageOverhead; budget < 0 {
			break
		}
	}
	return min(i+1-head, last-head)
}

// startEngine starts the prepared rs.ereq; it returns the engine's
// refusal (overloaded, shutting down), which the caller ends its work
// with.
func (rs *realtimeSession) startEngine() *engine.Error {
	r := &rs.ereq
	rs.sink.bind(&rs.actorBase, r)
	es, err := rs.owner.cfg.Engine.Start(r, &rs.sink)
	// The engine read the prompt in Prepare and Start; the session keeps
	// its own conversation.
	r.Messages, r.Audio = nil, engine.Audio{}
	if err != nil {
		return engine.AsError(err)
	}
	rs.es = es
	return nil
}

func (rs *realtimeSession) responseCreate() {
	ev := &rs.in
	if rs.transcription {
		rs.fail(invalidEvent(openai.CodeUnsupported, "type", "A transcription session does not create responses."))
		return
	}
	if rs.kind == rtResponse || rs.kind == rtPreparing {
		rs.fail(invalidEvent("conversation_already_has_active_response", "",
			"Conversation already has an active response in progress: "+rs.respID+". Wait until the response is finished before creating a new one."))
		return
	}
	if rs.kind != rtIdle {
		rs.fail(invalidEvent("conversation_already_has_active_response", "", "The session is busy transcribing; wait for the transcription to complete."))
		return
	}
	cfg := rs.cfg
	conv := true
	var input []openai.RealtimeItemParam
	if p := ev.Response; p != nil {
		if pe := p.Apply(&cfg); pe != nil {
			rs.failParam(pe)
			return
		}
		conv = p.Conversation != "none"
		input = p.Input
	}
	msgs := make([]engine.Message, 0, len(rs.items)+1)
	keep := 1 // the conversation is truncated to fit, keeping the instructions
	if cfg.Instructions != "" {
		msgs = append(msgs, engine.Message{Role: "system", Content: cfg.Instructions})
		keep = 2
	}
	if input != nil {
		keep = 0 // the client's own context is never truncated
		for i := range input {
			m, pe := input[i].Message("response.input[" + strconv.Itoa(i) + "]")
			if pe != nil {
				rs.failParam(pe)
				return
			}
			msgs = append(msgs, engine.Message{Role: m.Role, Content: m.Text})
		}
	} else {
		for i := range rs.items {
			it := &rs.items[i]
			text := it.Text
			if it.Audio {
				text = it.Transcript
			}
			msgs = append(msgs, engine.Message{Role: it.Role, Content: text})
		}
	}
	if conv && rs.conversationFull(0, "") {
		return // no room for the response's item
	}
	if len(msgs) == 0 {
		// An empty conversation still has a prompt: the template's turn.
		msgs = append(msgs, engine.Message{Role: "system"})
	}
	rs.ereq = engine.Request{Model: rs.model, Messages: msgs,
		Sampling: engine.Sampling{MaxTokens: cfg.MaxOutputTokens, Temperature: cfg.Temperature}}
	rs.meta = openai.RealtimeResponseMeta{ID: newID("resp_"), ItemID: newID("item_"),
		MaxOutputTokens: cfg.MaxOutputTokens, Temperature: cfg.Temperature}
	if conv {
		rs.meta.ConversationID = rs.convID
	}
	rs.respConv, rs.keep, rs.createEvent, rs.cancelled = conv, keep, ev.EventID, false
	// A large prompt (a long conversation, which the truncation loop may
	// render and tokenize several times) is prepared off the mailbox
	// workers, as an HTTP request's is (prepare.go); the response goes on
	// in prepared. Meanwhile the session serves its client's other events;
	// another response.create is refused, a response.cancel cancels it.
	if promptBytes(msgs) >= offPoolBody && rs.owner.prep.submit(rs) {
		rs.kind, rs.respID = rtPreparing, rs.meta.ID
		return
	}
	rs.launchResponse(rs.prepareEngine(keep))
}

// promptBytes is the text of a prompt's messages, for offPoolBody.
func promptBytes(msgs []engine.Message) int {
	n := 0
	for i := range msgs {
		n += len(msgs[i].Content)
	}
	return n
}

// prepareOff implements prepJob: the response's prompt, with the
// truncation loop, prepared on a prepare worker.
func (rs *realtimeSession) prepareOff() error {
	if err := rs.prepareEngine(rs.keep); err != nil {
		return err
	}
	return nil
}

// prepared implements preparedActor: the prepare pool prepared the
// response being created.
func (rs *realtimeSession) prepared(_ actor.Context, err error) {
	rs.kind = rtIdle
	if rs.gone {
		return
	}
	var ee *engine.Error
	if err != nil {
		ee = engine.AsError(err)
	}
	rs.launchResponse(ee)
}

// launchResponse starts the response rs.meta whose prompt rs.ereq
// prepareEngine prepared with the refusal err, and joins it to the
// conversation (rs.respConv) as the item after the last one.
func (rs *realtimeSession) launchResponse(err *engine.Error) {
	if err != nil {
		rs.failEvent(openai.FromEngineError(err, "response"), rs.createEvent)
		return
	}
	meta := rs.meta
	if rs.respConv {
		// Items the client created while the prompt was prepared come
		// before the response's.
		if rs.conversationFullFor(0, "", rs.createEvent) {
			return
		}
		meta.PreviousItemID = rs.lastItemID()
	}
	rs.nextPrefix('r')
	rs.resp.Reset(meta, rs.prefix, codegen.FramingWebSocket, rs.ev.Beta())
	rs.ereq.Formatter = &rs.resp
	// response.created is written before the engine starts (the engine
	// owns the formatter from then on) and sent once it started. A
	// response the engine refuses (overloaded, shutting down) ends at
	// once, failed, so that the client sees its response.done; one
	// cancelled while it was prepared ends cancelled without starting.
	created := rs.resp.AppendCreated(rs.out[:0])
	if rs.cancelled {
		rs.ereq.Messages = nil
		rs.send(rs.resp.AppendCancelled(created, &engine.Usage{}))
		return
	}
	if err := rs.startEngine(); err != nil {
		rs.send(rs.resp.AppendFailed(created, err))
		return
	}
	rs.kind, rs.respID = rtResponse, meta.ID
	if rs.respConv {
		// The assistant item joins the conversation now (the client sees
		// conversation.item.added with the first output); its text is
		// filled in when the response ends.
		rs.items = append(rs.items, openai.RealtimeItem{ID: meta.ItemID, Role: "assistant", Status: openai.RealtimeInProgress})
	}
	rs.send(created)
}

func (rs *realtimeSession) responseCancel() {
	id := rs.in.ResponseID
	if rs.kind == rtPreparing && (id == "" || id == rs.respID) {
		rs.cancelled = true // prepared ends it, cancelled, without starting it
		return
	}
	if rs.kind != rtResponse || (id != "" && id != rs.respID) {
		msg := "Cancellation failed: no active response found."
		if id != "" {
			msg = "Cancellation failed: no active response with id " + quoteID(id) + " found."
		}
		rs.fail(invalidEvent("response_cancel_not_active", "response_id", msg))
		return
	}
	if !rs.cancelled {
		rs.cancelled = true
		rs.es.Abort() // the final Result comes to forward, which ends the response
	}
}

// audioSession reports whether the session takes input audio (a
// transcription session), after an error event when it does not.
func (rs *realtimeSession) audioSession() bool {
	if !rs.transcription {
		rs.fail(invalidEvent(openai.CodeUnsupported, "type",
			"Input audio is served by transcription sessions (?intent=transcription); this server's conversations are text only."))
	}
	return rs.transcription
}

func (rs *realtimeSession) audioAppend() {
	if !rs.audioSession() {
		return
	}
	a := rs.in.Audio
	if base64.StdEncoding.DecodedLen(len(a))+len(rs.audio) > maxInputAudio {
		rs.fail(invalidEvent("input_audio_buffer_too_large", "audio",
			"The input audio buffer holds at most 10 minutes of audio; commit or clear it first."))
		return
	}
	n := len(rs.audio)
	var err error
	if rs.audio, err = base64.StdEncoding.AppendDecode(rs.audio, []byte(a)); err != nil {
		rs.audio = rs.audio[:n] // the buffer is left as it was
		rs.fail(invalidEvent("invalid_base64", "audio", "audio is not valid base64."))
	}
}

func (rs *realtimeSession) audioCommit() {
	if !rs.audioSession() {
		return
	}
	n := len(rs.audio) &^ 1 // whole PCM16 samples
	if n < minCommitAudio {
		ms := float64(n/2) * 1000 / openai.RealtimeSampleRate
		rs.fail(invalidEvent("input_audio_buffer_commit_empty", "",
			"Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, but buffer only has "+
				strconv.FormatFloat(ms, 'f', 2, 64)+"ms of audio."))
		return
	}
	if len(rs.pending) >= maxPendingTranscriptions || rs.pendingBytes+n > maxPendingAudio || len(rs.items) >= maxRealtimeItems {
		rs.fail(invalidEvent("input_audio_buffer_busy", "", "Too many commits wait for their transcription; wait for some to complete."))
		return
	}
	it := openai.RealtimeItem{ID: newID("item_"), Role: "user", Audio: true, Status: openai.RealtimeCompleted}
	prev := rs.lastItemID()
	rs.items = append(rs.items, it)
	rs.out = rs.ev.AppendCommitted(rs.out[:0], prev, it.ID)
	rs.send(rs.ev.AppendItemCreated(rs.out, prev, &it))
	// The buffer becomes the job's; the next one starts empty.
	rs.pending = append(rs.pending, realtimeAudio{itemID: it.ID, pcm: rs.audio[:n]})
	rs.pendingBytes += n
	rs.audio = nil
	rs.transcribeNext()
}

// transcribeNext starts the oldest committed audio's transcription when
// the engine session is free.
func (rs *realtimeSession) transcribeNext() {
	for rs.kind == rtIdle && len(rs.pending) > 0 && !rs.gone {
		job := rs.pending[0]
		rs.pending[0] = realtimeAudio{} // its audio is the engine's now, not the queue's
		rs.pending = rs.pending[1:]
		rs.pendingBytes -= len(job.pcm)
		rs.ereq = engine.Request{Model: rs.transModel, Audio: engine.Audio{PCM: job.pcm, SampleRate: openai.RealtimeSampleRate}}
		rs.nextPrefix('t')
		rs.trans.Reset(job.itemID, rs.prefix, codegen.FramingWebSocket, rs.ev.Beta())
		rs.ereq.Formatter = &rs.trans
		// A transcription the engine refuses ends with its .failed event.
		err := rs.prepareEngine(0)
		if err == nil {
			err = rs.startEngine()
		}
		if err != nil {
			rs.send(rs.trans.AppendError(rs.out[:0], err))
			continue
		}
		rs.kind = rtTranscription
	}
}

// forward moves what the engine delivered to the connection, untouched,
// and ends the response or transcription with the final Result.
func (rs *realtimeSession) forward() {
	var final *engine.Result
	rs.fwd, final = rs.sink.take(rs.fwd[:0])
	if rs.gone {
		return
	}
	if final == nil {
		if len(rs.fwd) > 0 {
			rs.conn.Send(rs.fwd)
		}
		return
	}
	switch rs.kind {
	case rtResponse:
		rs.fwd = rs.endResponse(rs.fwd, final)
	case rtTranscription:
		rs.fwd = rs.endTranscription(rs.fwd, final)
	}
	rs.kind, rs.es = rtIdle, nil
	if len(rs.fwd) > 0 {
		rs.conn.Send(rs.fwd)
	}
	rs.transcribeNext()
}

// endResponse completes a response whose final Result arrived: the end
// the engine did not write (a cancelled response's, or a failed one's
// when code it ran for the response panicked), and the assistant item's
// text in the conversation. The engine no longer touches the formatter.
func (rs *realtimeSession) endResponse(dst []byte, final *engine.Result) []byte {
	switch {
	case final.Panicked:
		dst = rs.resp.AppendFailed(dst, final.Err)
	case rs.resp.Done():
	case rs.cancelled || final.Err != nil && final.Err.Kind == engine.KindAborted:
		dst = rs.resp.AppendCancelled(dst, &final.Usage)
	default:
		err := final.Err
		if err == nil {
			err = &engine.Error{Kind: engine.KindInternal, Message: "the engine ended the response without its end"}
		}
		dst = rs.resp.AppendFailed(dst, err)
	}
	if rs.respConv {
		if i := rs.itemIndex(rs.resp.ItemID()); i >= 0 {
			it := &rs.items[i]
			it.Text, it.Status = string(rs.resp.Text()), rs.resp.Status()
			rs.itemBytes += len(it.Text)
			if it.Status == "" || final.Panicked {
				it.Status = openai.RealtimeIncomplete
			}
		}
	}
	return dst
}

// endTranscription stores the transcript in its item.
func (rs *realtimeSession) endTranscription(dst []byte, final *engine.Result) []byte {
	if final.Panicked {
		dst = rs.trans.AppendError(dst, final.Err)
	}
	if final.Err == nil && len(final.Choices) > 0 {
		if i := rs.itemIndex(rs.trans.ItemID()); i >= 0 {
			rs.items[i].Transcript, rs.items[i].HasTranscript = final.Choices[0].Text, true
			rs.itemBytes += len(rs.items[i].Transcript)
		}
	}
	return dst
}
