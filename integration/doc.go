// Package integration holds Vajra's black-box tests: each starts a real
// server through the module root's public API (vajra.New, Start, Stop,
// embedding) on a loopback port, or in process, and drives it as a client
// would, with raw HTTP bytes and with the OpenAI and Anthropic Go SDKs,
// over engine/sim, engine/llama or a hand-built engine. The package has no
// code of its own; the tests are in package integration_test.
//
// Golden files live in testdata/golden; `go test ./integration -run
// TestGoldenStreams -update` rewrites them. The allocation tests (names with
// "Alloc") skip under the race detector; `make test` runs them again
// without it.
package integration
