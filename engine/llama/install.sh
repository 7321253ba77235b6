#!/usr/bin/env bash
# Builds llama.cpp for this machine from the source bundle inside the npm
# package node-llama-cpp@VERSION (the release whose headers engine/llama
# vendors), in one build: the shared libraries that engine/llama loads
# (libllama, libggml, libggml-base, libggml-cpu) and llama.cpp's own server,
# llama-server, both into DIR/bin. So Vajra in process, Vajra in front of
# llama-server and llama-server alone run one engine, and engine/llama finds
# the libraries there by default (.llama/server/bin).
#
# This is the default install (`make llama`, `make llama-server`): on Q4_1
# models node-llama-cpp's prebuilt CPU libraries (install-prebuilt.sh, `make
# llama-prebuilt`, an explicit opt-in) compute the matrix products so far
# from this build, on every one of their CPU variants, that greedy answers
# differ from the first token (SmolLM2-135M-Instruct answers "What is the
# capital of France?" with "L'Étoile, la Marseillaise, ..."; the native
# build and an F32 copy of the same weights say "The capital of France is
# Paris."). That was measured on Sapphire Rapids (AVX-512); on an AVX2
# machine without AVX-512 (AMD EPYC) the prebuilt haswell-class variant and
# this build agree to about 0.07 in logprob, and both (llama-server too)
# answer that question with "L'Etoile": the model is at a near tie there,
# and which side wins follows the CPU kernels (integration/answers_test.go).
# On an AMD EPYC with AVX-512 (VNNI, BF16; no AMX) both builds say
# "L'Étoile" to that question too, but with the prebuilt libraries 25 of
# integration's 64 parity cases with llama-server differ (16 of its 42
# prompts), with this build none (bench/RESULTS.md).
#
# Needs npm, git, cmake and a C++ compiler (Debian's). Idempotent: a build of
# the same version for the same CPU (its /proc/cpuinfo flags) is left alone.
# About 5 minutes on two cores.
# Usage: install.sh DIR VERSION  (everything lands in DIR/bin)
set -euo pipefail
dir=${1:-.llama/server} version=${2:-3.22.1}
# GGML_NATIVE builds for this CPU, but without AMX: ggml's AMX kernels
# (tinygemm_kernel_amx) segfault on Sapphire Rapids machines (seen in this
# project's CI; upstream llama.cpp#20824, the XFD tile-permission bug of
# llama.cpp PR #26954). On CPUs without AMX the flags change nothing.
noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
# A build for one CPU may not run on another: the stamp names the CPU's
# feature flags, so a machine of another kind rebuilds.
cpu=$( (grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m) | cksum | cut -d' ' -f1)
want="$version noamx cpu=$cpu"
stamp="$dir/.version"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -x "$dir/bin/llama-server" && -f "$dir/bin/libllama.so" ]]; then
	echo "llama.cpp (libraries and llama-server) of node-llama-cpp@$version already built in $dir/bin"
	exit 0
fi
for tool in npm git cmake c++; do
	command -v "$tool" >/dev/null || { echo "building llama.cpp needs $tool" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "node-llama-cpp@$version" >/dev/null)
tar xzf "$tmp"/node-llama-cpp-*.tgz -C "$tmp" package/llama/gitRelease.bundle
git clone -q "$tmp/package/llama/gitRelease.bundle" "$tmp/src" 2>/dev/null
jobs=$(nproc 2>/dev/null || echo 2)
echo "building llama.cpp of node-llama-cpp@$version for this CPU into $dir/bin (about 5 minutes on two cores)"
# The compiler's warnings go to a log, shown only when the build fails.
# llama-server links libllama, libggml, libggml-base and libggml-cpu as
# shared libraries: its one target builds everything engine/llama loads.
log="$tmp/build.log"
if ! { cmake -S "$tmp/src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release \
	-DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF \
	-DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=ON \
	-DCMAKE_C_FLAGS="$noamx" -DCMAKE_CXX_FLAGS="$noamx" \
	-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON &&
	cmake --build "$tmp/build" --target llama-server -j "$jobs"; } >"$log" 2>&1; then
	tail -50 "$log" >&2
	echo "building llama.cpp failed" >&2
	exit 1
fi
rm -rf "$dir"
mkdir -p "$dir/bin"
cp "$tmp"/build/bin/llama-server "$dir/bin/"
cp -P "$tmp"/build/bin/*.so* "$dir/bin/" 2>/dev/null || true
find "$tmp/build" -name '*.so*' -exec cp -P {} "$dir/bin/" \; 2>/dev/null || true
for lib in libllama.so libggml.so libggml-base.so libggml-cpu.so; do
	[[ -e "$dir/bin/$lib" ]] || { echo "the build left no $lib" >&2; exit 1; }
done
(cd "$tmp/src" && git describe --tags --always 2>/dev/null || git rev-parse HEAD) > "$dir/.release"
echo "$want" > "$stamp"
echo "built llama.cpp ($(cat "$dir/.release")) of node-llama-cpp@$version into $dir/bin: the libraries and llama-server"
