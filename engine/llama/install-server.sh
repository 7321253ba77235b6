#!/usr/bin/env bash
# Builds llama.cpp's own server, llama-server, from the source bundle inside
# the npm package node-llama-cpp@VERSION: the same llama.cpp release whose
# prebuilt libraries engine/llama loads (install.sh), so that Vajra in process,
# Vajra in front of llama-server and llama-server alone run one engine.
# Needs npm, git, cmake and a C++ compiler (Debian's). Idempotent: a build of
# the same version is left alone. About 5 minutes on two cores.
# Usage: install-server.sh DIR VERSION  (the binary lands in DIR/bin/llama-server)
set -euo pipefail
dir=${1:-.llama/server} version=${2:-3.22.1}
# GGML_NATIVE builds for this CPU, but without AMX: ggml's AMX kernels
# (tinygemm_kernel_amx) segfault on Sapphire Rapids machines (seen in this
# project's CI; upstream llama.cpp#20824, the XFD tile-permission bug of
# llama.cpp PR #26954). On CPUs without AMX the flags change nothing.
noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
stamp="$dir/.version"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$version noamx" && -x "$dir/bin/llama-server" ]]; then
	echo "llama-server of node-llama-cpp@$version already in $dir"
	exit 0
fi
for tool in npm git cmake c++; do
	command -v "$tool" >/dev/null || { echo "building llama-server needs $tool" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "node-llama-cpp@$version" >/dev/null)
tar xzf "$tmp"/node-llama-cpp-*.tgz -C "$tmp" package/llama/gitRelease.bundle
git clone -q "$tmp/package/llama/gitRelease.bundle" "$tmp/src"
jobs=$(nproc 2>/dev/null || echo 2)
# The compiler's warnings go to a log, shown only when the build fails.
log="$tmp/build.log"
if ! { cmake -S "$tmp/src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release \
	-DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF \
	-DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=ON \
	-DCMAKE_C_FLAGS="$noamx" -DCMAKE_CXX_FLAGS="$noamx" \
	-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON &&
	cmake --build "$tmp/build" --target llama-server -j "$jobs"; } >"$log" 2>&1; then
	tail -50 "$log" >&2
	echo "building llama-server failed" >&2
	exit 1
fi
rm -rf "$dir"
mkdir -p "$dir/bin"
cp "$tmp"/build/bin/llama-server "$dir/bin/"
cp "$tmp"/build/bin/*.so* "$dir/bin/" 2>/dev/null || true
find "$tmp/build" -name '*.so*' -exec cp -P {} "$dir/bin/" \; 2>/dev/null || true
(cd "$tmp/src" && git describe --tags --always 2>/dev/null || git rev-parse HEAD) > "$dir/.release"
echo "$version noamx" > "$stamp"
echo "built llama-server ($(cat "$dir/.release")) of node-llama-cpp@$version into $dir/bin"
