#!/usr/bin/env bash
# Arm check on an x86 machine (not CI): `cargo check` of the whole workspace for
# aarch64-unknown-linux-gnu (cross C compilers for tree-sitter, ring and the tokenizer's C++),
# then the engine's tests on this machine with `CODESWEEP_CPU_KERNEL=candle`, the path Arm takes
# for matrix products (candle's kernels); attention's portable build is compared with the AVX2 one
# bit for bit by its own unit test. Nothing here runs Arm code.
#
#   scripts/check-aarch64.sh
#
# Installs the rust-std component for the target (rustup) and Debian's gcc-aarch64-linux-gnu and
# g++-aarch64-linux-gnu when missing (needs root for apt-get).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target=aarch64-unknown-linux-gnu
rustup target list --installed | grep -qx "$target" || rustup target add "$target"
if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v aarch64-linux-gnu-g++ >/dev/null; then
  apt-get install -y -q gcc-aarch64-linux-gnu g++-aarch64-linux-gnu >/dev/null
fi
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
cargo check --locked --target "$target" --workspace --all-targets
CODESWEEP_CPU_KERNEL=candle cargo test --locked -p codesweep-engine
echo "aarch64: the workspace checks, and the engine's tests pass on candle's kernels."
