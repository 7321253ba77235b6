package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/vajra-go/vajra"
	"github.com/vajra-go/vajra/engine/remote"
	"github.com/vajra-go/vajra/engine/remote/vllmcore"
	"github.com/vajra-go/vajra/engine/tokenizer"
)

// `vajra frontend` is Vajra started by vLLM as its front end, in the place
// of vLLM's Rust front end (vllm-rs):
//
//	VLLM_USE_RUST_FRONTEND=1 VLLM_RUST_FRONTEND_PATH=/path/to/vajra vllm serve MODEL ...
//
// vLLM's launcher (vllm/v1/utils.py, RustFrontendProcessManager) binds the
// HTTP port, binds the engines' request and output addresses, starts the
// engines, runs their handshake, and runs
//
//	vajra frontend --listen-fd N --input-listener-fd N --output-listener-fd N
//	    --engine-start-index I --engine-count C --data-parallel-size D
//	    [--coordinator-address A] [--grpc-listen-fd N] --args-json '{...}'
//
// with the three listening sockets inherited and --args-json the `vllm
// serve` arguments that differ from their defaults (model_tag always). It
// then waits on the process; a SIGTERM from it ends Vajra (draining for
// shutdown_timeout seconds), and Vajra's exit ends `vllm serve`.
const frontendUsage = `Usage: vajra frontend --listen-fd N --input-listener-fd N --output-listener-fd N
         [--engine-start-index I] [--engine-count C] [--data-parallel-size D]
         --args-json '{"model_tag": MODEL, ...}'

Serves the OpenAI and Anthropic APIs as vLLM's front end. vLLM starts it:

  VLLM_USE_RUST_FRONTEND=1 VLLM_RUST_FRONTEND_PATH=$(which vajra) vllm serve MODEL ...

Flags:
`

// frontendArgs are the command line vLLM's launcher gives its front end.
type frontendArgs struct {
	listenFD, grpcListenFD, inputFD, outputFD int
	coordinator                               string
	engineStart, engineCount, dpSize          int
	serve                                     vllmServeArgs
}

// vllmServeArgs are the `vllm serve` arguments of --args-json that the
// front end reads; the engine's own (dtype, max_num_seqs, ...) are the
// engine's business and ignored here. Field names are vLLM's.
type vllmServeArgs struct {
	ModelTag               string        `json:"model_tag"`
	Model                  string        `json:"model"`
	Revision               string        `json:"revision"`
	Tokenizer              string        `json:"tokenizer"`
	GenerationConfig       string        `json:"generation_config"`
	ServedModelName        oneOrMany     `json:"served_model_name"`
	Host                   string        `json:"host"`
	Port                   int           `json:"port"`
	UDS                    string        `json:"uds"`
	MaxModelLen            int           `json:"max_model_len"`
	APIKey                 oneOrMany     `json:"api_key"`
	ChatTemplate           string        `json:"chat_template"`
	ToolCallParser         string        `json:"tool_call_parser"`
	ReasoningParser        string        `json:"reasoning_parser"`
	AllowedOrigins         oneOrMany     `json:"allowed_origins"`
	StreamInterval         int           `json:"stream_interval"`
	EngineReadyTimeoutSecs int           `json:"engine_ready_timeout_secs"`
	HTTPTimeoutKeepAlive   int           `json:"http_timeout_keep_alive"`
	ShutdownTimeout        int           `json:"shutdown_timeout"`
	EnableLogRequests      bool          `json:"enable_log_requests"`
	SSLKeyfile             string        `json:"ssl_keyfile"`
	SSLCertfile            string        `json:"ssl_certfile"`
	LoRAModules            []interface{} `json:"lora_modules"`
}

// oneOrMany is a JSON string or list of strings (vLLM's nargs="+"
// arguments, such as served_model_name and api_key).
type oneOrMany []string

func (o *oneOrMany) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*o = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		// encoding/json names the field of an UnmarshalTypeError.
		return &json.UnmarshalTypeError{Value: "a " + jsonKind(b), Type: reflect.TypeFor[oneOrMany]()}
	}
	*o = many
	return nil
}

// jsonKind names the kind of JSON value b.
func jsonKind(b []byte) string {
	switch b = bytes.TrimSpace(b); {
	case len(b) == 0:
		return "nothing"
	case b[0] == '{':
		return "object"
	case b[0] == '[':
		return "list of non-strings"
	case b[0] == 't' || b[0] == 'f':
		return "boolean"
	case b[0] == 'n':
		return "null"
	}
	return "number"
}

