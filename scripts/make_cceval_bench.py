#!/usr/bin/env python3
"""make_cceval_bench.py - build a CrossCodeEval (CCEval) line-completion
benchmark from real Python sources (standard library only).

Usage:
  scripts/fetch-bench-data.sh
  python3 scripts/make_cceval_bench.py --src .bench/src --n 3000 --seed 0 \
      --out .bench/cceval

--src holds one folder per project (<pkg>-<ver>/, as fetch-bench-data.sh
extracts them). Writes, one JSON object per line, in the official format:
  OUT/examples.jsonl     {"prompt", "groundtruth", "right_context",
                          "metadata": {...}, "crossfile_context": {...}}
  OUT/predictions.jsonl  {"task_id", "pred"}   (same order)
prompt + groundtruth + right_context is the whole file text (checked for
every record). Cursor lines are code lines with a `.` or `(` token; the
cursor sits at a random token boundary after the indentation, and the
groundtruth is the rest of that line. Predictions mix model-output kinds
(see KINDS). All choices come from random.Random(seed), and files are
visited in sorted order, so the output is a pure function of (src, n, seed).
Counts go to stderr.
"""
import argparse
import io
import json
import keyword
import os
import random
import re
import sys
import tokenize

MAX_LINES = 1500
# Prediction kinds and their shares of the n predictions.
KINDS = [
    ("exact", 0.20),       # the groundtruth itself
    ("next_lines", 0.35),  # groundtruth + the real next 1-4 lines
    ("rename", 0.15),      # one identifier renamed
    ("comment", 0.10),     # trailing "# comment"
    ("other_line", 0.10),  # a different line of the same file
    ("empty", 0.05),       # ""
    ("garbage", 0.05),     # 200-600 chars of code-like text with newlines
]
SKIP_TYPES = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
              tokenize.ENDMARKER, tokenize.COMMENT}
IDENT = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
COMMENTS = ["TODO: check this", "noqa", "type: ignore", "fix later",
            "pragma: no cover", "see above", "XXX", "keep in sync", "py3 only"]


def tokens(text):
    """Tokens of text as (type, start, end, string); an f-string (split into
    FSTRING_* parts since Python 3.12) is merged into one STRING token so the
    output does not depend on the Python version."""
    out, depth, fstart = [], 0, None
    for t in tokenize.generate_tokens(io.StringIO(text).readline):
        name = tokenize.tok_name[t.type]
        if name == "FSTRING_START":
            depth += 1
            fstart = t.start if depth == 1 else fstart
        elif name == "FSTRING_END":
            depth -= 1
            if depth == 0:
                out.append((tokenize.STRING, fstart, t.end, ""))
        elif depth == 0:
            out.append((t.type, t.start, t.end, t.string))
    return out


def candidates(text, lines):
    """[(line_index, [cursor columns])] for the usable cursor lines."""
    first, cols, member = {}, {}, set()
    for typ, (sr, sc), (er, ec), s in tokens(text):
        if typ in SKIP_TYPES:
            continue
        first.setdefault(sr - 1, (typ, sc))
        cols.setdefault(sr - 1, set()).add(sc)
        if er == sr:
            cols[sr - 1].add(ec)
        if typ == tokenize.OP and s in (".", "("):
            member.add(sr - 1)
    out = []
    for i in sorted(member):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        typ, sc = first[i]
        # The line must start with a code token (not a string/docstring
        # and not the tail of a multi-line string).
        if sc != indent or typ not in (tokenize.NAME, tokenize.OP, tokenize.NUMBER):
            continue
        ok = sorted(c for c in cols[i] if c >= indent and line[c:].strip()
                    and not line[c:].lstrip().startswith("#"))
        if ok:
            out.append((i, ok))
    return out


