#!/usr/bin/env bash
# The README's main job, the whole pipeline on real code: fetch two pinned, checksummed
# source releases from the registries (httpx 0.28.1 from PyPI, immer 11.2.10 from npm), build
# CrossCodeEval examples from them with `codesweep dataset cceval`, add the official BM25
# cross-file context with `codesweep retrieve` (NLTK's Punkt tables are fetched by the binary
# the first time), then run examples/demo.toml with `codesweep run` (coordinator + worker over
# loopback gRPC, Qwen2.5-Coder-0.5B-Instruct fetched by scripts/fetch-models.sh, results in
# runs/demo, tables printed at the end). Running it again resumes and redoes nothing.
# Needs python3 (downloads and unpacking) and cargo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
sources="${CODESWEEP_CACHE:-$HOME/.cache/codesweep}/demo-sources"
data=runs/demo-data

scripts/fetch-models.sh qwen2.5-coder-0.5b >/dev/null
cargo build --release --locked -p codesweep
codesweep="${CARGO_TARGET_DIR:-target}/release/codesweep"

# Downloads URL (checked against SHA256), unpacks it and keeps its folder ROOT as
# $sources/LANGUAGE/NAME; a folder already complete is kept.
fetch_source() { # language name url sha256 root
  local language="$1" name="$2" url="$3" sha="$4" root="$5"
  local dest="$sources/$language/$name"
  [[ -f "$dest/.codesweep-complete" ]] && return 0
  python3 - "$url" "$sha" "$root" "$dest" <<'PY'
import hashlib, os, shutil, sys, tarfile, tempfile, urllib.request
url, sha, root, dest = sys.argv[1:]
parent = os.path.dirname(dest)
os.makedirs(parent, exist_ok=True)
with tempfile.TemporaryDirectory(dir=parent) as work:
    archive = os.path.join(work, "archive")
    with urllib.request.urlopen(url, timeout=120) as response, open(archive, "wb") as out:
        shutil.copyfileobj(response, out)
    got = hashlib.sha256(open(archive, "rb").read()).hexdigest()
    if got != sha:
        sys.exit(f"{url}: sha256 {got}, not the pinned {sha}; refusing it")
    with tarfile.open(archive) as tar:
        # The "data" filter refuses links and paths out of the folder (Python >= 3.11.4).
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(os.path.join(work, "unpacked"), **safe)
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.replace(os.path.join(work, "unpacked", root), dest)
    open(os.path.join(dest, ".codesweep-complete"), "w").write(f"{url}\n{sha}\n")
print(f"fetched {url} into {dest}", file=sys.stderr)
PY
}

fetch_source python httpx-0.28.1 \
  https://files.pythonhosted.org/packages/b1/df/48c586a5fe32a0f01324ee087459e112ebb7224f646c0b5023f5e79e9956/httpx-0.28.1.tar.gz \
  75e98c5f16b0f35b567856f597f06ff2270a374470a5c2392242528e3e3e42fc httpx-0.28.1
fetch_source typescript immer-11.2.10 \
  https://registry.npmjs.org/immer/-/immer-11.2.10.tgz \
  f8184e2750790534d2faf01137b39133586ef2c14fa504ee82409568dbb0b32d package

for entry in python:httpx-0.28.1 typescript:immer-11.2.10; do
  language="${entry%%:*}" repository="${entry#*:}"
  target="$data/$language/line_completion_rg1_bm25.jsonl"
  [[ -f "$target" ]] && continue
  mkdir -p "$data/$language"
  "$codesweep" dataset cceval --language "$language" --repo "$sources/$language/$repository" \
    --out "$data/$language/examples.jsonl"
  "$codesweep" retrieve --language "$language" --retriever bm25 --next-chunk \
    --examples "$data/$language/examples.jsonl" --repos "$sources/$language" --out "$target"
done
exec "$codesweep" run examples/demo.toml "$@"
