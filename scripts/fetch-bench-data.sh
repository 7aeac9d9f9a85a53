#!/usr/bin/env bash
# fetch-bench-data.sh — download pinned PyPI sdists of pure-Python projects
# (real code for the CCEval scorer benchmark), verify their sha256 and
# extract them.
#
# Usage:
#   scripts/fetch-bench-data.sh            # into ./.bench (repo root)
#   CODESWEEP_BENCH_DIR=/some/dir scripts/fetch-bench-data.sh
#
# Layout:
#   $BENCH/dl/<pkg>-<ver>.tar.gz     verified sdists
#   $BENCH/src/<pkg>-<ver>/          extracted source trees
#
# Idempotent: a verified tarball is not downloaded again and an extracted
# tree (marked by .extracted) is not extracted again. A checksum mismatch
# aborts with exit status 1. A relative CODESWEEP_BENCH_DIR is taken
# relative to the repository root. Needs: bash, pip, sha256sum, tar.
# The downloads never belong in git (.bench/ is git-ignored).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BENCH="${CODESWEEP_BENCH_DIR:-.bench}"
DL="$BENCH/dl"
SRC="$BENCH/src"
mkdir -p "$DL" "$SRC"

# name==version  sdist-file  sha256 (computed once from the PyPI sdists)
PINS=(
  "requests==2.32.3  requests-2.32.3.tar.gz  55365417734eb18255590a9ff9eb97e9e1da868d4ccd6402399eaf68af20a760"
  "rich==13.9.4      rich-13.9.4.tar.gz      439594978a49a09530cff7ebc4b5c7103ef57baf48d5ea3184f21d9a2befa098"
  "attrs==24.2.0     attrs-24.2.0.tar.gz     5cfb1b9148b5b086569baec03f20d7b6bf3bcacc9a42bebf87ffaaca362f6346"
  "pygments==2.18.0  pygments-2.18.0.tar.gz  786ff802f32e91311bff3889f6e9a86e81505fe99f2735bb6d60ae0c5004f199"
  "sqlparse==0.5.1   sqlparse-0.5.1.tar.gz   bb6b4df465655ef332548e24f08e205afc81b9ab86cb1c45657a7ff173a3a00e"
  "docutils==0.21.2  docutils-0.21.2.tar.gz  3a6b18732edf182daa3cd12775bbb338cf5691468f91eeeb109deff6ebfa986f"
)

sha_ok() { # file expected-sha256
  [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

for pin in "${PINS[@]}"; do
  read -r spec file sha <<<"$pin"
  tarball="$DL/$file"
  dest="$SRC/${file%.tar.gz}"

  # 1. download (only when no verified tarball is present)
  if [ -f "$tarball" ] && sha_ok "$tarball" "$sha"; then
    echo "ok       $file (cached)" >&2
  else
    echo "download $spec" >&2
    tmp="$(mktemp -d "$BENCH/.dl.XXXXXX")"
    # pip is the ordinary PyPI client; --no-binary :all: gets the sdist.
    if ! pip download --quiet --no-deps --no-binary :all: "$spec" -d "$tmp" >&2; then
      rm -rf "$tmp"; echo "ERROR: pip download $spec failed" >&2; exit 1
    fi
    if [ ! -f "$tmp/$file" ]; then
      rm -rf "$tmp"; echo "ERROR: pip download $spec did not produce $file" >&2; exit 1
    fi
    got="$(sha256sum "$tmp/$file" | cut -d' ' -f1)"
    if [ "$got" != "$sha" ]; then
      echo "ERROR: sha256 mismatch for $file" >&2
      echo "  expected $sha" >&2
      echo "  got      $got" >&2
      rm -rf "$tmp"; exit 1
    fi
    mv -f "$tmp/$file" "$tarball"
    rm -rf "$tmp"
  fi

  # 2. extract (only when not yet done; the marker is written last)
  if [ -f "$dest/.extracted" ]; then
    echo "ok       $dest (extracted)" >&2
  else
    echo "extract  $file -> $dest" >&2
    rm -rf "$dest"; mkdir -p "$dest"
    tar -xzf "$tarball" -C "$dest" --strip-components=1 --no-same-owner
    echo "$sha" >"$dest/.extracted"
  fi
done
echo "bench sources ready in $SRC" >&2
