#!/usr/bin/env bash
# Builds a five-language RepoQA dataset from real packages (scripts/fetch-repoqa-sources.sh) with
# `codesweep dataset repoqa`, printing the needles chosen per language.
#
#   scripts/build-repoqa-demo.sh [OUT.json]      (default runs/repoqa-demo/dataset.json)
#
# CODESWEEP_BIN picks the binary (default target/debug/codesweep, built if missing); extra
# arguments for every build go in CODESWEEP_DATASET_ARGS (e.g. "--describe model:PATH").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-runs/repoqa-demo/dataset.json}"
sources="$(scripts/fetch-repoqa-sources.sh 2>/dev/null)"
bin="${CODESWEEP_BIN:-${CARGO_TARGET_DIR:-target}/debug/codesweep}"
[[ -x "$bin" ]] || cargo build -p codesweep >&2
read -r -a extra <<< "${CODESWEEP_DATASET_ARGS:-}"
mkdir -p "$(dirname "$out")"
rm -f "$out"
build() { # language name commit entry-args...
  local language="$1" name="$2" commit="$3"
  shift 3
  "$bin" dataset repoqa --repo "$sources/$language/$name" --language "$language" --name "$name" --commit "$commit" \
    --seed 1 --append --out "$out" "$@" "${extra[@]}"
}
build python click 8.1.7 --entry src/click
build cpp leveldb 1.23-4 --entry "" --exclude third_party
build java commons-csv 1.9.0-1 --entry src/main/java
build typescript immer 10.1.1 --entry src
build rust semver 1.0.23 --entry src
