#!/usr/bin/env bash
# Benchmark `codesweep retrieve` (RG-1 BM25, the official run.sh setting) on the 1,000 golden
# CrossCodeEval examples (4 languages x 250, 18 real repositories), on one core and on all
# cores, and time the official prompt builder on the same input in the same run.
#
# usage: scripts/bench-retrieve.sh [RUNS]            (default 5 runs per setting)
#   CCEVAL_PROMPT_BUILDER=/path/to/cceval/prompt_builder  time the official builder too
#                      (needs: pip install rank-bm25==0.2.2 scikit-learn nltk)
#   REFERENCE_LIMIT=N  official builder on the first N examples of each language (default 10;
#                      it runs at ~0.5 examples/s, so all 1,000 take over half an hour)
# Times include reading, chunking and tokenizing the repositories. Prints medians in
# examples/second, and the ratio to the official builder.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs="${1:-5}"
golden="${CODESWEEP_GOLDEN:-tests/golden}"
sources="${CODESWEEP_RETRIEVAL_SOURCES:-$HOME/.cache/codesweep/retrieval-sources}"
punkt="${CODESWEEP_PUNKT_DIR:-$HOME/.cache/codesweep/punkt_tab/english}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

scripts/fetch-retrieval-sources.sh "$sources" >/dev/null
scripts/fetch-punkt-english.sh "$punkt" >/dev/null
cargo build --release -p codesweep >&2
bin="${CARGO_TARGET_DIR:-target}/release/codesweep"
languages=(python java typescript csharp)

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
one_run() { # threads -> examples/s over all languages (sum of the retrieval times)
  local total=0 seconds=0
  for lang in "${languages[@]}"; do
    s=$("$bin" retrieve --language "$lang" --examples "$golden/cceval/$lang/examples.jsonl" \
          --repos "$sources/$lang" --punkt "$punkt" --retriever bm25 --next-chunk \
          --threads "$1" --out "$out/$lang" 2>&1 | sed -n 's/^retrieved in \([0-9.]*\) s.*/\1/p')
    seconds=$(echo "$seconds + $s" | bc -l)
    total=$((total + $(wc -l < "$golden/cceval/$lang/examples.jsonl")))
  done
  echo "$total / $seconds" | bc -l
}
measure() { for _ in $(seq "$runs"); do one_run "$1"; done | median; }

one=$(measure 1)
all_threads=$(nproc)
all=$(measure "$all_threads")
for lang in "${languages[@]}"; do
  cmp -s "$out/$lang/line_completion_rg1_bm25.jsonl" /dev/null && { echo "no output for $lang" >&2; exit 1; }
done
printf 'examples: 1000 CrossCodeEval examples (4 languages x 250), RG-1 BM25\n'
printf 'codesweep, 1 thread:   median %.1f examples/s over %s runs\n' "$one" "$runs"
printf 'codesweep, %s threads:  median %.1f examples/s over %s runs\n' "$all_threads" "$all" "$runs"

if [[ -n "${CCEVAL_PROMPT_BUILDER:-}" ]]; then
  limit="${REFERENCE_LIMIT:-10}"
  n=0 seconds=0
  for lang in "${languages[@]}"; do
    line=$(python3 scripts/reference/cceval_retrieval_timing.py --prompt-builder "$CCEVAL_PROMPT_BUILDER" \
      --examples "$golden/cceval/$lang/examples.jsonl" --repos "$sources" --language "$lang" \
      --punkt "$punkt" --limit "$limit" --results "$out/ref-$lang.jsonl")
    echo "$line"
    s=$(echo "$line" | sed -n 's/.*reading \([0-9.]*\) s + retrieval \([0-9.]*\) s.*/\1 + \2/p')
    seconds=$(echo "$seconds + $s" | bc -l)
    n=$((n + limit))
    # Parity of the timed rows with ours (same examples, same order).
    python3 - "$out/ref-$lang.jsonl" "$out/$lang/line_completion_rg1_bm25.jsonl" <<'PY'
import json, sys
ref = [json.loads(l) for l in open(sys.argv[1])]
ours = [json.loads(l) for l in open(sys.argv[2])][: len(ref)]
same = sum(r["crossfile_context"] == o["crossfile_context"] for r, o in zip(ref, ours))
print(f"  parity: {same}/{len(ref)} rows identical to the official builder's")
sys.exit(0 if same == len(ref) else 1)
PY
  done
  ref=$(echo "$n / $seconds" | bc -l)
  printf 'official builder, 1 process: %.3f examples/s (%s examples)\n' "$ref" "$n"
  printf 'speed-up vs official, 1 thread: %.0fx; %s threads: %.0fx\n' "$(echo "$one / $ref" | bc -l)" "$all_threads" "$(echo "$all / $ref" | bc -l)"
fi
