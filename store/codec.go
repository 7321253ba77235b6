package store

import (
	"encoding/json"
	"fmt"

	"github.com/vajra-go/vajra/codegen/openai"
	"github.com/vajra-go/vajra/engine"
)

// The record as stored in Redis: one JSON document with its own field
// names, so that the wire shapes of the API may change without breaking
// records written by an older node.
type recordJSON struct {
	V          int             `json:"v"`
	ID         string          `json:"id"`
	Status     string          `json:"status,omitempty"`
	Background bool            `json:"background,omitempty"`
	Body       json.RawMessage `json:"body"`
	// Events and FirstSeq: a background response's event log (raw SSE
	// events), for GET ...?stream=true once it ended.
	Events   []byte        `json:"events,omitempty"`
	FirstSeq int           `json:"first_seq,omitempty"`
	Input    []itemJSON    `json:"input,omitempty"`
	History  []messageJSON `json:"history,omitempty"`
	// LeaseUntil: a running background response's owner lease (Unix
	// milliseconds); a reader takes the owner for dead past it.
	LeaseUntil int64 `json:"lease_until,omitempty"`
}

type itemJSON struct {
	Type      string     `json:"type"`
	ID        string     `json:"id,omitempty"`
	Status    string     `json:"status,omitempty"`
	Role      string     `json:"role,omitempty"`
	Content   []partJSON `json:"content,omitempty"`
	CallID    string     `json:"call_id,omitempty"`
	Name      string     `json:"name,omitempty"`
	Arguments string     `json:"arguments,omitempty"`
	Output    string     `json:"output,omitempty"`
}

type partJSON struct {
	Type    string `json:"type"`
	Text    string `json:"text,omitempty"`
	Refusal string `json:"refusal,omitempty"`
}

type messageJSON struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []callJSON `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Reasoning  string     `json:"reasoning,omitempty"`
}

type callJSON struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

const recordVersion = 1

// encodeRecord renders rec as the JSON document Redis keeps. Once per
// stored response, off the hot path.
func encodeRecord(rec *Record) ([]byte, error) { return encodeRecordLease(rec, 0) }

// encodeRecordLease is encodeRecord with the owner lease lease_until
// (Unix milliseconds; 0 for none).
func encodeRecordLease(rec *Record, lease int64) ([]byte, error) {
	doc := recordJSON{V: recordVersion, ID: rec.ID, Status: rec.Status, Background: rec.Background, Body: rec.Body,
		Events: rec.Events, FirstSeq: rec.FirstSeq, LeaseUntil: lease}
	for i := range rec.Input {
		it := &rec.Input[i]
		j := itemJSON{Type: it.Type, ID: it.ID, Status: it.Status, Role: it.Role, CallID: it.CallID,
			Name: it.Name, Arguments: it.Arguments, Output: it.Output}
		for _, p := range it.Content {
			j.Content = append(j.Content, partJSON{Type: p.Type, Text: p.Text, Refusal: p.Refusal})
		}
		doc.Input = append(doc.Input, j)
	}
	for i := range rec.History {
		m := &rec.History[i]
		j := messageJSON{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID, Reasoning: m.Reasoning}
		for _, c := range m.ToolCalls {
			j.ToolCalls = append(j.ToolCalls, callJSON{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		doc.History = append(doc.History, j)
	}
	return json.Marshal(&doc)
}

// decodeRecord reads a record encodeRecord wrote.
func decodeRecord(b []byte) (*Record, error) {
	var doc recordJSON
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	if doc.V != recordVersion {
		return nil, fmt.Errorf("record version %d, this node reads %d", doc.V, recordVersion)
	}
	rec := &Record{ID: doc.ID, Status: doc.Status, Background: doc.Background, Body: []byte(doc.Body),
		Events: doc.Events, FirstSeq: doc.FirstSeq, LeaseUntil: doc.LeaseUntil}
	for _, j := range doc.Input {
		it := openai.ResponseItem{Type: j.Type, ID: j.ID, Status: j.Status, Role: j.Role, CallID: j.CallID,
			Name: j.Name, Arguments: j.Arguments, Output: j.Output}
		for _, p := range j.Content {
			it.Content = append(it.Content, openai.ResponsesContentPart{Type: p.Type, Text: p.Text, Refusal: p.Refusal})
		}
		rec.Input = append(rec.Input, it)
	}
	for _, j := range doc.History {
		m := engine.Message{Role: j.Role, Content: j.Content, Name: j.Name, ToolCallID: j.ToolCallID, Reasoning: j.Reasoning}
		for _, c := range j.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, engine.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		rec.History = append(rec.History, m)
	}
	rec.Size = RecordSize(rec)
	return rec, nil
}
