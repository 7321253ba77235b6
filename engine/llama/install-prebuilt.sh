#!/usr/bin/env bash
# Installs node-llama-cpp's prebuilt llama.cpp libraries for one variant
# (linux-x64, linux-x64-vulkan, linux-x64-cuda) at one pinned version into
# DIR/<variant>, from the npm registry: `make llama-prebuilt`, an explicit
# opt-in (a GPU build, or no compiler), loaded only when named (--llama-lib,
# $VAJRA_LLAMA_LIB). The default install is install.sh's build for this
# machine: on Q4_1 models every prebuilt CPU variant computes the matrix
# products far enough from it to change greedy answers (install.sh says
# how). Idempotent: an install of the same version is left alone.
# Usage: install-prebuilt.sh DIR VARIANT VERSION
set -euo pipefail
dir=${1:-.llama} variant=${2:-linux-x64} version=${3:-3.22.1}
pkg="@node-llama-cpp/$variant"
dest="$dir/$variant"
stamp="$dest/.version"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
	echo "llama.cpp libraries $pkg@$version already in $dest"
	exit 0
fi
command -v npm >/dev/null || { echo "make llama-prebuilt needs npm (Node.js) to fetch $pkg@$version" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$pkg@$version" >/dev/null)
rm -rf "$dest"
mkdir -p "$dest"
tar xzf "$tmp"/*.tgz -C "$tmp"
cp "$tmp"/package/bins/*/*.so "$tmp"/package/bins/*/_nlcBuildMetadata.json "$dest"/
cp "$tmp"/package/LICENSE "$dest"/LICENSE 2>/dev/null || true
echo "$version" > "$stamp"
echo "installed $pkg@$version into $dest"
