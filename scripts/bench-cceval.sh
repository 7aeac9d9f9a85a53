#!/usr/bin/env bash
# Benchmark the CrossCodeEval Python scorer on 3,000 predictions over real code
# (pinned PyPI sdists), on one core and on all cores; optionally time the official
# scorer on the same data in the same run and check every per-example value.
#
# usage: scripts/bench-cceval.sh [RUNS]            (default 5 runs per setting)
#   CCEVAL_SCRIPTS=/path/to/cceval/scripts  also time the official scorer (its
#                                           scripts/ folder; see scripts/reference/)
#   REFERENCE_LIMIT=N                       official scorer on the first N examples
#                                           (default: all 3,000, ~3 minutes)
# Prints medians in examples/second and the ratio to the reference.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs="${1:-5}"
export CODESWEEP_BENCH_DIR="${CODESWEEP_BENCH_DIR:-.bench}"
bench="$CODESWEEP_BENCH_DIR"
data="$bench/cceval"

scripts/fetch-bench-data.sh >&2
if [[ ! -s "$data/predictions.jsonl" ]]; then
  python3 scripts/make_cceval_bench.py --src "$bench/src" --n 3000 --seed 0 --out "$data" >&2
fi
cargo build --release -p codesweep >&2
bin=target/release/codesweep

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
measure() { # threads -> median examples/s over $runs runs
  for _ in $(seq "$runs"); do
    "$bin" score cceval --language python --examples "$data/examples.jsonl" \
      --predictions "$data/predictions.jsonl" --out "$bench/out" --threads "$1" 2>&1 >/dev/null \
      | sed -n 's/.*(\([0-9.]*\) examples\/s.*/\1/p'
  done | median
}

one=$(measure 1)
all_threads=$(nproc)
all=$(measure "$all_threads")
echo "examples: $(wc -l < "$data/predictions.jsonl") CCEval Python predictions over real code"
echo "codesweep, 1 thread:   median $one examples/s over $runs runs"
echo "codesweep, $all_threads threads:  median $all examples/s over $runs runs"

if [[ -n "${CCEVAL_SCRIPTS:-}" ]]; then
  limit=()
  [[ -n "${REFERENCE_LIMIT:-}" ]] && limit=(--limit "$REFERENCE_LIMIT")
  ref_out="$(python3 scripts/reference/cceval_official_timing.py --cceval-scripts "$CCEVAL_SCRIPTS" \
    --data "$data" "${limit[@]}" --results "$bench/reference.jsonl")"
  echo "$ref_out"
  ref=$(echo "$ref_out" | sed -n 's/.*= \([0-9.]*\) examples\/s.*/\1/p')
  python3 - "$bench/reference.jsonl" "$bench/out" "$one" "$all" "$ref" <<'PY'
import json, sys
ref_path, out, one, all_, ref = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:])
ref_rows = [json.loads(l) for l in open(ref_path)]
ours_t = [json.loads(l) for l in open(f"{out}/prediction_truncated.jsonl")]
ours_d = [json.loads(l) for l in open(f"{out}/detailed_results.jsonl")]
bad = 0
for r, t, d in zip(ref_rows, ours_t, ours_d):
    same = all(r[k] == t[k] for k in ("task_id", "pred", "target", "pred_ids", "target_ids"))
    same = same and all(abs(r[k] - d[k]) <= 1e-9 for k in ("em", "es", "id_em", "id_precision", "id_recall", "id_f1"))
    bad += not same
print(f"parity: {len(ref_rows) - bad}/{len(ref_rows)} examples identical to the official scorer")
print(f"speed-up vs official, 1 thread: {one / ref:.0f}x; all cores: {all_ / ref:.0f}x")
sys.exit(1 if bad else 0)
PY
fi
