package main

import "flag"

// llama-server's names for the flags of `vajra serve` that mean the same,
// so that a llama-server command line works unchanged where Vajra has the
// setting: each alias shares its flag's value. Aliases take no
// environment variable of their own (VAJRA_<FLAG> sets the flag), and
// setting one on the command line counts as setting its flag (an
// environment variable or config file does not override it).
var llamaServerAliases = []struct{ alias, flag, note string }{
	{"m", "model", ""},
	{"a", "served-model-name", ""},
	{"alias", "served-model-name", ""},
	// llama-server's -c is the context of one request with its unified KV
	// cache (the default); Vajra's KV cache is --kv-cache-tokens.
	{"c", "max-model-len", ""},
	{"ctx-size", "max-model-len", ""},
	{"np", "max-num-seqs", ""},
	{"parallel", "max-num-seqs", ""},
	{"b", "max-num-batched-tokens", ""},
	{"batch-size", "max-num-batched-tokens", ""},
	{"t", "threads", ""},
	{"ngl", "n-gpu-layers", ""},
	{"gpu-layers", "n-gpu-layers", ""},
	{"chat-template-file", "chat-template", ""},
	{"tb", "threads-batch", ""},
	{"fa", "flash-attn", ""},
	{"ctk", "cache-type-k", ""},
	{"ctv", "cache-type-v", ""},
	{"lm", "load-mode", ""},
}

// llamaServerSlots reports whether a command line gave both llama-server's
// context size (-c, --ctx-size) and its slots (-np, --parallel), which
// llama-server reads as slots of -c / -np tokens each (its KV cache is a
// stream per slot when -np is given): `vajra serve` then reads them alike,
// --kv-cache-tokens -c and --max-model-len -c / -np. With -c alone
// llama-server's slots share one KV cache of -c, which one request may
// fill: --max-model-len -c.
func llamaServerSlots(cmdline map[string]bool) bool {
	return (cmdline["c"] || cmdline["ctx-size"]) && (cmdline["np"] || cmdline["parallel"])
}

// noopFlag is a llama-server switch for what Vajra always does.
type noopFlag struct{}

func (noopFlag) String() string   { return "" }
func (noopFlag) Set(string) error { return nil }
func (noopFlag) IsBoolFlag() bool { return true }
func (noopFlag) Get() any         { return true }

// llamaServerSwitches are llama-server switches for what Vajra does
// anyway; they are accepted and change nothing.
var llamaServerSwitches = []struct{ name, why string }{
	{"jinja", "Vajra always renders the model's Jinja chat template"},
	{"cont-batching", "Vajra always batches continuously"},
	{"cb", "Vajra always batches continuously"},
	{"metrics", "Vajra always serves /metrics"},
	{"embedding", "Vajra always serves /v1/embeddings"},
	{"embeddings", "Vajra always serves /v1/embeddings"},
}

// addLlamaServerAliases registers the aliases and switches on fs, after
// every flag they name.
func addLlamaServerAliases(fs *flag.FlagSet) {
	for _, a := range llamaServerAliases {
		f := fs.Lookup(a.flag)
		if f == nil {
			panic("alias of an unknown flag: " + a.flag)
		}
		fs.Var(f.Value, a.alias, "llama-server's name for -"+a.flag)
	}
	for _, s := range llamaServerSwitches {
		fs.Var(noopFlag{}, s.name, "llama-server's switch, accepted: "+s.why)
	}
}

// aliasTarget returns the flag an alias stands for, or name itself.
func aliasTarget(name string) string {
	for _, a := range llamaServerAliases {
		if a.alias == name {
			return a.flag
		}
	}
	return name
}

// isAlias reports whether name is an alias or a no-op switch (no
// environment variable of its own).
func isAlias(name string) bool {
	if aliasTarget(name) != name {
		return true
	}
	for _, s := range llamaServerSwitches {
		if s.name == name {
			return true
		}
	}
	return false
}
