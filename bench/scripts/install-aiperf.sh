#!/usr/bin/env bash
# install-aiperf.sh VENV AIPERF_VERSION MODEL.gguf: NVIDIA's aiperf (PyPI,
# pinned) and llama.cpp's gguf reader (gguf 0.19.0) in their own venv, and
# a Hugging Face tokenizer folder of MODEL written from its GGUF vocabulary
# into VENV/tokenizer (bench/scripts/gguf_tokenizer.py), since aiperf wants
# one and there is no model hub here. Idempotent: a venv that already has
# the pinned versions and a tokenizer newer than the model is left alone.
set -euo pipefail
venv=${1:-.venv-aiperf}
version=${2:-0.13.0}
model=${3:-.models/SmolLM2-135M-Instruct.Q4_1.gguf}
gguf_version=0.19.0
here=$(cd "$(dirname "$0")" && pwd)

have() { "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('$1') != '$2')" 2>/dev/null; }
if ! have aiperf "$version" || ! have gguf "$gguf_version"; then
	test -x "$venv/bin/python" || python3 -m venv "$venv"
	"$venv/bin/pip" install -q --disable-pip-version-check "aiperf==$version" "gguf==$gguf_version"
fi
if [ ! -f "$model" ]; then
	echo "install-aiperf: $model is missing (make real-model)" >&2
	exit 1
fi
if [ ! -f "$venv/tokenizer/tokenizer.json" ] || [ "$model" -nt "$venv/tokenizer/tokenizer.json" ]; then
	"$venv/bin/python" "$here/gguf_tokenizer.py" "$model" "$venv/tokenizer"
fi
echo "aiperf $("$venv/bin/aiperf" --version 2>/dev/null | tail -1) in $venv, tokenizer in $venv/tokenizer"
