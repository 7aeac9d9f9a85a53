#!/usr/bin/env bash
# Fetch the project sources the CrossCodeEval retrieval golden vectors were built from
# (tests/golden/retrieval/<lang>/repos.json): PyPI sdists, npm tarballs and Debian
# upstream .orig tarballs, each checked against its sha256, unpacked, and every file the
# official builder read checked against files.jsonl. Idempotent: a repository already
# unpacked and verified is skipped; a downloaded artifact with the right checksum is reused.
#
# usage: scripts/fetch-retrieval-sources.sh [DEST_DIR]
#   DEST_DIR defaults to $CODESWEEP_RETRIEVAL_SOURCES or ~/.cache/codesweep/retrieval-sources.
#   Result: DEST_DIR/<lang>/<repository>/ is the repository root (pass DEST_DIR/<lang> as --repos).
#   The golden folder is tests/golden (or $CODESWEEP_GOLDEN).
# Needs python3, pip, npm and apt-get (Debian sources are read through a private apt
# configuration derived from the system's "deb" entries; the system's apt state is not changed).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
golden="${CODESWEEP_GOLDEN:-$here/tests/golden}/retrieval"
dest="${1:-${CODESWEEP_RETRIEVAL_SOURCES:-$HOME/.cache/codesweep/retrieval-sources}}"
artifacts="$dest/.artifacts"
mkdir -p "$artifacts"

# One line per repository: lang, repository, registry, package, version, artifact, sha256, root.
manifest="$(python3 - "$golden" <<'EOF'
import json, sys
for lang in ("python", "java", "typescript", "csharp"):
    with open(f"{sys.argv[1]}/{lang}/repos.json") as f:
        for r in json.load(f)["repositories"]:
            print("\t".join([lang, r["repository"], r["registry"], r["package"], r["version"],
                             r["artifact"], r["artifact_sha256"], r["root"] or "."]))
EOF
)"

# Verify every file of files.jsonl for one repository; prints nothing on success.
verify() { # lang repository dir
  python3 - "$golden/$1/files.jsonl" "$2" "$3" <<'EOF'
import hashlib, json, os, sys
path, repo, root = sys.argv[1:]
with open(path) as f:
    entry = next((json.loads(l) for l in f if json.loads(l)["repository"] == repo), None)
if entry is None:
    sys.exit(f"{repo}: not in {path}")
bad = []
for fe in entry["files"]:
    p = os.path.join(root, fe["path"])
    try:
        with open(p, "rb") as fh:
            if hashlib.sha256(fh.read()).hexdigest() != fe["sha256"]:
                bad.append(fe["path"] + " (sha256)")
    except OSError as e:
        bad.append(f"{fe['path']} ({e.strerror})")
if bad:
    sys.exit(f"{repo}: {len(bad)} of {len(entry['files'])} files differ from files.jsonl: " + ", ".join(bad[:5]))
EOF
}

apt_ready=""
apt_opts=()
setup_apt() { # a private apt configuration with deb-src twins of the system's deb entries
  [[ -n "$apt_ready" ]] && return
  local a="$dest/.apt"
  mkdir -p "$a/sources.list.d" "$a/lists/partial" "$a/cache/archives/partial"
  : > "$a/sources.list"
  if [[ -f /etc/apt/sources.list ]]; then
    sed -n 's/^deb \(.*\)$/deb-src \1/p' /etc/apt/sources.list > "$a/sources.list"
  fi
  rm -f "$a/sources.list.d/"*
  for s in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$s" ]] && sed 's/^Types: deb$/Types: deb-src/' "$s" > "$a/sources.list.d/$(basename "$s")"
  done
  apt_opts=(-o "Dir::Etc::SourceList=$a/sources.list" -o "Dir::Etc::SourceParts=$a/sources.list.d"
            -o "Dir::State::Lists=$a/lists" -o "Dir::Cache=$a/cache" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")
  apt-get "${apt_opts[@]}" -qq update
  apt_ready=1
}

download() { # registry package version artifact -> $artifacts/artifact
  local work; work="$(mktemp -d)"
  case "$1" in
    pypi) python3 -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation \
            "$2==$3" -d "$work" 2>/dev/null \
          || python3 -m pip download --quiet --no-deps --no-binary :all: "$2==$3" -d "$work" ;;
    npm)  (cd "$work" && npm pack --silent "$2@$3" >/dev/null) ;;
    # Only the upstream .orig tarball is used; the Debian part of a source package may be
    # missing from the archive (apt then fails after fetching the .orig), so judge by the file.
    debian) setup_apt; (cd "$work" && apt-get "${apt_opts[@]}" -qq source --download-only "$2=$3" >/dev/null 2>&1) || true ;;
    *) echo "unknown registry $1" >&2; rm -rf "$work"; return 1 ;;
  esac
  if [[ ! -f "$work/$4" ]]; then
    echo "$2 $3: expected $4, got: $(ls "$work")" >&2; rm -rf "$work"; return 1
  fi
  mv "$work/$4" "$artifacts/$4.tmp" && mv "$artifacts/$4.tmp" "$artifacts/$4"
  rm -rf "$work"
}

count=0
while IFS=$'\t' read -r lang repo registry package version artifact sha root; do
  target="$dest/$lang/$repo"
  stamp="$artifacts/$lang-$repo.verified"
  if [[ -d "$target" && -f "$stamp" && "$(cat "$stamp")" == "$sha" ]]; then
    count=$((count + 1)); continue
  fi
  if [[ ! -f "$artifacts/$artifact" ]] || ! echo "$sha  $artifacts/$artifact" | sha256sum -c --quiet 2>/dev/null; then
    download "$registry" "$package" "$version" "$artifact"
  fi
  if ! echo "$sha  $artifacts/$artifact" | sha256sum -c --quiet; then
    echo "checksum mismatch for $artifact; refusing to use it" >&2; exit 1
  fi
  work="$(mktemp -d "$dest/.unpack.XXXXXX")"
  tar -xf "$artifacts/$artifact" -C "$work"
  verify "$lang" "$repo" "$work/$root"
  rm -rf "$target"; mkdir -p "$dest/$lang"
  if [[ "$root" == "." ]]; then mv "$work" "$target"; else mv "$work/$root" "$target"; rm -rf "$work"; fi
  echo "$sha" > "$stamp"
  echo "$lang/$repo"
  count=$((count + 1))
done <<< "$manifest"
echo "$count repositories verified under $dest"
