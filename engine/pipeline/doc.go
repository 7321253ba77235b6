// Package pipeline is the one layer between an engine's token ids and the
// wire, which every engine feeds: request preparation behind a small
// model interface (Prepare, Model), and one per-request output state
// (Out) that holds the choices, their parsers (engine/text), the stream
// interval, logprobs and prompt logprobs, stop strings with their
// hold-back, usage, gaps, the Formatter calls, panic isolation, a typed
// end cause and the final Result.
//
// An engine's scheduler decides only what a model produced and when: it
// says "these ids for this choice" (Out.Step, Out.Token), "this choice
// ended" (Out.EndChoice), "this request ended" (Out.Finish with a Cause),
// and hands the frames on (Out.Deliver, Out.DeliverFinal). What the
// client sees for those events is decided here, once, for every engine.
package pipeline
