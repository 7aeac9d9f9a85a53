#!/usr/bin/env python3
"""cceval_official_timing.py - time the OFFICIAL CrossCodeEval Python scorer
on a benchmark made by scripts/make_cceval_bench.py, in one process.

Usage:
  pip install fuzzywuzzy==0.18.0 nltk sacrebleu timeout-decorator \
      'tree-sitter==0.25.*' tree-sitter-python==0.25.0
  python3 scripts/reference/cceval_official_timing.py \
      --cceval-scripts /path/to/cceval/scripts --data .bench/cceval \
      [--limit 200] [--results ref_results.jsonl]

--cceval-scripts is the official repository's scripts/ folder (eval_utils.py,
eval_metric.py, keywords/). No official code is copied here: the official
modules are imported and, per example, eval_metric.process_examples (which
calls eval_utils.postprocess_code_lines with a tree-sitter Python parser,
remove_comments and extract_identifiers), eval_utils.cal_edit_sim and
eval_metric.compute_id_match are called as compute_metric_stmt calls them,
but sequentially instead of in a multiprocessing pool. The whole per-example
loop is timed with time.perf_counter. eval_utils imports torch only for
compute_mean_logp, so a stub torch module is installed first.
--results writes the per-example official outputs (truncated pred, target,
em, es, id_em, id_f1, ...) as JSON lines, for parity checks.
"""
import argparse
import json
import os
import sys
import time
import types


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cceval-scripts", required=True,
                    help="official cceval scripts/ folder (holds eval_utils.py)")
    ap.add_argument("--data", default=".bench/cceval",
                    help="folder with examples.jsonl and predictions.jsonl")
    ap.add_argument("--limit", type=int, default=None, help="time only the first N")
    ap.add_argument("--results", help="write per-example official results here")
    args = ap.parse_args()

    # Stub torch (and torch.multiprocessing, imported by eval_metric):
    # nothing used here touches it.
    torch = types.ModuleType("torch")
    torch.multiprocessing = types.ModuleType("torch.multiprocessing")
    sys.modules["torch"] = torch
    sys.modules["torch.multiprocessing"] = torch.multiprocessing
    sys.path.insert(0, os.path.abspath(args.cceval_scripts))
    import eval_metric  # official
    import eval_utils  # official
    import tree_sitter_python
    from tree_sitter import Language, Parser

    # The official scorer keeps the parser in eval_metric's global `parser`.
    eval_metric.parser = Parser(Language(tree_sitter_python.language()))

    # Load like compute_metric_stmt: examples by task_id, predictions in order.
    with open(os.path.join(args.data, "examples.jsonl"), encoding="utf-8") as f:
        examples = {}
        for line in f:
            ex = json.loads(line)
            examples[ex["metadata"]["task_id"]] = {
                "prompt": ex["prompt"], "groundtruth": ex["groundtruth"]}
    with open(os.path.join(args.data, "predictions.jsonl"), encoding="utf-8") as f:
        samples = [json.loads(line) for line in f]
    assert len(samples) == len(examples), f"{len(samples)} != {len(examples)}"
    samples = samples[:args.limit]
    pairs = [(s, examples[s["task_id"]]) for s in samples]

    results = []
    t0 = time.perf_counter()
    for pair in pairs:
        trunc, em = eval_metric.process_examples("python", pair)
        es = eval_utils.cal_edit_sim([trunc["target"]], [trunc["pred"]])
        tp, fp, fn = eval_metric.compute_id_match(trunc["pred_ids"], trunc["target_ids"])
        results.append(dict(
            trunc, em=em, es=es,
            id_em=int(trunc["pred_ids"] == trunc["target_ids"]),
            id_precision=tp / (tp + fp) if tp + fp else 0,
            id_recall=tp / (tp + fn) if tp + fn else 0,
            id_f1=2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else 0))
    secs = time.perf_counter() - t0

    n = len(results)
    mean = lambda k: round(sum(r[k] for r in results) / n * 100, 2)  # noqa: E731
    print(f"official metrics: EM {mean('em'):.2f}, "
          f"ES {round(sum(r['es'] for r in results) / n, 2):.2f}, "
          f"ID-EM {mean('id_em')}, ID-F1 {mean('id_f1')}")
    print(f"reference: {n} examples in {secs:.3f} s = {n / secs:.2f} examples/s")
    if args.results:
        with open(args.results, "w", encoding="utf-8") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
