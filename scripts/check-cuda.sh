#!/usr/bin/env bash
# Compile-checks the CUDA build (`--features cuda`: candle's CUDA backend through cudarc, and its
# kernels compiled by nvcc) on a machine without a GPU, using NVIDIA's CUDA compiler packages
# from PyPI. Nothing CUDA runs here; this only proves the code and kernels build.
#
#   scripts/check-cuda.sh            # cargo check of the engine and the CLI with CUDA
#
# Tools go to $CODESWEEP_CUDA_DIR (default ~/.cache/codesweep/cuda-venv).
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${CODESWEEP_CUDA_DIR:-$HOME/.cache/codesweep/cuda-venv}"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet \
  nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-runtime==13.0.96 \
  nvidia-cuda-cccl==13.0.85 nvidia-cuda-crt==13.0.88
cu="$("$venv/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')"
[[ -x "$cu/bin/nvcc" ]] || { echo "nvcc not found under $cu/bin" >&2; exit 1; }

# nvcc looks for cicc/libdevice under its own tree (nvvm/); the pip packages put them side by side.
export CUDA_ROOT="$cu" CUDA_PATH="$cu" CUDA_HOME="$cu"
export PATH="$cu/bin:$cu/nvvm/bin:$PATH"
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
export LD_LIBRARY_PATH="$cu/lib:${LD_LIBRARY_PATH:-}"
nvcc --version | tail -1

cargo check --locked -p codesweep-engine --features cuda
cargo check --locked -p codesweep --features cuda
echo "CUDA build compile-checks (compute capability $CUDA_COMPUTE_CAP)."