def load(src):
    """Yield (repo, relpath, text, lines, cands) for usable files; count skips."""
    stats = {"py_files": 0, "skip_long": 0, "skip_utf8": 0, "skip_cr": 0,
             "skip_tokenize": 0, "no_candidates": 0}
    for repo in sorted(os.listdir(src)):
        root = os.path.join(src, repo)
        if not os.path.isdir(root):
            continue
        paths = []
        for d, _, files in os.walk(root):
            paths += [os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
                      for f in files if f.endswith(".py")]
        for rel in sorted(paths):
            stats["py_files"] += 1
            with open(os.path.join(root, rel), "rb") as f:
                data = f.read()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                stats["skip_utf8"] += 1
                continue
            if "\r" in text:  # keep line splitting unambiguous
                stats["skip_cr"] += 1
                continue
            lines = text.split("\n")
            if len(lines) > MAX_LINES:
                stats["skip_long"] += 1
                continue
            try:
                cands = candidates(text, lines)
            except (tokenize.TokenError, SyntaxError, IndentationError):
                stats["skip_tokenize"] += 1
                continue
            if not cands:
                stats["no_candidates"] += 1
                continue
            yield repo, rel, text, lines, cands
    print("files: " + ", ".join(f"{k}={v}" for k, v in stats.items()), file=sys.stderr)


def pick(files, n, cap, rng):
    """Round-robin over shuffled files, one random cursor line per file per
    round (at most cap per file), so examples spread over many files."""
    order = list(range(len(files)))
    rng.shuffle(order)
    pools = {fi: rng.sample(files[fi][4], len(files[fi][4])) for fi in order}
    chosen = []
    for _ in range(cap):
        for fi in order:
            if len(chosen) < n and pools[fi]:
                chosen.append((fi, pools[fi].pop()))
    if len(chosen) < n:
        sys.exit(f"error: only {len(chosen)} cursor lines available, --n {n} asked")
    return sorted(chosen, key=lambda c: (c[0], c[1][0]))


def rename(gt, rng):
    names = sorted({m.group() for m in IDENT.finditer(gt)} - set(keyword.kwlist))
    if not names:
        return None
    name = rng.choice(names)
    muts = [name + "_", name + "s", "new_" + name, name + "2"]
    if len(name) > 2:
        muts += [name[:-1], name[1] + name[0] + name[2:]]
    if "_" in name.strip("_"):
        parts = name.split("_")
        muts.append(parts[0] + "".join(p.capitalize() for p in parts[1:]))
    new = rng.choice([m for m in muts if m != name and not keyword.iskeyword(m)])
    return re.sub(r"\b%s\b" % re.escape(name), lambda _: new, gt)


def garbage(vocab, rng):
    n = rng.randint(200, 600)
    w = lambda: rng.choice(vocab)  # noqa: E731
    forms = [lambda: f"{w()} = {w()}.{w()}({w()}, {rng.randint(0, 99)})",
             lambda: f"if {w()} {rng.choice(['==', '<', 'is not', 'in'])} {w()}:",
             lambda: f"return {w()}[{rng.randint(0, 9)}]",
             lambda: f"for {w()} in {w()}({w()}):",
             lambda: f"{w()}.{w()} += {rng.randint(1, 9)}",
             lambda: f"{w()}({w()}=[{w()}, {w()}], **{w()})"]
    out = ""
    while len(out) < n:
        out += " " * rng.choice([0, 4, 8]) + rng.choice(forms)() + "\n"
    return out[:n]


