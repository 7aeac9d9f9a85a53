#!/usr/bin/env bash
# GPU benchmark of the engine's CUDA backend against transformers' `generate` (not CI), on
# random-weight models of Qwen2.5-Coder-1.5B's and 7B's shapes written on the spot as bf16
# safetensors, for an NVIDIA machine with no network that has PyTorch and transformers but no Rust.
# Two halves:
#
#   scripts/gpu-bench.sh build     on a machine with Rust (no GPU needed): builds bench_generate
#                                  (engine/examples) with `--features cuda` for compute capability
#                                  CUDA_COMPUTE_CAP (default 90: H100, H200), strips and
#                                  xz-compresses it, and puts it with this script, the Python helper
#                                  (scripts/reference/gpu_bench.py) and BUILD.json in .gpu-bench/;
#                                  prints the sizes and fails if the folder is over 64 MiB.
#     TOKENIZER=FILE               also carry this tokenizer.json (compressed); without one, `run`
#                                  trains a small byte-level BPE tokenizer on the spot
#   scripts/gpu-bench.sh run       on the GPU machine, from the repo root (with .gpu-bench/ copied
#                                  into it) or as .gpu-bench/gpu-bench.sh inside the copied folder
#     MODELS="qwen2.5-coder-1.5b qwen2.5-coder-7b"   shapes to run (gpu_bench.py knows also `tiny`)
#     BATCHES=1,8,32,64  PROMPT_TOKENS=512  DECODE_TOKENS=32  RUNS=3
#     PREFILL_CHUNK=N    prompt tokens per engine prefill step (default: the engine's, 512)
#     WORK=DIR           weights, tokenizer, unpacked binary, logs, logits (default
#                        /tmp/codesweep-gpu-bench; ~19 GB for both models; weights are kept and reused)
#     OUT=DIR            results.md and the raw JSON of both engines (default: results/ in the folder)
#     PYTHON=python3     the Python with torch and transformers
#     DEVICE=cuda:0      where both engines run; DEVICE=cpu (with MODELS=tiny, DTYPE=f32 and
#                        BENCH_BIN=a CPU build of bench_generate) is a dry run of this script on a
#                        machine without a GPU, to check the pipeline, not a benchmark
#     DTYPE=bf16         our engine's dtype (transformers runs bf16, and fp32 for the logit floor)
#     BENCH_BIN=FILE     run this bench_generate instead of the one carried in .gpu-bench/
#
# `run`, for each model: writes the random weights (torch on the GPU; config.json with the real
# model's hyper-parameters and no end-of-sequence token, so neither engine stops early), runs our
# bench_generate on cuda:0 in bf16 (synthetic prompts of PROMPT_TOKENS tokens, BATCHES, decode
# tokens/s over DECODE_TOKENS steps, medians of RUNS after a warm-up per batch size, and the
# last-position logits of 4 prompts), then transformers' generate on the same weights and the same
# prompt token ids (gpu_bench.py transformers), and prints the markdown table of prefill and decode
# tokens/s and of the max |logit difference| (also written to OUT/results.md). The two engines run
# one after the other, each in its own process, so each has the GPU to itself.
#
# The CUDA build reuses scripts/check-cuda.sh's pip packages of NVIDIA's CUDA 13.0 compiler (same
# pins, same virtual environment, $CODESWEEP_CUDA_DIR), and adds the libraries the binary links
# (candle's cudarc links cuBLAS, cuBLASLt, cuRAND, NVRTC, the CUDA runtime and the driver's libcuda
# at build time): cuBLAS, cuRAND and NVRTC from pip, and a stub libcuda.so (SONAME libcuda.so.1)
# compiled from the driver functions cudarc declares, all under $CODESWEEP_CUDA_DIR/link, given to
# the linker through LIBRARY_PATH. At run time the GPU machine's driver provides libcuda.so.1 (driver
# 580 or newer, for CUDA 13) and its PyTorch's pip packages (nvidia/cu13/lib) the other libraries.
set -euo pipefail

LIMIT=$((64 * 1024 * 1024))

die() {
  echo "gpu-bench: $*" >&2
  exit 1
}

mib() {
  awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'
}

