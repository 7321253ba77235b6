#!/usr/bin/env bash
# install-smg.sh VENV SMG_VERSION: SGLang Model Gateway (PyPI `smg`, pinned;
# its router is Rust, loaded into the Python launcher as smg_rs.abi3.so) in
# its own venv, for bench-remote.sh's side C. Idempotent: a venv that
# already has the pinned version is left alone.
set -euo pipefail
venv=${1:-.smg}
version=${2:-1.13.0}

have() { "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('$1') != '$2')" 2>/dev/null; }
if ! have smg "$version"; then
	test -x "$venv/bin/python" || python3 -m venv "$venv"
	"$venv/bin/pip" install -q --disable-pip-version-check "smg==$version"
fi
echo "smg $version in $venv ($venv/bin/smg)"
