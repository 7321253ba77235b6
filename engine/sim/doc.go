// Package sim is Vajra's embedded simulated engine: a continuous-batching
// scheduler with a paged, prefix-cached KV cache and a real tokenizer
// (o200k_base), that generates deterministic pseudo-text at the speed and
// with the load behaviour configured, so that the server path can be
// load-tested, benchmarked and tested in CI without a GPU.
//
// # How it works
//
// One goroutine per Engine runs the scheduler loop (scheduler.go) on one
// timer: it admits requests first come first served from a bounded waiting
// queue while sequence slots (Config.MaxNumSeqs, one per choice) and KV
// blocks allow, gives each admitted request its first token when its prefill
// is over, and steps every decoding sequence together once per step
// (Config.ITL, slowed by Config.LoadFactor as the batch fills). Start, Abort
// and Close wake it at once. Per step and per request the request's
// Formatter writes the step's frames into a reused buffer, delivered in one
// Sink.Deliver; nothing is allocated per token in steady state when logprobs
// are off, and nothing is logged.
//
// # Output
//
// Text mode walks a word-level bigram chain over a built-in corpus
// (corpus.go), tokenized once; the next word's logits are the bigram
// log-counts plus noise hashed from the prompt (the "model" depends on the
// prompt, not on the sampling seed). Temperature 0 is greedy (argmax), so
// identical requests, and all choices of one request, give identical output
// whatever the seed. Above 0 the Gumbel-max trick samples softmax(logits/T)
// after top-k and top-p, with a per-choice generator seeded from the request
// seed, the engine seed and the choice index; without a request seed each
// choice draws a fresh seed, so output varies between calls as with a real
// engine. min_p restricts the candidates with top-k and top-p; logit_bias
// and the repetition, frequency and presence penalties reshape the logits
// first, in vLLM's order (shape.go). Without ignore_eos an answer ends at the first sentence end after
// a length drawn from that generator (16 tokens plus an exponential tail of
// mean 120). Echo mode repeats the last user message (or the prompt), in a
// loop when ignore_eos asks for exactly max_tokens.
//
// Tool calls (tool_choice required or named, or auto when the last user
// message names a tool) and JSON answers (response_format) are written in
// Start from the JSON Schema (tools.go), tokenized, then streamed token by
// token like text.
//
// # Where it differs from a real engine
//
//   - Prefill runs in one lane shared by all requests at Config.PrefillTPS,
//     independent of decoding: a real engine mixes prefill chunks into the
//     decode steps (chunked prefill), slowing them; here prefill does not
//     slow decode steps and the first token comes at the end of the prefill,
//     not at a step boundary.
//   - Prefix-cache blocks are registered when the request is admitted, not
//     when its prefill completes, so a concurrent identical prompt hits the
//     cache slightly earlier than in vLLM. Only prompt blocks are hashed,
//     not generated ones. The choices of one request share the prompt's
//     full blocks; each holds its own copy of the partial last block.
//   - A request's choices are admitted, preempted and resumed together (a
//     sequence group, as in vLLM V0), and the latest admitted request is
//     preempted first. Preemption is by recompute.
//   - Admission keeps 1% of the blocks free (vLLM's watermark) when other
//     requests run. A request that cannot fit in an empty cache fails with
//     KindInvalid.
//   - Logprobs are of a simulated distribution: at a word boundary the
//     candidates are the successor words (90% of the mass, by softmax of the
//     logits actually sampled from), inside a word or in scripted output the
//     emitted token has 0.90-0.99; common filler tokens complete the top
//     list. Prompt logprobs are drawn from the content hash, and the first
//     prompt token has a value rather than null.
//   - Stats.Running counts running requests (a request of n choices
//     once), as vllm:num_requests_running does; --max-num-seqs bounds the
//     running sequences (choices). Stats.Waiting counts queued requests,
//     preempted ones included.
//   - Tool calls: one call per choice, even with parallel_tool_calls; arguments follow the schema's types,
//     required properties, enums, const, bounds and lengths, about half the
//     optional properties, local $ref; pattern, dependencies and
//     additionalProperties are ignored. Tool call ids are deterministic.
//   - Reasoning length comes from the effort (minimal 32, low 128, medium
//     384, high 1024 tokens, ±25%), capped by the budget and by 3/4 of
//     max_tokens so that an answer follows. Stop strings and stop tokens
//     apply to the answer only.
//   - logit_bias and the penalties act on the walk's decisions: a candidate
//     word stands for its first token, which is what a bias or a count is
//     looked up by (the rest of a word follows without a choice, and
//     scripted output — JSON, tool calls, echo — and each answer's first
//     word are not affected). A request with any of them also weighs the
//     filler tokens (" the", ",", " and", ...) as low-probability
//     alternatives at every decision, so that -100 on a word's token bans
//     it even where the corpus has no other successor, and +100 on a
//     filler emits it at every decision. Its logprobs are of the reshaped
//     logits.
//   - No EOS token is emitted: a natural end finishes with reason stop on
//     the last text token. Scripted answers (JSON, tool calls) end when the
//     value is complete even with ignore_eos.
//   - Echo (completions) is left to the dialect: Choice.Text holds the
//     completion only; Start carries the prompt's token ids and logprobs.
package sim