build() {
  cd "$(dirname "${BASH_SOURCE[0]}")/.."
  for tool in cargo cc strip xz readelf git; do
    command -v "$tool" >/dev/null || die "build needs $tool"
  done
  local venv cu link dest bin
  venv="${CODESWEEP_CUDA_DIR:-$HOME/.cache/codesweep/cuda-venv}"
  if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv"
  fi
  # scripts/check-cuda.sh's compiler packages (keep the pins in step), then the linked libraries.
  "$venv/bin/python" -m pip install --quiet \
    nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.96 \
    nvidia-cuda-cccl==13.0.85 nvidia-cuda-crt==13.0.88 \
    nvidia-cublas==13.1.0.3 nvidia-curand==10.4.0.35 nvidia-cuda-nvrtc==13.0.88
  cu="$("$venv/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')"
  [[ -x "$cu/bin/nvcc" ]] || die "nvcc not found under $cu/bin"

  # As scripts/check-cuda.sh: nvcc looks for cicc/libdevice under its own tree (nvvm/).
  export CUDA_ROOT="$cu" CUDA_PATH="$cu" CUDA_HOME="$cu"
  export PATH="$cu/bin:$cu/nvvm/bin:$PATH"
  export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
  export LD_LIBRARY_PATH="$cu/lib:${LD_LIBRARY_PATH:-}"
  nvcc --version | tail -1

  # The linker wants unversioned names (-lcublas finds libcublas.so); the pip wheels ship only
  # the versioned files (libcublas.so.13), whose SONAMEs the binary then records.
  link="$venv/link"
  mkdir -p "$link"
  local lib real
  for lib in cudart cublas cublasLt curand nvrtc; do
    real="$(find "$cu/lib" -maxdepth 1 -name "lib$lib.so.[0-9]*" | sort | head -1)"
    [[ -n "$real" ]] || real="$(find "$(dirname "$cu")" -path "*/lib/lib$lib.so.[0-9]*" | sort | head -1)"
    [[ -n "$real" ]] || die "no lib$lib.so.* under $(dirname "$cu")/*/lib"
    ln -sfn "$real" "$link/lib$lib.so"
  done
  # libcuda comes with the driver, which this machine need not have: link against a stub that
  # defines every driver function cudarc declares, under the driver's SONAME.
  cargo fetch --locked >/dev/null
  local version src
  version="$(awk '$0 == "name = \"cudarc\"" { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)"
  [[ -n "$version" ]] || die "cudarc is not in Cargo.lock"
  src="$(find "${CARGO_HOME:-$HOME/.cargo}/registry/src" -maxdepth 2 -type d -name "cudarc-$version" | head -1)"
  [[ -f "$src/src/driver/sys/mod.rs" ]] || die "cudarc $version sources not found under ${CARGO_HOME:-$HOME/.cargo}/registry/src"
  grep -ohE 'pub unsafe fn cu[A-Za-z0-9_]+' "$src/src/driver/sys/mod.rs" | sed 's/^pub unsafe fn //' | sort -u |
    awk '{ printf "int %s(void) { return 999; }\n", $1 }' >"$link/libcuda-stub.c"
  cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$link/libcuda.so" "$link/libcuda-stub.c"
  export LIBRARY_PATH="$link${LIBRARY_PATH:+:$LIBRARY_PATH}"

  nice -n 10 cargo build --release --locked -p codesweep-engine --features cuda --example bench_generate
  bin="${CARGO_TARGET_DIR:-target}/release/examples/bench_generate"

  dest=.gpu-bench
  mkdir -p "$dest"
  rm -f "$dest/bench_generate" "$dest/bench_generate.xz" "$dest/tokenizer.json" "$dest/tokenizer.json.xz" \
    "$dest/gpu-bench.sh" "$dest/gpu_bench.py" "$dest/BUILD.json"
  strip --strip-all -o "$dest/bench_generate" "$bin"
  local stripped
  stripped="$(stat -c %s "$dest/bench_generate")"
  local needed
  needed="$(readelf -d "$dest/bench_generate" | awk -F'[][]' '/NEEDED/ { printf "%s%s", sep, $2; sep = " " }')"
  xz -9 -T1 "$dest/bench_generate"
  cp scripts/gpu-bench.sh "$dest/gpu-bench.sh"
  cp scripts/reference/gpu_bench.py "$dest/gpu_bench.py"
  if [[ -n "${TOKENIZER:-}" ]]; then
    [[ -f "$TOKENIZER" ]] || die "TOKENIZER=$TOKENIZER: no such file"
    xz -9 -T1 -c "$TOKENIZER" >"$dest/tokenizer.json.xz"
  fi
  local dirty=false
  [[ -z "$(git status --porcelain --untracked-files=no)" ]] || dirty=true
  python3 - "$dest/BUILD.json" "$(git rev-parse HEAD)" "$dirty" "$(nvcc --version | tail -1)" \
    "$CUDA_COMPUTE_CAP" "$(rustc --version)" "$needed" "$stripped" <<'PY'
import json, sys, time
out, commit, dirty, nvcc, cap, rustc, needed, stripped = sys.argv[1:]
json.dump({"commit": commit, "dirty": dirty == "true", "built": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "nvcc": nvcc, "compute_cap": cap, "rustc": rustc, "features": "cuda", "needed": needed.split(),
           "stripped_bytes": int(stripped)}, open(out, "w"), indent=1)
PY

  echo "links: $needed"
  echo "bench_generate: $(mib "$stripped") stripped, $(mib "$(stat -c %s "$dest/bench_generate.xz")") compressed"
  local total
  total="$(find "$dest" -maxdepth 1 -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')"
  find "$dest" -maxdepth 1 -type f -printf '  %f\t%s bytes\n' | sort
  echo "$dest: $(mib "$total") (limit $(mib "$LIMIT"))"
  if ((total > LIMIT)); then
    die "$dest is over 64 MiB"
  fi
  local tracked
  tracked="$({ git ls-files -z | xargs -0 stat -c %s 2>/dev/null || true; } | awk '{ s += $1 } END { print s + 0 }')"
  if ((tracked + total > LIMIT)); then
    echo "note: with the repo's tracked files ($(mib "$tracked")) it is $(mib $((tracked + total))): over 64 MiB;" \
      "where a tool sends the whole checkout, send $dest alone and run it as $dest/gpu-bench.sh run" >&2
  fi
  echo "copy $dest/ to the GPU machine and run: $dest/gpu-bench.sh run (or scripts/gpu-bench.sh run in a checkout)"
}

