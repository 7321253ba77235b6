package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vajra-go/vajra/engine/llama"
)

// loraArgs rewrites the two LoRA forms the flag package cannot read into
// one value per flag: llama-server's older `--lora-scaled FILE SCALE` (two
// arguments) into `--lora-scaled FILE:SCALE`, and vLLM's
// `--lora-modules a=x b=y` (several values after one flag) into one
// --lora-modules per value. Other arguments pass unchanged.
func loraArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		switch {
		case a == "--" || !strings.HasPrefix(a, "-"):
			out = append(out, a)
		case name == "lora-scaled" && i+2 < len(args) && !strings.Contains(args[i+1], ":") && isFloat(args[i+2]):
			out = append(out, a, args[i+1]+":"+args[i+2])
			i += 2
		case name == "lora-modules":
			out = append(out, a)
			if i+1 < len(args) {
				out = append(out, args[i+1])
				i++
			}
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				out = append(out, a, args[i+1])
				i++
			}
		default:
			out = append(out, a)
		}
	}
	return out
}

func isFloat(s string) bool {
	_, err := strconv.ParseFloat(s, 32)
	return err == nil
}

// adapters reads --lora, --lora-scaled and --lora-modules into the llama
// engine's adapters, in that order. --lora FILE is served under the
// file's base name without .gguf (as --model's file is); a trailing
// :SCALE (a number) is its scale.
func (st *serveSettings) adapters() ([]llama.Adapter, error) {
	var out []llama.Adapter
	fileScale := func(flag, v string, needScale bool) error {
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			a := llama.Adapter{Path: item}
			if i := strings.LastIndexByte(item, ':'); i > 0 {
				if f, err := strconv.ParseFloat(item[i+1:], 32); err == nil {
					a.Path, a.Scale = item[:i], float32(f)
					if f == 0 {
						// llama-server applies a zero-scale adapter as none.
						return fmt.Errorf("%s %s: a scale of 0 applies nothing; serve the base model instead", flag, item)
					}
				}
			}
			if needScale && a.Scale == 0 {
				return fmt.Errorf("%s %s: want FILE:SCALE", flag, item)
			}
			a.Name = strings.TrimSuffix(filepath.Base(a.Path), ".gguf")
			out = append(out, a)
		}
		return nil
	}
	for _, v := range st.lora.vals {
		if err := fileScale("--lora", v, false); err != nil {
			return nil, err
		}
	}
	for _, v := range st.loraScaled.vals {
		if err := fileScale("--lora-scaled", v, true); err != nil {
			return nil, err
		}
	}
	for _, v := range st.loraModules.vals {
		a, err := loraModule(v)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// loraModule reads one vLLM --lora-modules value: NAME=PATH, or the JSON
// object {"name": ..., "path": ...} (its base_model_name is ignored: the
// base is --model).
func loraModule(v string) (llama.Adapter, error) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "{") {
		var m struct{ Name, Path string }
		if err := json.Unmarshal([]byte(v), &m); err != nil || m.Name == "" || m.Path == "" {
			return llama.Adapter{}, fmt.Errorf("--lora-modules %s: want NAME=FILE or {\"name\":...,\"path\":...}", v)
		}
		return llama.Adapter{Name: m.Name, Path: m.Path}, nil
	}
	name, path, ok := strings.Cut(v, "=")
	if !ok || name == "" || path == "" {
		return llama.Adapter{}, fmt.Errorf("--lora-modules %s: want NAME=FILE", v)
	}
	return llama.Adapter{Name: name, Path: path}, nil
}