// parseFrontend reads the command line of `vajra frontend`.
func parseFrontend(args []string, stderr io.Writer) (*frontendArgs, error) {
	a := &frontendArgs{listenFD: -1, grpcListenFD: -1, inputFD: -1, outputFD: -1, engineCount: 1, dpSize: -1}
	var argsJSON string
	fs := flag.NewFlagSet("vajra frontend", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&a.listenFD, "listen-fd", -1, "the inherited HTTP listening socket")
	fs.IntVar(&a.grpcListenFD, "grpc-listen-fd", -1, "an inherited gRPC listening socket (vllm serve --grpc-port): not served by Vajra")
	fs.IntVar(&a.inputFD, "input-listener-fd", -1, "the inherited engine request (ROUTER) listening socket")
	fs.IntVar(&a.outputFD, "output-listener-fd", -1, "the inherited engine output (PULL) listening socket")
	fs.StringVar(&a.coordinator, "coordinator-address", "", "vLLM's data-parallel coordinator's stats address (not used: the engines' own scheduler stats are the load signal)")
	fs.IntVar(&a.engineStart, "engine-start-index", 0, "the first engine rank that registers")
	fs.IntVar(&a.engineCount, "engine-count", 1, "the number of engines that register")
	fs.IntVar(&a.dpSize, "data-parallel-size", -1, "the deployment's data-parallel size (default: --engine-count)")
	fs.StringVar(&argsJSON, "args-json", "", "the vllm serve arguments, as one JSON object")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), frontendUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	for _, f := range []struct {
		name string
		fd   int
	}{{"listen-fd", a.listenFD}, {"input-listener-fd", a.inputFD}, {"output-listener-fd", a.outputFD}} {
		if f.fd < 0 {
			return nil, fmt.Errorf("--%s is required (vLLM's launcher passes it)", f.name)
		}
	}
	if a.grpcListenFD >= 0 {
		return nil, errors.New("--grpc-listen-fd: Vajra serves no gRPC API; start vllm serve without --grpc-port")
	}
	if a.engineCount < 1 || a.engineStart < 0 || a.engineStart+a.engineCount > 1<<16 {
		return nil, fmt.Errorf("--engine-start-index %d --engine-count %d: want a count of 1 or more and ranks below 65536", a.engineStart, a.engineCount)
	}
	if a.dpSize < 0 {
		a.dpSize = a.engineCount
	}
	if argsJSON == "" {
		return nil, errors.New("--args-json is required (vLLM's launcher passes it)")
	}
	if err := a.serve.parse(argsJSON); err != nil {
		return nil, err
	}
	return a, nil
}

// parse reads --args-json and refuses the front-end settings Vajra cannot
// honour, naming them.
func (s *vllmServeArgs) parse(argsJSON string) error {
	s.EngineReadyTimeoutSecs = 600 // vLLM's VLLM_ENGINE_READY_TIMEOUT_S
	if err := json.Unmarshal([]byte(argsJSON), s); err != nil {
		return fmt.Errorf("--args-json: %w", err)
	}
	if s.ModelTag == "" {
		s.ModelTag = s.Model
	}
	if s.ModelTag == "" {
		return errors.New("--args-json: no model_tag (the model vllm serve was given)")
	}
	switch {
	case s.UDS != "":
		return errors.New("--args-json: uds: Vajra serves HTTP over TCP only; start vllm serve with --host/--port")
	case s.SSLKeyfile != "" || s.SSLCertfile != "":
		return errors.New("--args-json: ssl_keyfile/ssl_certfile: Vajra serves no TLS; put a TLS proxy in front")
	case len(s.LoRAModules) > 0:
		return errors.New("--args-json: lora_modules: LoRA adapters through the engine core are not supported yet")
	case s.MaxModelLen < 0 || s.StreamInterval < 0 || s.ShutdownTimeout < 0 || s.EngineReadyTimeoutSecs < 0:
		return errors.New("--args-json: negative max_model_len, stream_interval, shutdown_timeout or engine_ready_timeout_secs")
	}
	return nil
}

// servedNames are the model names the API answers to: served_model_name,
// else the model as vllm serve was given it.
func (s *vllmServeArgs) servedNames() []string {
	if len(s.ServedModelName) > 0 {
		return s.ServedModelName
	}
	return []string{s.ModelTag}
}

// tokenizerDir is the folder of the tokenizer files: tokenizer, else the
// model; a local folder, or a Hugging Face repository id found in the
// Hugging Face cache (where vLLM's engine has just downloaded it).
func (s *vllmServeArgs) tokenizerDir() (string, error) {
	name := s.Tokenizer
	if name == "" {
		name = s.ModelTag
	}
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		return name, nil
	}
	if dir, ok := hfCached(name, s.Revision); ok {
		return dir, nil
	}
	return "", fmt.Errorf("tokenizer %q: neither a folder nor a model in the Hugging Face cache", name)
}

