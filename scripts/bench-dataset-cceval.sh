#!/usr/bin/env bash
# Build CrossCodeEval datasets from real repositories with `codesweep dataset cceval` for all
# four languages and print the paper's Table-1 figures, what each filter removed, and the build
# speed. The repositories are the pinned, checksummed registry artifacts of
# scripts/fetch-retrieval-sources.sh (PyPI sdists, npm tarballs, Debian .orig tarballs; cached
# under ~/.cache/codesweep/retrieval-sources): 5 Python, 5 Java, 5 TypeScript, 3 C# projects.
# Each set is then checked end to end: its groundtruths, scored as predictions by
# `codesweep score cceval`, must give EM 100.
#
# usage: scripts/bench-dataset-cceval.sh [SEED]      (default seed 42)
#   CODESWEEP_BIN=path/to/codesweep   use this binary instead of building a release one
#   CODESWEEP_RETRIEVAL_SOURCES=DIR   where the repositories are (default as above)
#   KEEP=DIR                          keep the datasets and summaries in DIR
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seed="${1:-42}"
sources="${CODESWEEP_RETRIEVAL_SOURCES:-$HOME/.cache/codesweep/retrieval-sources}"
out="${KEEP:-$(mktemp -d)}"
mkdir -p "$out"
[[ -n "${KEEP:-}" ]] || trap 'rm -rf "$out"' EXIT

scripts/fetch-retrieval-sources.sh "$sources" >/dev/null
if [[ -n "${CODESWEEP_BIN:-}" ]]; then
  bin="$CODESWEEP_BIN"
else
  cargo build --release -p codesweep >&2
  bin="${CARGO_TARGET_DIR:-target}/release/codesweep"
fi

printf '| language | # repositories | # files | # examples | avg prompt lines | avg prompt tokens | avg reference tokens | cross-file names | build s | examples/s | EM of groundtruth |\n'
printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
for lang in python java typescript csharp; do
  repos=()
  for dir in "$sources/$lang"/*/; do repos+=(--repo "$dir"); done
  "$bin" dataset cceval "${repos[@]}" --language "$lang" --seed "$seed" \
    --out "$out/$lang.jsonl" --summary "$out/$lang.summary.json" >/dev/null 2>"$out/$lang.log"
  python3 - "$out/$lang.jsonl" > "$out/$lang.predictions.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(json.dumps({"task_id": r["metadata"]["task_id"], "pred": r["groundtruth"]}))
PY
  "$bin" score cceval --examples "$out/$lang.jsonl" --predictions "$out/$lang.predictions.jsonl" \
    --language "$lang" --out "$out/$lang.scores" >/dev/null 2>&1
  python3 - "$out/$lang.summary.json" "$out/$lang.scores/results.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
print(f"| {s['language']} | {s['repositories']} | {s['files']} | {s['examples']} | {s['avg_prompt_lines']:.1f} | "
      f"{s['avg_prompt_tokens']:.1f} | {s['avg_reference_tokens']:.1f} | {s['candidates']} | {s['build_seconds']:.2f} | "
      f"{s['examples'] / s['build_seconds']:.0f} | {r['em']} |")
PY
done
printf '\nBM25 retrieval (RG-1: `retrieve --retriever bm25 --next-chunk`, official run.sh defaults) over each set:\n\n'
printf '| language | examples | with context | retrieval s (1 thread) | examples/s (1 thread) | examples/s (%s threads) |\n' "$(nproc)"
printf '|---|---:|---:|---:|---:|---:|\n'
for lang in python java typescript csharp; do
  for threads in 1 "$(nproc)"; do
    "$bin" retrieve --examples "$out/$lang.jsonl" --repos "$sources/$lang" --language "$lang" \
      --retriever bm25 --next-chunk --threads "$threads" --out "$out/$lang.rg1-$threads/" 2>"$out/$lang.retrieve-$threads.log" >/dev/null
  done
  python3 - "$lang" "$out/$lang.retrieve-1.log" "$out/$lang.retrieve-$(nproc).log" <<'PY'
import re, sys
def figures(path):
    text = open(path).read()
    counts = re.search(r"(\d+) examples: (\d+) with context", text)
    timing = re.search(r"retrieved in ([0-9.]+) s \(([0-9.]+) examples/s", text)
    return counts.groups(), timing.groups()
(n, ok), (s1, r1) = figures(sys.argv[2])
_, (_, rn) = figures(sys.argv[3])
print(f"| {sys.argv[1]} | {n} | {ok} | {float(s1):.2f} | {float(r1):.0f} | {float(rn):.0f} |")
PY
done
printf '\nThe official prompt builder manages about 0.5 examples/s on one core here (README, Retrieval).\n'

printf '\nDropped by each filter (in order):\n'
for lang in python java typescript csharp; do
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["language"] + ":", ", ".join(f"{k} {v}" for k, v in s["dropped"].items()))' "$out/$lang.summary.json"
done
printf '\nTokens are \\w+ runs and single punctuation characters (the paper counts StarCoder tokens).\n'
