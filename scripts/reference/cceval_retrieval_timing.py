#!/usr/bin/env python3
"""cceval_retrieval_timing.py - time the OFFICIAL CrossCodeEval prompt builder
(prompt_builder/augment_with_cfc.py) on the golden examples, in one process.

Usage:
  pip install rank-bm25==0.2.2 scikit-learn nltk
  python3 scripts/reference/cceval_retrieval_timing.py \
      --prompt-builder /path/to/cceval/prompt_builder \
      --examples tests/golden/cceval/python/examples.jsonl \
      --repos ~/.cache/codesweep/retrieval-sources --language python \
      --punkt ~/.cache/codesweep/punkt_tab/english [--limit 20] [--results out.jsonl]

--prompt-builder is the official repository's prompt_builder/ folder. No official
code is copied here: its modules are imported (torch and transformers, needed only
by the unused semantic reranker, are stubbed) and, as attach_data does, the
repositories are read with read_project_files, then get_cfc is called per example
with run.sh's RG-1 BM25 flags, sequentially instead of in a multiprocessing pool.
Reading the repositories and the per-example loop are timed separately with
time.perf_counter. NLTK's punkt_tab/english is copied into a private NLTK data
folder (NLTK refuses model files reached through links).
--results writes the rows (metadata + crossfile_context) for a parity check.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import types


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompt-builder", required=True, help="official cceval prompt_builder/ folder")
    ap.add_argument("--examples", required=True)
    ap.add_argument("--repos", required=True, help="folder with <language>/<repository>/")
    ap.add_argument("--language", required=True)
    ap.add_argument("--punkt", required=True, help="punkt_tab/english folder")
    ap.add_argument("--limit", type=int, default=None, help="time only the first N examples")
    ap.add_argument("--results", help="write metadata + crossfile_context rows here")
    args = ap.parse_args()

    data = tempfile.mkdtemp(prefix="nltk_data_")
    shutil.copytree(args.punkt, os.path.join(data, "tokenizers", "punkt_tab", "english"))
    os.environ["NLTK_DATA"] = data
    # The real dependencies first (scipy inspects a "torch" module if one is loaded),
    # then stubs for the semantic reranker's imports.
    import nltk
    import rank_bm25  # noqa: F401
    import sklearn.feature_extraction.text  # noqa: F401
    import sklearn.metrics.pairwise  # noqa: F401

    nltk.data.path.insert(0, data)
    for name in ("torch", "transformers"):
        stub = types.ModuleType(name)
        stub.AutoModel = stub.AutoTokenizer = stub.AutoConfig = None
        sys.modules[name] = stub
    sys.path.insert(0, os.path.abspath(args.prompt_builder))
    import augment_with_cfc as builder  # official

    builder.repository_root = os.path.abspath(os.path.expanduser(args.repos))
    flags = argparse.Namespace(
        rerank=True, ranker="sparse", ranking_fn="bm25", query_type="last_n_lines",
        crossfile_distance=100, maximum_chunk_to_rerank=1000, maximum_cross_files=1000,
        maximum_cross_file_chunk=5, use_next_chunk_as_cfc=True, skip_if_no_cfc=False,
        output_file_suffix="_rg1", language=args.language,
    )
    with open(args.examples) as f:
        examples = [json.loads(line) for line in f]
    if args.limit:
        examples = examples[: args.limit]

    start = time.perf_counter()
    repositories = {}
    for ex in examples:
        name = ex["metadata"]["repository"]
        if name not in repositories:
            repositories[name] = builder.read_project_files(name, args.language)
    read_s = time.perf_counter() - start

    rows = []
    start = time.perf_counter()
    for ex in examples:
        out, _status = builder.get_cfc(ex, flags, None, repositories)
        rows.append({"metadata": out["metadata"], "crossfile_context": out["crossfile_context"]})
    loop_s = time.perf_counter() - start
    shutil.rmtree(data, ignore_errors=True)

    if args.results:
        with open(args.results, "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    n = len(rows)
    print(f"official prompt builder ({args.language}, rg1 bm25, 1 process): {n} examples, "
          f"reading {read_s:.2f} s + retrieval {loop_s:.2f} s = {n / (read_s + loop_s):.3f} examples/s")


if __name__ == "__main__":
    main()