// generationConfig is remote.Config.GenerationConfig for vLLM's
// --generation-config: auto reads the model's folder (which the
// tokenizer's, tokDir, need not be), else as given.
func (s *vllmServeArgs) generationConfig(tokDir string) string {
	if g := s.GenerationConfig; g != "" && g != "auto" {
		return g
	}
	if st, err := os.Stat(s.ModelTag); err == nil && st.IsDir() {
		return s.ModelTag
	}
	if dir, ok := hfCached(s.ModelTag, s.Revision); ok {
		return dir
	}
	return tokDir
}

// hfCached finds repository id's snapshot in the Hugging Face hub cache
// ($HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub), at revision
// ("" : main).
func hfCached(id, revision string) (string, bool) {
	if strings.Count(id, "/") != 1 {
		return "", false
	}
	cache := os.Getenv("HF_HUB_CACHE")
	if cache == "" {
		if home := os.Getenv("HF_HOME"); home != "" {
			cache = filepath.Join(home, "hub")
		} else if h, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(h, ".cache", "huggingface", "hub")
		}
	}
	repo := filepath.Join(cache, "models--"+strings.ReplaceAll(id, "/", "--"))
	if revision == "" {
		revision = "main"
	}
	if ref, err := os.ReadFile(filepath.Join(repo, "refs", revision)); err == nil {
		revision = strings.TrimSpace(string(ref))
	}
	dir := filepath.Join(repo, "snapshots", revision)
	if _, err := os.Stat(filepath.Join(dir, tokenizer.FileTokenizer)); err != nil {
		return "", false
	}
	return dir, true
}

// inheritedListener takes over the stream socket at descriptor fd, which
// the process that started Vajra left open for it, bound: vLLM's launcher
// binds the HTTP port without listening (vllm-rs, like Vajra, listens on
// it, with a backlog of SOMAXCONN) and hands over its engine sockets
// listening. fd itself is closed (the listener holds a duplicate).
func inheritedListener(fd int, name string) (net.Listener, error) {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		return nil, fmt.Errorf("--%s %d: not an open descriptor (%v)", name, fd, err)
	}
	if typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_STREAM {
		return nil, fmt.Errorf("--%s %d: not a stream socket", name, fd)
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 1 {
		if err := unix.Listen(fd, 4096); err != nil { // the kernel caps it at net.core.somaxconn
			return nil, fmt.Errorf("--%s %d: listen: %w", name, fd, err)
		}
	}
	f := os.NewFile(uintptr(fd), name)
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("--%s %d: %w", name, fd, err)
	}
	return ln, nil
}

// frontendEngines are the engine ranks `vajra frontend` serves, by worker
// URL (vllm-frontend://rank-N), for the remote engine's Dial. The process
// runs one front end.
var (
	frontendEngines sync.Map // string → *vllmcore.Engine
	registerOnce    sync.Once
)

const frontendScheme = "vllm-frontend"

func dialFrontendEngine(rawURL string, _ remote.DialOptions) (remote.Client, error) {
	if e, ok := frontendEngines.Load(rawURL); ok {
		return e.(*vllmcore.Engine), nil
	}
	return nil, fmt.Errorf("vajra frontend: no engine %s", rawURL)
}

