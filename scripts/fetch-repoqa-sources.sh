#!/usr/bin/env bash
# Fetches one real repository per RepoQA language, as published packages pinned by version and
# sha256, and unpacks each into DIR/<language>/<name>:
#
#   python      click 8.1.7        PyPI sdist            (pip download --no-binary)
#   cpp         leveldb 1.23       Debian source package (orig tarball of leveldb_1.23-4)
#   java        commons-csv 1.9.0  Debian source package (orig tarball of commons-csv_1.9.0-1)
#   typescript  immer 10.1.1       npm tarball
#   rust        semver 1.0.23      crates.io crate
#
#   scripts/fetch-repoqa-sources.sh [DIR]
#
# DIR: default $CODESWEEP_REPOQA_SOURCES, else ~/.cache/codesweep/repoqa-sources. Idempotent:
# archives present with the right checksum are not fetched again, and unpacked folders are
# kept. Prints DIR.
set -euo pipefail

dest="${1:-${CODESWEEP_REPOQA_SOURCES:-$HOME/.cache/codesweep/repoqa-sources}}"
mkdir -p "$dest/archives"

# language name version archive sha256 how url-or-spec
catalog() {
  cat <<'EOF'
python click 8.1.7 click-8.1.7.tar.gz ca9853ad459e787e2192211578cc907e7594e294c7ccc834310722b41b9ca6de pip click==8.1.7
cpp leveldb 1.23 leveldb_1.23.orig.tar.gz 9a37f8a6174f09bd622bc723b55881dc541cd50747cbd08831c2a82d620f6d76 url http://deb.debian.org/debian/pool/main/l/leveldb/leveldb_1.23.orig.tar.gz
java commons-csv 1.9.0 commons-csv_1.9.0.orig.tar.xz 661252998cf2b9aac1aa12fe9e104dc23190761a8971384f83a6c1fc02536867 url http://deb.debian.org/debian/pool/main/c/commons-csv/commons-csv_1.9.0.orig.tar.xz
typescript immer 10.1.1 immer-10.1.1.tgz 946cc79684ad1e080b09d4f2da14247b272aa667f3aaa100f35846148689f08f url https://registry.npmjs.org/immer/-/immer-10.1.1.tgz
rust semver 1.0.23 semver-1.0.23.crate 61697e0a1c7e512e84a621326239844a24d8207b4669b41bc18b32ea5cbf988b url https://static.crates.io/crates/semver/semver-1.0.23.crate
EOF
}

verified() { # archive sha256
  [[ -f "$dest/archives/$1" ]] && echo "$2  $dest/archives/$1" | sha256sum --check --status
}

while read -r language name version archive sha how source; do
  if ! verified "$archive" "$sha"; then
    rm -f "$dest/archives/$archive"
    tmp="$(mktemp -d)"
    case "$how" in
      pip) python3 -m pip download --quiet --no-deps --no-binary=:all: "$source" -d "$tmp" >&2 ;;
      url) curl --fail --silent --show-error --location --max-time 300 -o "$tmp/$archive" "$source" ;;
    esac
    mv "$tmp/$archive" "$dest/archives/$archive"
    rm -rf "$tmp"
    if ! verified "$archive" "$sha"; then
      echo "checksum mismatch for $archive; refusing to use it" >&2
      exit 1
    fi
  fi
  target="$dest/$language/$name"
  if [[ ! -d "$target" ]]; then
    tmp="$(mktemp -d "$dest/.unpack.XXXXXX")"
    # Every archive has one top-level folder; its contents become the target.
    tar -xf "$dest/archives/$archive" -C "$tmp" --strip-components=1
    mkdir -p "$dest/$language"
    mv "$tmp" "$target"
  fi
  echo "$language $name $version -> $target" >&2
done < <(catalog)
echo "$dest"
