#!/usr/bin/env bash
# Fetch the tree-sitter grammar binaries the official RepoQA scorer uses
# (PyPI tree-sitter-languages 1.10.2, languages.so), checksummed and idempotent.
#
# usage: scripts/fetch-repoqa-grammars.sh [DEST_DIR]
#   DEST_DIR defaults to $CODESWEEP_GRAMMARS_DIR or ~/.cache/codesweep/grammars.
# codesweep looks for DEST_DIR/tree-sitter-languages-1.10.2/languages.so.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/wheel.sh"

dest="${1:-${CODESWEEP_GRAMMARS_DIR:-$HOME/.cache/codesweep/grammars}}/tree-sitter-languages-1.10.2"
target="$dest/languages.so"

case "$(uname -m)" in
  x86_64)  platform=manylinux2014_x86_64
           wheel_sha=9ae34ac314a7170be24998a0f994c1ac80761d8d4bd126af27ee53a023d3b849
           so_sha=859c2802113d4d65c2ab38d6aa30db98880f4b2ee71d8289690c3e1e26e368d2 ;;
  aarch64) platform=manylinux2014_aarch64
           wheel_sha=6f370cd7845c6c81df05680d5bd96db8a99d32b56f4728c5d05978911130a853
           so_sha=2d0e8ec8be4f47e675abeadf7d3ad397a847d6d394f0cd97a18145704833e5c6 ;;
  *) echo "no tree-sitter-languages 1.10.2 wheel for $(uname -m); codesweep will use its bundled grammars" >&2; exit 1 ;;
esac

if [[ -f "$target" ]] && echo "$so_sha  $target" | sha256sum -c --quiet 2>/dev/null; then
  echo "$target (already present)"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fetch_wheel_member "$work" "$wheel_sha" tree_sitter_languages/languages.so "$so_sha" \
  --platform "$platform" --python-version 3.11 tree-sitter-languages==1.10.2
mkdir -p "$dest"
mv "$work/tree_sitter_languages/languages.so" "$target.tmp" && mv "$target.tmp" "$target"
echo "$target"
