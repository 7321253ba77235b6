package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/vajra-go/vajra"
)

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// serveFlags binds every `vajra serve` flag to cfg. Flag names follow
// vLLM's where the concept is the same.
func serveFlags(fs *flag.FlagSet, cfg *vajra.Config, logFormat, logLevel *string, keys, models *stringList, shutdown *time.Duration) {
	fs.StringVar(&cfg.Host, "host", cfg.Host, "address to listen on")
	fs.IntVar(&cfg.Port, "port", cfg.Port, "port to listen on (0 picks a free one)")
	fs.Var(keys, "api-key", "API key clients must send (Authorization: Bearer KEY or x-api-key: KEY); repeatable; none means no auth")
	fs.Var(models, "served-model-name", "model name clients ask for; repeatable (default "+vajra.DefaultModelName+")")
	fs.IntVar(&cfg.Sim.MaxModelLen, "max-model-len", cfg.Sim.MaxModelLen, "context length in tokens: prompt plus output")
	fs.IntVar(&cfg.Sim.MaxNumSeqs, "max-num-seqs", cfg.Sim.MaxNumSeqs, "most sequences the engine runs at once")
	fs.IntVar(&cfg.Loops, "event-loops", cfg.Loops, "network event loops (0: one per CPU)")
	fs.StringVar(logFormat, "log-format", *logFormat, "log format: json or console")
	fs.StringVar(logLevel, "log-level", *logLevel, "log level: debug, info, warn or error")
	fs.DurationVar(shutdown, "shutdown-timeout", *shutdown, "how long in-flight requests may run after SIGTERM/SIGINT")
	// The embedded simulated engine.
	fs.DurationVar(&cfg.Sim.ITL, "sim-itl", cfg.Sim.ITL, "simulated inter-token latency (Go duration; 0 = as fast as possible)")
	fs.Float64Var(&cfg.Sim.PrefillTPS, "sim-prefill-tps", cfg.Sim.PrefillTPS, "simulated prefill speed in prompt tokens per second (0 = instant)")
	fs.DurationVar(&cfg.Sim.TTFT, "sim-ttft", cfg.Sim.TTFT, "floor for simulated time to first token (Go duration)")
	fs.Float64Var(&cfg.Sim.LoadFactor, "sim-load-factor", cfg.Sim.LoadFactor, "slow steps by ITL*factor*running/max-num-seqs")
	fs.StringVar(&cfg.Sim.Mode, "sim-mode", cfg.Sim.Mode, "simulated output: text (pseudo-text) or echo (repeat the last user message)")
	fs.IntVar(&cfg.Sim.KVCacheTokens, "kv-cache-tokens", cfg.Sim.KVCacheTokens, "simulated KV cache capacity in tokens (blocks of 16)")
	fs.Int64Var(&cfg.Sim.Seed, "seed", cfg.Sim.Seed, "engine-wide seed mixed into every request's")
}

// applyEnv sets every flag not given on the command line from the
// environment variable VAJRA_<NAME> (upper case, '-' as '_'), so
// precedence is flag > environment > default.
func applyEnv(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		env := "VAJRA_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		v, ok := os.LookupEnv(env)
		if !ok {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", env, err))
		}
	})
	return errors.Join(errs...)
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := vajra.DefaultConfig()
	logFormat, logLevel := "console", "info"
	shutdown := 30 * time.Second
	var keys, models stringList
	fs := flag.NewFlagSet("vajra serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	serveFlags(fs, &cfg, &logFormat, &logLevel, &keys, &models, &shutdown)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: vajra serve [flags]\n\nServes the OpenAI and Anthropic APIs on the embedded simulated engine.\nEvery flag can also be set as an environment variable VAJRA_<NAME>\n(upper case, '-' as '_', e.g. VAJRA_API_KEY); a flag on the command line wins.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := applyEnv(fs); err != nil {
		fmt.Fprintln(stderr, "vajra serve:", err)
		return 2
	}
	if len(keys) > 0 {
		cfg.APIKeys = keys
	}
	if len(models) > 0 {
		cfg.ServedModelNames = models
	}
	log, err := newLogger(logFormat, logLevel, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "vajra serve:", err)
		return 2
	}
	defer log.Sync() //nolint:errcheck
	cfg.Logger = log

	srv, err := vajra.New(cfg)
	if err != nil {
		log.Error("cannot build server", zap.Error(err))
		return 1
	}
	if err := srv.Start(); err != nil {
		log.Error("cannot start", zap.Error(err))
		return 1
	}
	fmt.Fprintf(stdout, "vajra serving on http://%s\n", srv.Addr())
	<-ctx.Done()
	log.Info("shutting down", zap.Duration("timeout", shutdown))
	sctx, cancel := context.WithTimeout(context.Background(), shutdown)
	defer cancel()
	if err := srv.Stop(sctx); err != nil {
		log.Warn("shutdown", zap.Error(err))
	}
	return 0
}

// newLogger builds the zap logger of `vajra serve`.
func newLogger(format, level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	var enc zapcore.Encoder
	switch format {
	case "json":
		enc = zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	case "console":
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("--log-format must be json or console, not %q", format)
	}
	core := zapcore.NewCore(enc, zapcore.AddSync(w), lvl)
	// Repeated messages are sampled: the first 100 each second, then one in 100.
	core = zapcore.NewSamplerWithOptions(core, time.Second, 100, 100)
	return zap.New(core), nil
}
