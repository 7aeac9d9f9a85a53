#!/usr/bin/env bash
# Builds the llama.cpp that the llama-cpp-python sdist vendors, as the reference that
# scripts/bench-engine.sh measures our engine against (speed, greedy completions, tokenizer).
# Idempotent and checksummed: the sdist is pinned by version and sha256; a finished build
# (marked by a stamp file) is kept. CPU only, -march=native, no curl, Release.
#
#   scripts/build-llamacpp.sh        # prints the bin directory holding the tools
#
# Tools built: llama-bench, llama-batched-bench, llama-simple, llama-tokenize, and llama-logits
# (scripts/reference/llama_logits.cpp, linked against the same libraries: next-token logits along
# a token path, for the `logits` part of scripts/bench-engine.sh).
# Output: $CODESWEEP_LLAMACPP_DIR, default ~/.cache/codesweep/llama.cpp/<llama-cpp-python version>/bin.
# LLAMACPP_ISA=avx2 builds, beside it (bin-avx2), llama.cpp's AVX2+FMA+F16C path with every
# AVX-512 and VNNI kernel off, which is what it runs on an AVX2-only CPU (AMD EPYC before Zen 4,
# older Xeons): with CODESWEEP_CPU_KERNEL=avx2 the two engines can be compared on that path on any
# x86 machine.
# Needs a C++ compiler; installs cmake (a pinned PyPI wheel) into the cache when none is on PATH.
set -euo pipefail

version=0.3.16
sdist_sha=34ed0f9bd9431af045bb63d9324ae620ad0536653740e9bb163a2e1fcb973be6
cmake_wheel_version=3.31.6
tools=(llama-bench llama-batched-bench llama-simple llama-tokenize)

root="${CODESWEEP_LLAMACPP_DIR:-$HOME/.cache/codesweep/llama.cpp/$version}"
isa="${LLAMACPP_ISA:-native}"
case "$isa" in
  native) suffix=""; isa_flags=(-DGGML_NATIVE=ON) ;;
  avx2) suffix="-avx2"; isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
        -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF
        -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) ;;
  *) echo "LLAMACPP_ISA must be native or avx2, not '$isa'" >&2; exit 2 ;;
esac
stamp="$root/bin$suffix/.built-$sdist_sha"
build="$root/build$suffix"
logits_src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/reference/llama_logits.cpp"

# llama-logits, rebuilt when its source changes (stamped by the source's checksum).
build_logits_tool() {
  local sum
  sum="$(sha256sum "$logits_src" | cut -c1-16)"
  [[ -f "$root/bin$suffix/.llama-logits-$sum" ]] && return 0
  local libs=("$build/src/libllama.a" "$build/ggml/src/libggml.a" "$build/ggml/src/libggml-cpu.a" "$build/ggml/src/libggml-base.a")
  local openmp=()
  grep -q '^GGML_OPENMP_ENABLED:INTERNAL=ON' "$build/CMakeCache.txt" && openmp=(-fopenmp)
  nice -n 10 "${CXX:-c++}" -O2 -std=c++17 "$logits_src" -I "$src/include" -I "$src/ggml/include" "${libs[@]}" \
    "${openmp[@]}" -lpthread -ldl -o "$root/bin$suffix/llama-logits" >&2
  rm -f "$root/bin$suffix"/.llama-logits-*
  touch "$root/bin$suffix/.llama-logits-$sum"
}

src="$root/src"
if [[ -f "$stamp" ]]; then
  build_logits_tool
  echo "$root/bin$suffix"
  exit 0
fi
mkdir -p "$root"

# The sdist: only this package from source (its build requirements may come as wheels; pip
# prepares metadata, which needs them).
sdist="$root/llama_cpp_python-$version.tar.gz"
if [[ ! -f "$sdist" ]] || ! echo "$sdist_sha  $sdist" | sha256sum --check --status; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python "llama-cpp-python==$version" -d "$work" >&2
  if ! echo "$sdist_sha  $work/llama_cpp_python-$version.tar.gz" | sha256sum --check --status; then
    echo "checksum mismatch for llama-cpp-python $version sdist; refusing to use it" >&2
    exit 1
  fi
  mv "$work/llama_cpp_python-$version.tar.gz" "$sdist"
fi

if [[ ! -f "$src/CMakeLists.txt" ]]; then
  rm -rf "$src" "$root/unpack"
  mkdir -p "$root/unpack"
  tar -xzf "$sdist" -C "$root/unpack" "llama_cpp_python-$version/vendor/llama.cpp"
  mv "$root/unpack/llama_cpp_python-$version/vendor/llama.cpp" "$src"
  rm -rf "$root/unpack"
fi

cmake_bin="$(command -v cmake || true)"
if [[ -z "$cmake_bin" ]]; then
  if [[ ! -x "$root/tools/bin/cmake" ]]; then
    python3 -m pip install --quiet --only-binary :all: --target "$root/tools/py" "cmake==$cmake_wheel_version" >&2
    mkdir -p "$root/tools/bin"
    ln -sf "$root/tools/py/cmake/data/bin/cmake" "$root/tools/bin/cmake"
  fi
  cmake_bin="$root/tools/bin/cmake"
fi

nice -n 10 "$cmake_bin" -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  "${isa_flags[@]}" -DLLAMA_CURL=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_CCACHE=OFF >&2
nice -n 10 "$cmake_bin" --build "$build" --config Release -j2 --target "${tools[@]}" >&2
mkdir -p "$root/bin$suffix"
for t in "${tools[@]}"; do
  cp "$build/bin/$t" "$root/bin$suffix/$t"
done
build_logits_tool
touch "$stamp"
echo "$root/bin$suffix"
