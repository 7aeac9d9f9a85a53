#!/usr/bin/env python3
"""repoqa_context_spans.py - run the official RepoQA context construction on a dataset, offline.

Calls repoqa.search_needle_function.make_code_context (imported from the environment, unmodified)
for every needle of a RepoQA dataset the way evaluate_model does: repositories in dataset order,
files in topological_sort(dependency) order, needle i of a repository at position_ratio
(i + 0.5) / len(needles). make_code_context loads its tokenizer with
AutoTokenizer.from_pretrained("codellama/CodeLlama-7b-Instruct-hf"), which needs the Hugging Face
hub; this script replaces only that call, with one of:

  --tokenizer regex       the stand-in the golden context files were made with: every maximal run of
                          [A-Za-z0-9_] plus every other non-whitespace character is one token.
  --tokenizer FILE.json   a tokenizer.json (scripts/fetch-codellama-tokenizer.sh builds Code Llama's),
                          loaded by the real AutoTokenizer.from_pretrained from a folder holding the
                          file and the hub repository's tokenizer_config.json / special_tokens_map.json
                          (as they stood before the 2024 chat-template edits, which do not touch
                          tokenization), so transformers picks the class itself (CodeLlamaTokenizerFast).
                          Every tokenize() call is also run through the raw `tokenizers` Tokenizer
                          (encode, add_special_tokens=False) and any disagreement is reported.

  --contexts OUT.jsonl    one line per needle in the golden context files' layout (with code_context);
  --spans OUT.jsonl       one line per needle, figures only: language, repo, name, position_ratio,
                          code_context_size, clean_comments, needle_token_start, needle_token_end,
                          code_context_ntokens, code_context_sha256. --append adds to the file.

clean_comments other than "none" needs a repoqa with CleanComment (evalplus/repoqa git ae876de; the
PyPI 0.1.2 release predates it and has no such parameter).

Examples (a virtual environment with repoqa, transformers, tokenizers, tree-sitter 0.21.3 and
tree-sitter-languages 1.10.2; see tasks/tests/data/README-repoqa-codellama-spans.md):
  python scripts/reference/repoqa_context_spans.py --dataset tests/golden/repoqa/dataset.json \
      --tokenizer regex --size 16384 --clean-comments none --contexts /tmp/contexts_16384_none.jsonl
  python scripts/reference/repoqa_context_spans.py --dataset tests/golden/repoqa/dataset.json \
      --tokenizer "$(scripts/fetch-codellama-tokenizer.sh)" --size 4096 --clean-comments no_padding \
      --spans tasks/tests/data/repoqa_codellama_spans.jsonl --append
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time

import repoqa.search_needle_function as snf
from repoqa.utility import topological_sort

HUB_NAME = "codellama/CodeLlama-7b-Instruct-hf"
# codellama/CodeLlama-7b-Instruct-hf's tokenizer_config.json and special_tokens_map.json.
_SPECIAL = {t: {"__type": "AddedToken", "content": c, "lstrip": False, "normalized": True,
                "rstrip": False, "single_word": False}
            for t, c in (("bos_token", "<s>"), ("eos_token", "</s>"), ("unk_token", "<unk>"))}
HUB_TOKENIZER_CONFIG = {
    "add_bos_token": True,
    "add_eos_token": False,
    "bos_token": _SPECIAL["bos_token"],
    "clean_up_tokenization_spaces": False,
    "eos_token": _SPECIAL["eos_token"],
    "legacy": None,
    "model_max_length": 1000000000000000019884624838656,
    "pad_token": None,
    "sp_model_kwargs": {},
    "tokenizer_class": "CodeLlamaTokenizer",
    "unk_token": _SPECIAL["unk_token"],
}
HUB_SPECIAL_TOKENS_MAP = {k: {kk: vv for kk, vv in v.items() if kk != "__type"} for k, v in _SPECIAL.items()}


class RegexTokenizer:
    """The golden files' stand-in tokenizer."""
    pattern = re.compile(r"[A-Za-z0-9_]+|[^A-Za-z0-9_ \t\n\r\f\v]")

    def tokenize(self, text):
        return self.pattern.findall(text)


class CheckedTokenizer:
    """transformers' tokenizer, with every tokenize() compared against the raw tokenizers.Tokenizer."""

    def __init__(self, hf, raw):
        self.hf, self.raw = hf, raw
        self.calls = 0
        self.disagreements = []
        self.current = None

    def tokenize(self, text):
        tokens = self.hf.tokenize(text)
        raw = self.raw.encode(text, add_special_tokens=False).tokens
        self.calls += 1
        if tokens != raw:
            self.disagreements.append({"task": self.current, "text": text[:200],
                                       "transformers": len(tokens), "tokenizers": len(raw)})
        return tokens


