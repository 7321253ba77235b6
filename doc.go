// Package vajra is the public API to build, start, embed and stop a Vajra
// server: an HTTP/1.1 front door that speaks the OpenAI and Anthropic APIs
// and drives an LLM engine (by default the embedded simulated engine).
//
//	srv, err := vajra.New(vajra.DefaultConfig())
//	if err != nil { ... }
//	if err := srv.Start(); err != nil { ... }
//	defer srv.Stop(context.Background())
//
// Config.Engine plugs in any engine.Engine (a wrapper around another, a
// remote engine); a wrapper that embeds the engine.Engine interface
// implements engine.Wrapper (Unwrap) so that what the engine it wraps
// declares beyond that interface (embeddings, its context length, its
// output parsing, ...) is still found. Config.Driver opens an engine a program links by
// importing its package, as database/sql drivers: with
// github.com/vajra-go/vajra/engine/llama imported, Driver "llama" and a
// llama.Config serve a GGUF model with llama.cpp in process. Remote
// workers' protocols (Config.Remote) are linked the same way, by importing
// engine/remote/llamaserver, engine/remote/vllm or engine/remote/sglang.
// This package links none of them: it builds without cgo. Stop ends everything at once; Shutdown drains first, as a
// SIGTERM handler should.
//
// The settings every engine shares (context length, sequences, KV cache,
// seed, chat template, parsers, stream interval) are one engine.Config,
// set once in Config.EngineConfig and read by whichever engine New builds:
//
//	cfg := vajra.DefaultConfig()
//	cfg.EngineConfig = engine.Config{MaxModelLen: 4096, MaxNumSeqs: 8}
//	cfg.Driver, cfg.DriverConfig = "llama", llama.Config{ModelPath: "model.gguf"}
//
// A setting the engine cannot honour fails New (engine.ErrUnsupportedSetting).
//
// # Embedding in an actor system
//
// To run inside an existing protoactor system, set Config.ActorSystem: the
// server's actors are then spawned there (sessions under Vajra's own
// stop-on-failure guardian), and Vajra leaves the system running when it
// stops. Without it, New creates a system of its own (ActorSystem).
//
// # In-process generation
//
// An actor of that system can ask for a generation with a message, with
// no socket, HTTP parser or JSON in between, and gets what an HTTP session
// gets. The protocol:
//
//   - The request is a *Generate (chat Messages, a Prompt or PromptTokens;
//     Sampling with the engine's meanings; the Dialect whose frames it
//     wants, or engine.DialectNone for typed Deltas), sent to PID with
//     Request so that the replies go to the sender, or with ReplyTo set.
//     Server.Generate does that for an actor's context.
//   - The replies are *Output messages: one pointer per request, sent
//     again whenever the engine produced more (one notice per engine step
//     at most, coalesced while the requester is busy). On each the
//     requester calls Take, then reads Frames (the dialect's server-sent
//     events, byte for byte what an HTTP client of that API reads, usage
//     chunk included when IncludeUsage asks for it) or Deltas, and Final.
//     They stay valid until the next Take.
//   - Every request ends with exactly one Output whose Final is set: the
//     engine's Result (each choice's text and finish reason, usage,
//     timings), or a Result whose Err says why it failed: engine.KindInvalid
//     (the Param it names is wrong; an unknown model names "model"),
//     KindContextLength, KindOverloaded (no admission permit and no room in
//     the queue), KindClosed (the server drains or stops), KindAborted.
//   - A *CancelGeneration to PID (Server.Cancel) aborts the request; so
//     does stopping the requester, which the request's session watches:
//     the engine session is aborted and its slot freed at once.
//   - Admission control is the HTTP requests': the same permits
//     (Config.MaxConcurrentRequests) and FIFO queue (MaxQueuedRequests);
//     Drain and Shutdown refuse new requests and wait for the running
//     ones; Stop cancels them. Each finished request is counted in the
//     request metrics (vllm:e2e_request_latency_seconds, ...) as an HTTP
//     one is.
//   - Costs: a Generate costs a session actor and a few allocations, as
//     an HTTP request does; a token costs none when the requester's
//     mailbox is Server.Mailbox (protoactor's default mailbox allocates
//     once per wake).
//
// Example_embed shows a whole program; examples/embed adds an engine
// wrapper and HTTP clients beside the in-process ones.
package vajra
