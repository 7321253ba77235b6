#!/usr/bin/env bash
# Fetches the gRPC definitions of the vLLM and SGLang workers (common.proto,
# vllm_engine.proto, sglang_scheduler.proto) from one pinned release of
# PyPI's smg-grpc-proto, checked against the wheel's sha256, into DIR
# (git-ignored; the .proto files are not committed, the Go generated from
# them is). Idempotent. Usage: fetch-protos.sh DIR
set -euo pipefail
dir=${1:?usage: fetch-protos.sh DIR}
VERSION=0.4.28
WHEEL=smg_grpc_proto-$VERSION-py3-none-any.whl
SHA256=970dec0a8c0e78b42758c7690cc7b8bbf0416f680fdad448a4f5c9b8c3e68afb
FILES="common.proto vllm_engine.proto sglang_scheduler.proto"
stamp="$dir/.sha256"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$SHA256" ]]; then
	exit 0
fi
py=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
	"smg-grpc-proto==$VERSION" -d "$tmp" >&2
got=$(sha256sum "$tmp/$WHEEL" | cut -d' ' -f1)
if [[ "$got" != "$SHA256" ]]; then
	echo "fetch-protos: $WHEEL has sha256 $got, want $SHA256" >&2
	exit 1
fi
rm -rf "$dir"
mkdir -p "$dir"
for f in $FILES; do
	unzip -p "$tmp/$WHEEL" "smg_grpc_proto/proto/$f" > "$dir/$f"
done
echo "$SHA256" > "$stamp"
echo "fetched $FILES from smg-grpc-proto $VERSION into $dir" >&2
