#!/usr/bin/env python3
"""repoqa_parity.py - the official RepoQA harness and codesweep on the same needles, side by side.

Two sub-commands, run by scripts/repoqa-parity.sh inside a scratch environment that has the PyPI
`repoqa==0.1.2` harness:

  harness  runs repoqa.search_needle_function.evaluate_model (unmodified) with --backend openai
           against a running `codesweep serve`. The harness sizes contexts with
           AutoTokenizer.from_pretrained("codellama/CodeLlama-7b-Instruct-hf"), which needs the
           Hugging Face hub; only that call is answered, with the tokenizer.json given (loaded by
           the real AutoTokenizer, as in repoqa_context_spans.py). Its other tokenizer look-up
           (the served model's, for a stop sequence) fails as it does offline.
  compare  reads the harness's outputs and codesweep's official-format export and prints, per
           task: the needle span and context size each side built, whether the prompts are equal,
           whether the outputs are equal, and each side's verdict; then pass@1 at 0.8 computed by
           the official compute_score on both sets of outputs, and by `codesweep score repoqa` on
           the harness's outputs. Exit status 1 when spans, prompts or scorers disagree (outputs
           may differ where decoding differs; they are counted, not failed).
"""
import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile

HUB_NAME = "codellama/CodeLlama-7b-Instruct-hf"


def run_harness(args):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from repoqa_context_spans import load_codellama

    import repoqa.provider.openai as provider
    import repoqa.search_needle_function as snf

    tokenizer = load_codellama(args.tokenizer).hf

    def from_pretrained(name, *rest, **kwargs):
        if name == HUB_NAME:
            return tokenizer
        raise OSError(f"{name}: no hub here")

    snf.AutoTokenizer.from_pretrained = staticmethod(from_pretrained)
    provider.AutoTokenizer.from_pretrained = staticmethod(from_pretrained)
    snf.evaluate_model(
        model=args.model,
        base_url=args.base_url,
        backend="openai",
        code_context_size=args.size,
        max_new_tokens=args.max_new_tokens,
        result_dir=args.result_dir,
        dataset_path=args.dataset,
        caching=False,
    )


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def task_id(row):
    return f"{row['language']}::{row['repo']}::{row['name']}"


def prompt_of(row):
    return "".join(row[key] for key in row["template"].split("\n"))


def official_scores(model, dataset, outputs):
    """pass@1 per language and threshold (keys as strings) from the official compute_score."""
    from repoqa.compute_score import compute_score

    with open(dataset) as f:
        data = json.load(f)
    # compute_score prints a progress bar and a table of its own; keep the comparison readable.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        result = compute_score(model, data, [dict(o) for o in outputs], ignore_comments=False)[model]
    return {lang: {f"{float(t):.1f}": v for t, v in by_threshold.items()} for lang, by_threshold in result["scores"].items()}


def compare(args):
    theirs = {task_id(r): r for r in read_jsonl(args.harness_outputs)}
    ours = {task_id(r): r for r in read_jsonl(args.codesweep_outputs)}
    if set(theirs) != set(ours):
        print(f"task sets differ: only official {sorted(set(theirs) - set(ours))}, only codesweep "
              f"{sorted(set(ours) - set(theirs))}")
        return 1
    failures = 0
    same_output = 0
    print(f"{'task':58} {'official span':>20} {'codesweep span':>20} prompt output")
    for tid in sorted(theirs):
        t, o = theirs[tid], ours[tid]
        span_t = (t["needle_token_start"], t["needle_token_end"], t["code_context_ntokens"])
        span_o = (o.get("needle_token_start"), o.get("needle_token_end"), o.get("code_context_ntokens"))
        prompt_equal = "template" in o and prompt_of(t) == prompt_of(o)
        output_equal = t["output"][0] == o["output"][0]
        same_output += output_equal
        failures += (span_t != span_o) + (not prompt_equal)
        print(f"{tid[:58]:58} {str(span_t):>20} {str(span_o):>20} {'equal' if prompt_equal else 'DIFF':>6} "
              f"{'equal' if output_equal else 'differs'}")

    scores_t = official_scores(args.model, args.dataset, theirs.values())
    scores_o = official_scores(args.model, args.dataset, ours.values())
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([args.codesweep, "score", "repoqa", "--dataset", args.dataset, "--outputs",
                        args.harness_outputs, "--out", out], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        with open(os.path.join(out, "scores.json")) as f:
            ours_on_theirs = json.load(f)

    def at(scores, lang, threshold="0.8"):
        return scores.get(lang, {}).get(threshold, {}).get("pass@1")

    print()
    print(f"{'pass@1 at 0.8':24} {'official harness':>18} {'codesweep run':>15} {'codesweep score on harness':>28}")
    for lang in ["all"] + sorted({r["language"] for r in theirs.values()}):
        a, b, c = at(scores_t, lang), at(scores_o, lang), at(ours_on_theirs, lang)
        scorer_agrees = a is not None and c is not None and abs(a - c) < 1e-9
        failures += not scorer_agrees
        print(f"{lang:24} {a!s:>18} {b!s:>15} {c!s:>28}{'' if scorer_agrees else '  SCORERS DISAGREE'}")
    print()
    print(f"{len(theirs)} tasks; {failures} disagreements in spans, prompts or scorers; "
          f"outputs identical on {same_output}/{len(theirs)}")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    h = sub.add_parser("harness")
    h.add_argument("--model", required=True)
    h.add_argument("--base-url", required=True)
    h.add_argument("--tokenizer", required=True)
    h.add_argument("--dataset", required=True)
    h.add_argument("--size", type=int, required=True)
    h.add_argument("--max-new-tokens", type=int, required=True)
    h.add_argument("--result-dir", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--model", required=True)
    c.add_argument("--dataset", required=True)
    c.add_argument("--harness-outputs", required=True)
    c.add_argument("--codesweep-outputs", required=True)
    c.add_argument("--codesweep", required=True)
    args = ap.parse_args()
    if args.command == "harness":
        run_harness(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