func frontend(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a, err := parseFrontend(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "vajra frontend:", err)
		return 2
	}
	log, err := newLogger("console", "info", stderr)
	if err != nil {
		fmt.Fprintln(stderr, "vajra frontend:", err)
		return 2
	}
	defer log.Sync() //nolint:errcheck
	fail := func(what string, err error) int {
		log.Error(what, zap.Error(err))
		return 1
	}
	httpLn, err := inheritedListener(a.listenFD, "listen-fd")
	if err != nil {
		return fail("cannot take the HTTP socket", err)
	}
	tcpLn, ok := httpLn.(*net.TCPListener)
	if !ok {
		httpLn.Close()
		return fail("cannot take the HTTP socket", fmt.Errorf("--listen-fd %d: a %s socket; Vajra serves HTTP over TCP", a.listenFD, httpLn.Addr().Network()))
	}
	defer tcpLn.Close() // the server's once it starts; closing twice is harmless
	inLn, err := inheritedListener(a.inputFD, "input-listener-fd")
	if err != nil {
		return fail("cannot take the engines' request socket", err)
	}
	outLn, err := inheritedListener(a.outputFD, "output-listener-fd")
	if err != nil {
		inLn.Close()
		return fail("cannot take the engines' output socket", err)
	}
	s := &a.serve
	dir, err := s.tokenizerDir()
	if err != nil {
		inLn.Close()
		outLn.Close()
		return fail("no tokenizer", err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		inLn.Close()
		outLn.Close()
		return fail("cannot load the tokenizer", err)
	}
	names := s.servedNames()
	if a.coordinator != "" {
		log.Info("vLLM's data-parallel coordinator is not used: each engine's own scheduler stats are its load", zap.String("coordinator", a.coordinator))
	}
	log.Info("waiting for the engines to register",
		zap.Int("first_rank", a.engineStart), zap.Int("engines", a.engineCount), zap.Int("data_parallel_size", a.dpSize))
	gone := make(chan struct{})
	var goneOnce sync.Once
	var left sync.WaitGroup
	left.Add(a.engineCount)
	f, err := vllmcore.Adopt(ctx, inLn, outLn, a.engineStart, a.engineCount, time.Duration(s.EngineReadyTimeoutSecs)*time.Second, vllmcore.Options{
		ServedModelName:  names[0],
		ModelPath:        s.ModelTag,
		DataParallelSize: a.dpSize,
		OnDetach: func(e *vllmcore.Engine, err error) {
			if errors.Is(e.Err(), vllmcore.ErrClosed) {
				log.Info("engine closed", zap.Int("rank", e.Rank())) // Vajra's shutdown
			} else {
				log.Error("engine gone", zap.Int("rank", e.Rank()), zap.Error(err))
			}
			left.Done()
		},
		OnError: func(err error) { log.Warn("engine connection refused", zap.Error(err)) },
	})
	if err != nil {
		return fail("the engines did not register", err)
	}
	defer func() {
		f.Close()
		// Each engine's reader detaches it after Close returned: wait
		// (bounded) for them, so that their "engine closed" is logged
		// before the process exits.
		select {
		case <-gone:
		case <-time.After(5 * time.Second):
		}
	}()
	go func() {
		left.Wait()
		goneOnce.Do(func() { close(gone) })
	}()
	registerOnce.Do(func() { remote.Register(frontendScheme, dialFrontendEngine) })
	var workers []string
	for _, e := range f.Engines() {
		u := frontendScheme + "://rank-" + strconv.Itoa(e.Rank())
		frontendEngines.Store(u, e)
		workers = append(workers, u)
	}
	defer func() {
		for _, u := range workers {
			frontendEngines.Delete(u)
		}
	}()

	cfg := vajra.DefaultConfig()
	cfg.Logger = log
	cfg.Listener = tcpLn
	cfg.ServedModelNames = names
	cfg.APIKeys = s.APIKey
	if k := os.Getenv("VLLM_API_KEY"); len(cfg.APIKeys) == 0 && k != "" {
		cfg.APIKeys = []string{k} // as vLLM's server and vllm-rs read it
	}
	cfg.AllowedOrigins = s.AllowedOrigins
	if s.StreamInterval > 0 {
		cfg.EngineConfig.StreamInterval = s.StreamInterval
	}
	if s.HTTPTimeoutKeepAlive > 0 {
		cfg.IdleTimeout = time.Duration(s.HTTPTimeoutKeepAlive) * time.Second
	}
	if s.EnableLogRequests {
		cfg.AccessLog = log.Named("access")
	}
	cfg.EngineConfig.ChatTemplate = s.ChatTemplate
	cfg.EngineConfig.MaxModelLen = s.MaxModelLen
	cfg.EngineConfig.ToolCallParser = s.ToolCallParser
	cfg.EngineConfig.ReasoningParser = s.ReasoningParser
	cfg.Remote = remote.Config{
		Workers:          workers,
		Tokenizer:        remote.Local(tok),
		GenerationConfig: s.generationConfig(dir),
	}
	srv, err := vajra.New(cfg)
	if err != nil {
		return fail("cannot build the server", err)
	}
	if err := srv.Start(); err != nil {
		return fail("cannot start", err)
	}
	fmt.Fprintf(stdout, "vajra serving on http://%s as vLLM's front end (%d engine(s))\n", srv.Addr(), len(workers))
	code := 0
	select {
	case <-ctx.Done():
	case <-gone:
		// vLLM's launcher ends everything when an engine dies; should it
		// not, a front end without engines serves nobody.
		log.Error("every engine is gone")
		code = 1
	case <-srv.Done():
		log.Error("network layer stopped", zap.Error(srv.Err()))
		_ = srv.Stop(context.Background())
		return 1
	}
	// vllm serve's shutdown_timeout (0: abort at once, as vLLM does); vLLM's
	// launcher waits at least 5 s before it kills its front end.
	drain := time.Duration(s.ShutdownTimeout) * time.Second
	log.Info("shutting down", zap.Duration("drain", drain))
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("shutdown", zap.Error(err))
	}
	return code
}
