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
  logits BIN OTHER_BIN MODEL.gguf OURS.jsonl TRACE OUT_DIR
                          the noise floor of greedy agreement: for each prompt of OURS.jsonl, llama.cpp's
                          greedy path (BIN/llama-logits), then llama.cpp's build for the other ISA
                          (OTHER_BIN, or `-` for none) and our engine (TRACE, the trace_logits example) fed the same path:
                          how far each one's first-step logits lie from llama.cpp's, where each first
                          picks another token than llama.cpp did, and llama.cpp's own margin between its
                          top two tokens there
"""
import array
import math
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


TRACE_STEPS = 48


def trace(command):
    """{"n_prompt", "steps": [[argmax, logit, runner-up, logit], ...]} from llama-logits or trace_logits."""
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(command[:3])}...: {run.stderr.strip()}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def read_f32(path):
    values = array.array("f")
    values.frombytes(Path(path).read_bytes())
    return values


def distance(a, b):
    """(max |a - b|, root mean square of a - b) over two logit vectors."""
    if len(a) != len(b):
        raise SystemExit(f"logit vectors of {len(a)} and {len(b)} entries: not the same vocabulary")
    diffs = [x - y for x, y in zip(a, b)]
    return max(abs(d) for d in diffs), math.sqrt(sum(d * d for d in diffs) / len(diffs))


def first_departure(reference, other):
    """(step, reference's top-two margin there, other's) where other's argmax first differs, or None."""
    for step, (r, o) in enumerate(zip(reference["steps"], other["steps"])):
        if r[0] != o[0]:
            return step, r[1] - r[3], o[1] - o[3]
    return None


def logits(bin_dir, other_bin, model, ours_path, trace_bin, out_dir):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in Path(ours_path).read_text().splitlines() if line.strip()]
    commands = {"our engine": [trace_bin]}
    if other_bin != "-":
        commands[f"llama.cpp {Path(other_bin).name}"] = [f"{other_bin}/llama-logits"]
    found = {name: {"distance": [], "departures": []} for name in commands}
    for n, row in enumerate(rows):
        prompt = out / f"prompt-{n}.txt"
        prompt.write_text(row["prompt"])
        native = trace([f"{bin_dir}/llama-logits", model, str(prompt), str(TRACE_STEPS), "-", str(out / "native.f32")])
        path = ",".join(str(s[0]) for s in native["steps"][:-1]) or "-"
        for name, program in commands.items():
            other = trace(program + [model, str(prompt), str(TRACE_STEPS), path, str(out / "other.f32")])
            if other["n_prompt"] != native["n_prompt"]:
                raise SystemExit(f"{row['id']}: {name} encodes the prompt to {other['n_prompt']} tokens, llama.cpp to {native['n_prompt']}")
            found[name]["distance"].append(distance(read_f32(out / "other.f32"), read_f32(out / "native.f32")))
            departure = first_departure(native, other)
            if departure:
                found[name]["departures"].append((row["id"], *departure))
    print(f"against llama.cpp {Path(bin_dir).name}, {len(rows)} prompts, greedy paths of {TRACE_STEPS} tokens:")
    for name, f in found.items():
        worst = statistics.median(d[0] for d in f["distance"])
        rms = statistics.median(d[1] for d in f["distance"])
        print(f"  {name}: first-step logits max|diff| median {worst:.3f}, rms median {rms:.4f}; "
              f"same {TRACE_STEPS}-token path {len(rows) - len(f['departures'])}/{len(rows)}")
        if f["departures"]:
            margins = [d[2] for d in f["departures"]]
            print(f"    llama.cpp's top-two margin where {name} leaves its path: median {statistics.median(margins):.4f}, "
                  f"largest {max(margins):.4f}")
        for id_, step, margin, theirs in f["departures"]:
            print(f"    {id_:<14} leaves at token {step}: llama.cpp's top-two margin {margin:.4f}, {name}'s {theirs:.4f}")


def main(argv):
    if len(argv) >= 3 and argv[1] == "speed":
        speed(argv[2], argv[3:])
    elif len(argv) == 6 and argv[1] == "greedy":
        greedy(*argv[2:])
    elif len(argv) == 8 and argv[1] == "logits":
        logits(*argv[2:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
