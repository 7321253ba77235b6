#!/usr/bin/env python3
"""Write a Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json)
from a GGUF file's byte-level BPE vocabulary, for load tools that want one
(aiperf, guidellm) where there is no model hub.

    gguf_tokenizer.py MODEL.gguf OUT_DIR [--check URL]

Only tokenizer.ggml.model "gpt2" (byte-level BPE) is written, with the
pre-tokenizer llama.cpp uses for tokenizer.ggml.pre (llama-vocab.cpp):
"smollm" (and starcoder's kin) isolate every digit, then GPT-2's split;
"gpt2"/"gpt-2" GPT-2's split alone. Control and unknown tokens become special
added tokens, user-defined ones plain added tokens, as llama.cpp matches them.

--check URL tokenizes a few strings with the result and with the server's
POST URL/tokenize ({"prompt": ...}, vLLM's shape, which `vajra serve` answers)
and exits 1 if any token id differs.

Needs gguf==0.19.0 and tokenizers (0.23.3, installed with aiperf).
"""
import argparse
import json
import os
import sys
import urllib.request

from gguf import GGUFReader
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

# GPT-2's split as llama.cpp writes it (the same as Hugging Face's ByteLevel
# use_regex=True pattern).
GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
# tokenizer.ggml.pre values whose llama.cpp pre-tokenizer is "\p{N}" then GPT-2's.
DIGIT_THEN_GPT2 = {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"}
GPT2_ONLY = {"gpt2", "gpt-2"}

# GGUF token types (llama.cpp's llama_token_type).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

CHECK_STRINGS = [
    "Hello world",
    "time person year way day thing man world life hand part child eye",
    "The year 2026 had 365 days; pi is 3.14159.",
    "héllo wörld, naïve café — 日本語のテキスト",
    "  leading spaces\tand\ttabs\nand a newline\n\n",
    "<|im_start|>user\nhi<|im_end|>\n",
    "don't won't I'm you're they've we'll he'd",
    "emoji 🙂🚀 and symbols #$%&*()[]{}",
]


def field(reader, key):
    f = reader.fields.get(key)
    if f is None:
        return None
    return f.contents()


def build(gguf_path):
    r = GGUFReader(gguf_path)
    model = field(r, "tokenizer.ggml.model")
    if model != "gpt2":
        sys.exit(f"gguf_tokenizer: tokenizer.ggml.model {model!r}: only gpt2 (byte-level BPE) is written")
    pre = field(r, "tokenizer.ggml.pre") or "gpt2"
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type") or [NORMAL] * len(tokens)
    merges = field(r, "tokenizer.ggml.merges") or []
    vocab = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    bpe = models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges],
                     fuse_unk=False, byte_fallback=False)
    tok = Tokenizer(bpe)
    if pre in DIGIT_THEN_GPT2:
        split = [pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated")]
    elif pre in GPT2_ONLY:
        split = []
    else:
        sys.exit(f"gguf_tokenizer: tokenizer.ggml.pre {pre!r} is not known here")
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        split + [pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    added = []
    for i, t in enumerate(tokens):
        if types[i] in (CONTROL, UNKNOWN):
            added.append(AddedToken(t, special=True, normalized=False))
        elif types[i] == USER_DEFINED:
            added.append(AddedToken(t, special=False, normalized=False))
    tok.add_tokens(added)  # ids are the vocabulary's own: the tokens are already in it

    def name(key):
        i = field(r, key)
        return tokens[int(i)] if i is not None and 0 <= int(i) < len(tokens) else None

    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": int(field(r, "llama.context_length") or 8192),
        "clean_up_tokenization_spaces": False,
        "add_bos_token": bool(field(r, "tokenizer.ggml.add_bos_token")),
        "add_eos_token": False,
    }
    for key, ggkey in [("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"),
                       ("unk_token", "unknown_token_id"), ("pad_token", "padding_token_id")]:
        if (n := name("tokenizer.ggml." + ggkey)) is not None:
            config[key] = n
    if (tmpl := field(r, "tokenizer.chat_template")) is not None:
        config["chat_template"] = tmpl
    return tok, config


def check(tok, url):
    bad = 0
    for s in CHECK_STRINGS:
        req = urllib.request.Request(url.rstrip("/") + "/tokenize", method="POST",
                                     data=json.dumps({"prompt": s, "add_special_tokens": False}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            want = json.load(resp)["tokens"]
        got = tok.encode(s, add_special_tokens=False).ids
        ok = got == want
        bad += not ok
        print(f"{'ok  ' if ok else 'DIFF'} {len(got):3d} tokens  {s!r}")
        if not ok:
            print(f"     server {want}\n     here   {got}")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("out")
    ap.add_argument("--check", metavar="URL", help="compare with the server's /tokenize")
    a = ap.parse_args()
    tok, config = build(a.gguf)
    os.makedirs(a.out, exist_ok=True)
    tok.save(os.path.join(a.out, "tokenizer.json"))
    with open(os.path.join(a.out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
    print(f"wrote {a.out}/tokenizer.json ({tok.get_vocab_size()} tokens) and tokenizer_config.json")
    if a.check:
        bad = check(Tokenizer.from_file(os.path.join(a.out, "tokenizer.json")), a.check)
        if bad:
            sys.exit(f"gguf_tokenizer: {bad} of {len(CHECK_STRINGS)} strings tokenize differently from {a.check}")
        print(f"all {len(CHECK_STRINGS)} strings match {a.check}/tokenize")


if __name__ == "__main__":
    main()
