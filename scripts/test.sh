#!/usr/bin/env bash
# The test suite, as CI runs it: fetch the official RepoQA grammars (checksummed,
# idempotent), then every test of the workspace, golden vectors included
# (they read ../shared/golden, or $CODESWEEP_GOLDEN).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/fetch-repoqa-grammars.sh
cargo test --workspace --locked
