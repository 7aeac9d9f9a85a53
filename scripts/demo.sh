#!/usr/bin/env bash
# The README's main job: fetch the demo model (checksummed, cached), lay out the golden
# CrossCodeEval examples with their official BM25 cross-file context in the official data layout,
# and run examples/demo.toml with `codesweep run` (coordinator + worker over loopback gRPC,
# results in runs/demo, tables printed at the end). Running it again resumes and redoes nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
golden="${CODESWEEP_GOLDEN:-tests/golden}"
scripts/fetch-models.sh qwen2.5-coder-0.5b >/dev/null
for language in python java; do
  mkdir -p "runs/demo-data/$language"
  python3 - "$golden" "$language" "runs/demo-data/$language/line_completion_rg1_bm25.jsonl" <<'PY'
import json, sys
golden, language, out = sys.argv[1:]
with open(f"{golden}/cceval/{language}/examples.jsonl") as examples, \
     open(f"{golden}/retrieval/{language}/line_completion_rg1_bm25.jsonl") as contexts, \
     open(out + ".tmp", "w") as target:
    for example, context in zip(examples, contexts):
        record, context = json.loads(example), json.loads(context)
        assert record["metadata"]["task_id"] == context["metadata"]["task_id"]
        record["crossfile_context"] = context["crossfile_context"]
        target.write(json.dumps(record) + "\n")
import os; os.replace(out + ".tmp", out)
PY
done
exec cargo run --release --locked -p codesweep -- run examples/demo.toml "$@"