# unpack SRC DEST: SRC.xz decompressed, or SRC copied, to DEST; fails when neither exists.
unpack() {
  if [[ -f "$1.xz" ]]; then
    if command -v xz >/dev/null; then
      xz -dc "$1.xz" >"$2.partial"
    else
      "$py" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1.xz" "$2.partial"
    fi
    mv "$2.partial" "$2"
  elif [[ -f "$1" ]]; then
    cp "$1" "$2"
  else
    return 1
  fi
}

run() {
  local here folder checkout_helper=""
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  # A BENCH_BIN run from a checkout takes the checkout's helper, not the one carried beside an
  # earlier build.
  if [[ -n "${BENCH_BIN:-}" && -f "$here/reference/gpu_bench.py" ]]; then
    checkout_helper="$here/reference/gpu_bench.py"
  fi
  if [[ -f "$here/gpu_bench.py" && -f "$here/bench_generate.xz" ]] || [[ -f "$here/gpu_bench.py" && -f "$here/bench_generate" ]]; then
    folder="$here"
  elif [[ -d "$here/../.gpu-bench" ]]; then
    folder="$(cd "$here/../.gpu-bench" && pwd)"
  elif [[ -n "$checkout_helper" ]]; then
    # A dry run from a checkout that has built nothing for a GPU.
    mkdir -p "$here/../.gpu-bench"
    folder="$(cd "$here/../.gpu-bench" && pwd)"
  else
    die "no .gpu-bench folder: run scripts/gpu-bench.sh build on a machine with Rust, and copy .gpu-bench/ here"
  fi
  py="${PYTHON:-python3}"
  local work="${WORK:-/tmp/codesweep-gpu-bench}"
  local out="${OUT:-$folder/results}"
  local models="${MODELS:-qwen2.5-coder-1.5b qwen2.5-coder-7b}"
  local batches="${BATCHES:-1,8,32,64}" prompt_tokens="${PROMPT_TOKENS:-512}"
  local decode_tokens="${DECODE_TOKENS:-32}" runs="${RUNS:-3}"
  local helper="${checkout_helper:-$folder/gpu_bench.py}"
  local device="${DEVICE:-cuda:0}" dtype="${DTYPE:-bf16}"
  export PYTHONUNBUFFERED=1
  mkdir -p "$work" "$out"

  "$py" -c 'import torch, transformers' 2>/dev/null || die "$py cannot import torch and transformers (set PYTHON=)"
  local driver=""
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    driver="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
    if [[ "${driver%%.*}" =~ ^[0-9]+$ ]] && ((${driver%%.*} < 580)); then
      echo "warning: driver $driver; the binary is built with CUDA 13.0, which needs driver 580 or newer" >&2
    fi
  fi
  if [[ -f "$folder/BUILD.json" && "$device" == cuda* ]]; then
    echo "build: $(tr -d '\n' <"$folder/BUILD.json")"
    # candle's kernels are compiled for one compute capability (PTX the driver compiles at load).
    "$py" - "$folder/BUILD.json" <<'PY' || true
import json, sys, torch
built = str(json.load(open(sys.argv[1])).get("compute_cap", ""))
major, minor = torch.cuda.get_device_capability(0)
if built and f"{major}{minor}" != built:
    print(f"warning: this GPU has compute capability {major}.{minor}; the binary was built for {built} "
          "(CUDA_COMPUTE_CAP at build time)", file=sys.stderr)
PY
  fi

  # The binary, and the CUDA libraries it links: PyTorch's pip packages (nvidia/cu13/lib and the
  # like), then a CUDA toolkit's; libcuda.so.1 comes from the driver.
  local bin="$work/bench_generate"
  if [[ -n "${BENCH_BIN:-}" ]]; then
    [[ -x "$BENCH_BIN" ]] || die "BENCH_BIN=$BENCH_BIN is not an executable file"
    cp "$BENCH_BIN" "$bin"
  else
    unpack "$folder/bench_generate" "$bin" || die "no bench_generate(.xz) in $folder"
  fi
  chmod +x "$bin"
  local libdirs
  libdirs="$("$py" - <<'PY'
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except ImportError:
    roots = []
dirs = []
for root in roots:
    dirs += sorted(glob.glob(os.path.join(root, "cu[0-9]*", "lib"))) + sorted(glob.glob(os.path.join(root, "*", "lib")))
print(":".join(dict.fromkeys(d for d in dirs if os.path.isdir(d))))
PY
)"
  local toolkit="${CUDA_HOME:-/usr/local/cuda}"
  export LD_LIBRARY_PATH="${libdirs:+$libdirs:}$toolkit/lib64:${LD_LIBRARY_PATH:-}"
  local linked missing
  linked="$(ldd "$bin" 2>&1)" || echo "warning: ldd $bin: $linked" >&2
  missing="$(awk '/not found/ { print $1 }' <<<"$linked" | tr '\n' ' ')"
  [[ -z "$missing" ]] || die "$bin: libraries not found: $missing(looked in $LD_LIBRARY_PATH)"

  local tokenizer="$work/tokenizer.json"
  if unpack "$folder/tokenizer.json" "$tokenizer"; then
    echo "tokenizer: carried"
  elif [[ ! -f "$tokenizer" ]]; then
    "$py" "$helper" tokenizer "$tokenizer"
  fi

  local args=()
  # BUILD.json describes the carried binary, not a BENCH_BIN.
  [[ -n "${BENCH_BIN:-}" || ! -f "$folder/BUILD.json" ]] || args+=(--build "$folder/BUILD.json")
  [[ -z "$driver" ]] || args+=(--driver "$driver")
  # The table of what is measured so far: written after each model, so a run stopped early (a
  # device call's time limit) still leaves results.md.
  table() {
    # shellcheck disable=SC2086 # MODELS is a list of words
    "$py" "$helper" table "$out" $models "${args[@]}" >"$out/results.md"
  }

  local failed=() model dir
  for model in $models; do
    echo
    echo "== $model"
    dir="$work/$model"
    if ! "$py" "$helper" model "$model" "$dir" --tokenizer "$tokenizer"; then
      failed+=("$model: weights")
      continue
    fi
    rm -f "$out/$model.codesweep.json" "$out/$model.transformers.json" "$work/$model.codesweep-logits.json"
    local ours=(--device "$device" --dtype "$dtype" --batches "$batches" --prompt-tokens "$prompt_tokens"
      --decode-tokens "$decode_tokens" --runs "$runs" --speed-json "$out/$model.codesweep.json"
      --logits "$work/$model.codesweep-logits.json")
    [[ -z "${PREFILL_CHUNK:-}" ]] || ours+=(--prefill-chunk "$PREFILL_CHUNK")
    echo "-- codesweep"
    if ! "$bin" "$dir" "${ours[@]}" 2>&1 | tee "$work/$model.codesweep.log"; then
      failed+=("$model: codesweep (log $work/$model.codesweep.log)")
    fi
    echo "-- transformers"
    if ! "$py" "$helper" transformers "$dir" "$out/$model.codesweep.json" "$work/$model.codesweep-logits.json" \
      "$out/$model.transformers.json" --batches "$batches" --prompt-tokens "$prompt_tokens" \
      --decode-tokens "$decode_tokens" --runs "$runs" --device "$device" 2>&1 | tee "$work/$model.transformers.log"; then
      failed+=("$model: transformers (log $work/$model.transformers.log)")
    fi
    table
  done

  echo
  table
  cat "$out/results.md"
  echo
  echo "written: $out/results.md (raw: $out/*.json; logs and logits: $work)"
  if ((${#failed[@]})); then
    printf 'failed: %s\n' "${failed[@]}" >&2
    exit 1
  fi
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  *)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