def load_codellama(tokenizer_json):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    folder = tempfile.mkdtemp(prefix="codellama-standin-")
    shutil.copyfile(tokenizer_json, os.path.join(folder, "tokenizer.json"))
    for name, content in (("tokenizer_config.json", HUB_TOKENIZER_CONFIG),
                          ("special_tokens_map.json", HUB_SPECIAL_TOKENS_MAP)):
        with open(os.path.join(folder, name), "w") as f:
            json.dump(content, f, indent=2)
    hf = AutoTokenizer.from_pretrained(folder)
    shutil.rmtree(folder)
    return CheckedTokenizer(hf, Tokenizer.from_file(tokenizer_json))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--tokenizer", required=True, help='"regex" or a tokenizer.json')
    ap.add_argument("--size", type=int, required=True, help="code_context_size")
    ap.add_argument("--clean-comments", default="none", choices=["none", "no_padding", "positional_padding"])
    ap.add_argument("--contexts", help="write golden-layout lines (with code_context) here")
    ap.add_argument("--spans", help="write figures-only lines here")
    ap.add_argument("--append", action="store_true", help="append to --spans / --contexts")
    args = ap.parse_args()

    if args.tokenizer == "regex":
        tokenizer = RegexTokenizer()
    else:
        tokenizer = load_codellama(args.tokenizer)
        print(f"tokenizer: {type(tokenizer.hf).__name__} from {args.tokenizer} "
              f"(sha256 {hashlib.sha256(open(args.tokenizer, 'rb').read()).hexdigest()})", file=sys.stderr)
    snf.AutoTokenizer.from_pretrained = staticmethod(
        lambda name, *a, **kw: tokenizer if name == HUB_NAME else sys.exit(f"unexpected tokenizer {name}"))

    extra = {}
    if hasattr(snf, "CleanComment"):
        extra["clean_comments"] = snf.CleanComment(args.clean_comments)
    elif args.clean_comments != "none":
        sys.exit("this repoqa has no clean_comments (needs evalplus/repoqa ae876de or later)")
    print(f"repoqa: {snf.__file__} (sha256 {hashlib.sha256(open(snf.__file__, 'rb').read()).hexdigest()})",
          file=sys.stderr)

    with open(args.dataset) as f:
        dataset = json.load(f)
    mode = "a" if args.append else "w"
    contexts = open(args.contexts, mode, encoding="utf-8") if args.contexts else None
    spans = open(args.spans, mode, encoding="utf-8") if args.spans else None
    start = time.time()
    count = 0
    for lang, repos in dataset.items():
        for repo in repos:
            if "needles" not in repo:
                continue
            ordered_paths = topological_sort(repo["dependency"])
            file_content_list = [(path, repo["content"][path]) for path in ordered_paths]
            for i, needle in enumerate(repo["needles"]):
                position_ratio = (i + 0.5) / len(repo["needles"])
                if isinstance(tokenizer, CheckedTokenizer):
                    tokenizer.current = f"{lang}::{repo['repo']}::{needle['name']}"
                info = snf.make_code_context(needle, file_content_list, position_ratio=position_ratio,
                                             code_context_size=args.size, language=lang, **extra)
                content = repo["content"][needle["path"]]
                head = {"language": lang, "repo": repo["repo"], "name": needle["name"]}
                figures = {
                    "position_ratio": position_ratio,
                    "code_context_size": args.size,
                    "clean_comments": args.clean_comments,
                    "needle_token_start": info["needle_token_start"],
                    "needle_token_end": info["needle_token_end"],
                    "code_context_ntokens": info["code_context_ntokens"],
                }
                sha = hashlib.sha256(info["code_context"].encode("utf-8")).hexdigest()
                if contexts:
                    mismatch = (content[needle["start_byte"]:needle["end_byte"]]
                                != content.encode("utf-8")[needle["start_byte"]:needle["end_byte"]]
                                .decode("utf-8", errors="replace"))
                    row = {**head, "path": needle["path"], **figures,
                           "needle_slice_byte_char_mismatch": mismatch,
                           "code_context_sha256": sha, "code_context": info["code_context"]}
                    contexts.write(json.dumps(row) + "\n")
                if spans:
                    spans.write(json.dumps({**head, **figures, "code_context_sha256": sha}) + "\n")
                count += 1
    elapsed = time.time() - start
    for f in (contexts, spans):
        if f:
            f.close()
    print(f"{count} needles, size {args.size}, clean_comments {args.clean_comments}: {elapsed:.1f} s", file=sys.stderr)
    if isinstance(tokenizer, CheckedTokenizer):
        print(f"tokenize() calls: {tokenizer.calls}; transformers vs tokenizers disagreements: "
              f"{len(tokenizer.disagreements)}", file=sys.stderr)
        for d in tokenizer.disagreements[:20]:
            print(f"  {json.dumps(d, ensure_ascii=False)}", file=sys.stderr)
        if tokenizer.disagreements:
            sys.exit(1)


if __name__ == "__main__":
    main()
