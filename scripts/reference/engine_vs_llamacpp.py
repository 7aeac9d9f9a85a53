#!/usr/bin/env python3
"""engine_vs_llamacpp.py - the reporting half of scripts/bench-engine.sh (stdlib only).

  speed DIR MODEL...      median prefill/decode tokens/s of our engine (bench_generate output
                          DIR/MODEL.ours.N.txt) and llama.cpp (llama-batched-bench jsonl
                          DIR/MODEL.llama.N.txt) per batch size, with the ratio ours/llama.cpp
  greedy BIN MODEL.gguf OURS.jsonl OUT.jsonl
                          runs llama-simple (greedy) on each prompt of OURS.jsonl (written by
                          bench_generate --completions) with the same max tokens, cuts both at the
                          first newline (our stop string), prints them side by side and counts
                          identical ones
"""
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

OURS_LINE = re.compile(r"batch (\d+): prefill ([\d.]+) tok/s .*decode ([\d.]+) tok/s")


def ours_figures(path):
    """{batch: (prefill, decode)} from one bench_generate output file."""
    found = {}
    for line in Path(path).read_text().splitlines():
        m = OURS_LINE.search(line)
        if m:
            found[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    if not found:
        raise SystemExit(f"{path}: no 'batch N: prefill ... decode ...' line")
    return found


def llama_figures(path):
    """{batch: (prefill, decode)} from one llama-batched-bench --output-format jsonl run."""
    found = {}
    for line in Path(path).read_text().splitlines():
        if line.startswith("{") and "speed_pp" in line:
            row = json.loads(line)
            found[int(row["pl"])] = (float(row["speed_pp"]), float(row["speed_tg"]))
    if not found:
        raise SystemExit(f"{path}: no llama-batched-bench jsonl row")
    return found


def speed(out_dir, models):
    out_dir = Path(out_dir)
    print("| model | batch | prefill ours | prefill llama.cpp | ratio | decode ours | decode llama.cpp | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for model in models:
        ours = [ours_figures(p) for p in sorted(out_dir.glob(f"{model}.ours.*.txt"))]
        llama = [llama_figures(p) for p in sorted(out_dir.glob(f"{model}.llama.*.txt"))]
        if not ours or not llama:
            raise SystemExit(f"{out_dir}: missing runs for {model}")
        for batch in sorted(ours[0]):
            med = lambda runs, k: statistics.median(r[batch][k] for r in runs)  # noqa: E731
            po, pl, do, dl = med(ours, 0), med(llama, 0), med(ours, 1), med(llama, 1)
            print(f"| {model} | {batch} | {po:.1f} | {pl:.1f} | {po / pl:.2f}x | {do:.1f} | {dl:.1f} | {do / dl:.2f}x |")
    print(f"(tokens/s, medians of {len(ours)} interleaved runs each; 512-token prompts, 32-33 decoded tokens)")


def first_line(text):
    return text.split("\n", 1)[0]


def greedy(bin_dir, model, ours_path, out_path):
    rows = [json.loads(line) for line in Path(ours_path).read_text().splitlines() if line.strip()]
    same = 0
    with open(out_path, "w") as out:
        for row in rows:
            prompt = row["prompt"]
            run = subprocess.run(
                [f"{bin_dir}/llama-simple", "-m", model, "-n", str(row["max_new_tokens"]), prompt],
                capture_output=True, check=True,
            )
            # llama-simple echoes the prompt's pieces, BOS included (Gemma's `<bos>`).
            stdout = run.stdout.removeprefix(b"<bos>")
            head = prompt.encode()
            if not stdout.startswith(head):
                raise SystemExit(f"{row['id']}: llama-simple did not echo the prompt back (tokenization differs?)")
            theirs = first_line(stdout[len(head):].decode("utf-8", errors="replace").removesuffix("\n"))
            ours = first_line(row["completion"])
            same += ours == theirs
            out.write(json.dumps({"id": row["id"], "ours": ours, "llama_cpp": theirs}) + "\n")
            mark = "==" if ours == theirs else "!="
            print(f"{row['id']:<14} {mark} ours:  {json.dumps(ours)}")
            print(f"{'':<14}    llama: {json.dumps(theirs)}")
    print(f"greedy completions identical (cut at the first newline): {same}/{len(rows)}")


def main(argv):
    if len(argv) >= 3 and argv[1] == "speed":
        speed(argv[2], argv[3:])
    elif len(argv) == 6 and argv[1] == "greedy":
        greedy(*argv[2:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
