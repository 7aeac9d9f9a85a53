#!/usr/bin/env bash
# Benchmark of the engine against llama.cpp on real models (not CI): speed, greedy completions,
# tokenizer. Fetches the Qwen2.5-Coder GGUFs (scripts/fetch-models.sh) and builds the llama.cpp
# vendored by the llama-cpp-python sdist (scripts/build-llamacpp.sh), both checksummed and cached.
#
#   scripts/bench-engine.sh [MODEL...]      default: qwen2.5-coder-0.5b qwen2.5-coder-1.5b (or gemma-3-270m)
#     RUNS=3        interleaved rounds (ours once, llama.cpp once) per model; medians are printed
#     THREADS=2     threads for both engines
#     OUT=DIR       raw outputs (default .bench/engine)
#     PARTS="speed greedy tokenizer"   which parts to run (default these three; "logits" on request)
#     LLAMACPP_ISA=avx2   both engines on their AVX2 path (llama.cpp built without AVX-512/VNNI,
#                   ours with CODESWEEP_CPU_KERNEL=avx2): an AVX2-only CPU's figures on any x86
#
# 1. speed: prefill tokens/s at 512-token prompts and decode tokens/s (32 tokens after the prompt),
#    batch 1 and 8: our bench_generate vs llama-batched-bench -npp 512 -ntg 32 -npl 1,8, plus
#    llama-bench pp512/tg32 as a cross-check of llama.cpp's batch-1 figures; ratio ours/llama.cpp.
# 2. greedy completions of the first model on 20 real code prompts (5 per language, golden
#    CrossCodeEval examples): ours and llama-simple's side by side, with the count of identical ones.
# 3. tokenizer: scripts/check-tokenizer.sh on each model.
# 4. logits (PARTS=logits, first model): how close greedy agreement can get. llama.cpp's greedy
#    path for each of the 20 prompts (llama-logits, built beside llama-simple), then our engine and
#    llama.cpp's build for the other ISA fed that path: first-step logit distances to llama.cpp,
#    where each first picks another token, and llama.cpp's own top-two margin there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs="${RUNS:-3}"
threads="${THREADS:-2}"
out="${OUT:-.bench/engine}"
golden="${CODESWEEP_GOLDEN:-tests/golden}"
parts=" ${PARTS:-speed greedy tokenizer} "
models=("$@")
[[ ${#models[@]} -eq 0 ]] && models=(qwen2.5-coder-0.5b qwen2.5-coder-1.5b)
mkdir -p "$out"

bin="$(scripts/build-llamacpp.sh)"
if [[ "${LLAMACPP_ISA:-native}" == avx2 ]]; then
  export CODESWEEP_CPU_KERNEL=avx2
fi
echo "== CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs); flags: $(grep -m1 '^flags' /proc/cpuinfo | grep -oE 'avx512_vnni|avx512f|avx_vnni|avx2|f16c|fma' | sort -u | xargs); llama.cpp $(basename "$bin"), our kernels ${CODESWEEP_CPU_KERNEL:-detected}"
nice -n 10 cargo build --release -p codesweep-engine --example bench_generate --example tokenize_gguf --example trace_logits >&2
target="${CARGO_TARGET_DIR:-target}/release/examples"
prompts=("$golden"/cceval/{python,java,csharp,typescript}/examples.jsonl)
export RAYON_NUM_THREADS="$threads"

# Our greedy completions of the golden prompts (model $1), each with its exact prompt text: the
# greedy part compares them with llama.cpp's, the logits part takes the prompts from them.
our_completions() {
  "$target/bench_generate" "$1" "${prompts[@]}" --no-speed --completions "$out/completions.ours.jsonl" >/dev/null
}

if [[ "$parts" == *" speed "* ]]; then
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $threads threads"
for model in "${models[@]}"; do
  gguf="$(scripts/fetch-models.sh "$model")"
  rm -f "$out/$model".ours.*.txt "$out/$model".llama.*
  for r in $(seq "$runs"); do
    "$target/bench_generate" "$gguf" "${prompts[@]}" --runs 1 --no-completions >"$out/$model.ours.$r.txt"
    "$bin/llama-batched-bench" -m "$gguf" -t "$threads" -tb "$threads" -c 4608 -b 2048 -ub 512 \
      -npp 512 -ntg 32 -npl 1,8 --output-format jsonl >"$out/$model.llama.$r.txt" 2>&1
    echo "   $model round $r done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  done
  "$bin/llama-bench" -m "$gguf" -t "$threads" -p 512 -n 32 -r "$runs" -o md >"$out/$model.llama-bench.md" 2>/dev/null
done
echo
echo "== speed (tokens/s), ours vs llama.cpp $(basename "$(dirname "$bin")"), same run"
python3 scripts/reference/engine_vs_llamacpp.py speed "$out" "${models[@]}"
echo
echo "llama-bench cross-check (batch 1, tokens/s, mean ± sd):"
for model in "${models[@]}"; do cat "$out/$model.llama-bench.md"; done
fi

if [[ "$parts" == *" greedy "* ]]; then
echo
first="$(scripts/fetch-models.sh "${models[0]}")"
echo "== greedy completions of ${models[0]}: ours vs llama.cpp (llama-simple), 48 tokens, cut at the first newline"
our_completions "$first"
python3 scripts/reference/engine_vs_llamacpp.py greedy "$bin" "$first" "$out/completions.ours.jsonl" "$out/completions.jsonl"
fi

if [[ "$parts" == *" logits "* ]]; then
echo
first="$(scripts/fetch-models.sh "${models[0]}")"
if [[ "${LLAMACPP_ISA:-native}" == avx2 ]]; then other="$(LLAMACPP_ISA=native scripts/build-llamacpp.sh)"; else other="$(LLAMACPP_ISA=avx2 scripts/build-llamacpp.sh)"; fi
echo "== logits of ${models[0]} along llama.cpp's greedy paths: ours and llama.cpp's $(basename "$other") build against llama.cpp $(basename "$bin")"
[[ -f "$out/completions.ours.jsonl" ]] || our_completions "$first"
python3 scripts/reference/engine_vs_llamacpp.py logits "$bin" "$other" "$first" "$out/completions.ours.jsonl" "$target/trace_logits" "$out/logits"
fi

if [[ "$parts" == *" tokenizer "* ]]; then
echo
for model in "${models[@]}"; do
  scripts/check-tokenizer.sh "$model"
done
fi
