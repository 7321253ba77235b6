#!/usr/bin/env bash
# Creates the virtual environment of the Python SDK tests (integration/python)
# at DIR from requirements.txt, where every package is pinned (openai 3.x,
# anthropic 2.x, pytest, httpx, websockets for the SDKs' WebSocket clients,
# and their dependencies). Idempotent: an environment made from the same
# requirements is left alone. Usage: venv.sh DIR
set -euo pipefail
dir=${1:-.venv}
req="$(dirname "$0")/requirements.txt"
want=$(sha256sum "$req" | cut -d' ' -f1)
stamp="$dir/.requirements.sha256"
if [[ -x "$dir/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
	echo "Python SDK environment already in $dir"
	exit 0
fi
command -v python3 >/dev/null || { echo "make venv needs python3" >&2; exit 1; }
rm -rf "$dir"
python3 -m venv "$dir"
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$req"
echo "$want" > "$stamp"
echo "installed the Python SDKs ($req) into $dir"