def make_pred(kind, gt, lines, i, rng, vocab, stats):
    """Prediction text for one example; may fall back to another kind."""
    line = lines[i]
    if kind == "next_lines":
        nxt = lines[i + 1:i + 1 + rng.randint(1, 4)]
        depth = sum(gt.count(c) for c in "([{") - sum(gt.count(c) for c in ")]}")
        p = gt.find("(")
        if depth > 0:  # the real statement continues on the next lines
            kind = "next_lines_multiline"
        elif p >= 0 and gt[p + 1:].strip() not in ("", ")") and rng.random() < 0.35:
            # re-wrap: break after the opening bracket, continue indented
            indent = line[:len(line) - len(line.lstrip())]
            gt = gt[:p + 1] + "\n" + indent + "    " + gt[p + 1:].lstrip()
            kind = "next_lines_split"
        pred = "\n".join([gt] + nxt)
    elif kind == "rename":
        pred = rename(gt, rng)
    elif kind == "comment":
        pred = gt + rng.choice(["  # ", " # "]) + rng.choice(COMMENTS)
    elif kind == "other_line":
        others = [j for j, l in enumerate(lines) if j != i and l.strip()
                  and not l.lstrip().startswith("#") and l.strip() != gt.strip()]
        pred = lines[rng.choice(others)].lstrip() if others else None
    elif kind == "empty":
        pred = ""
    elif kind == "garbage":
        pred = garbage(vocab, rng)
    else:
        pred = gt
    if pred is None:  # no identifier / no other line: fall back to exact
        kind, pred = "exact", gt
    stats[kind] = stats.get(kind, 0) + 1
    return pred


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", required=True, help="folder of extracted projects")
    ap.add_argument("--n", type=int, default=3000, help="number of examples")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cap", type=int, default=10, help="max examples per file")
    ap.add_argument("--out", required=True, help="output folder")
    args = ap.parse_args()
    rng = random.Random(args.seed)

    files = list(load(args.src))
    print(f"usable files: {len(files)}, cursor lines: "
          f"{sum(len(f[4]) for f in files)}", file=sys.stderr)
    chosen = pick(files, args.n, args.cap, rng)

    # Cut each file at a random token boundary of its cursor line.
    cuts = []
    for fi, (i, cols) in chosen:
        text, lines = files[fi][2], files[fi][3]
        start = sum(len(l) + 1 for l in lines[:i])  # offset of line i
        end = start + len(lines[i])                  # offset of its "\n"
        col = start + rng.choice(cols)
        cuts.append((fi, i, text[:col], text[col:end], text[end:]))

    # Exact kind quotas (largest remainder), shuffled over the examples;
    # "rename" slots are then swapped onto groundtruths with an identifier.
    quota = [int(args.n * w) for _, w in KINDS]
    rest = sorted(range(len(KINDS)), key=lambda k: -(args.n * KINDS[k][1] - quota[k]))
    for k in rest[:args.n - sum(quota)]:
        quota[k] += 1
    kinds = [name for (name, _), q in zip(KINDS, quota) for _ in range(q)]
    rng.shuffle(kinds)
    has_id = [bool(set(IDENT.findall(c[3])) - set(keyword.kwlist)) for c in cuts]
    spare = [j for j in range(args.n) if has_id[j] and kinds[j] != "rename"]
    rng.shuffle(spare)
    for j in range(args.n):
        if kinds[j] == "rename" and not has_id[j] and spare:
            k = spare.pop()
            kinds[j], kinds[k] = kinds[k], kinds[j]

    os.makedirs(args.out, exist_ok=True)
    stats, used = {}, set()
    with open(os.path.join(args.out, "examples.jsonl"), "w", encoding="utf-8") as fe, \
            open(os.path.join(args.out, "predictions.jsonl"), "w", encoding="utf-8") as fp:
        for idx, ((fi, i, prompt, gt, right), kind) in enumerate(zip(cuts, kinds)):
            repo, rel, text, lines, _ = files[fi]
            used.add(fi)
            # Self-check: the three parts are exactly the file.
            assert prompt + gt + right == text and prompt.count("\n") == i, (repo, rel, i)
            assert gt.strip() and "\n" not in gt and (right == "" or right[0] == "\n")
            task_id = f"project_cc_python/{idx}"
            fe.write(json.dumps({
                "prompt": prompt, "groundtruth": gt, "right_context": right,
                "metadata": {"task_id": task_id, "repository": repo, "file": rel,
                             "context_start_lineno": 0,
                             "groundtruth_start_lineno": i,
                             "right_context_start_lineno": i + 1},
                "crossfile_context": {"text": "", "list": []}}) + "\n")
            vocab = sorted(set(IDENT.findall(prompt[-4000:])) - set(keyword.kwlist)) or ["x"]
            pred = make_pred(kind, gt, lines, i, rng, vocab, stats)
            fp.write(json.dumps({"task_id": task_id, "pred": pred}) + "\n")
    print(f"examples: {len(chosen)} from {len(used)} files "
          f"({len({files[fi][0] for fi in used})} projects) -> {args.out}", file=sys.stderr)
    print("prediction kinds: " + ", ".join(f"{k}={v}" for k, v in sorted(stats.items())),
          file=sys.stderr)


if __name__ == "__main__":
    main()
