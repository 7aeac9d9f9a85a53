#!/usr/bin/env python3
"""compare_tokenizers.py - our GGUF-rebuilt tokenizer against independent references on real code.

  corpus GOLDEN OUT.jsonl           writes the corpus: every golden CrossCodeEval prompt (4 languages)
                                    plus non-ASCII and whitespace texts, as {"text", "source"} lines
  compare CORPUS OURS.jsonl TIKTOKEN_FILE MODEL.gguf LLAMA_TOKENIZE PER_LANGUAGE
                                    compares our ids (from the tokenize_gguf example) with
                                    (1) Qwen's original BPE ranks (qwen.tiktoken, the vocabulary
                                    Qwen2/2.5 share) under tiktoken with Qwen2's split regex and NFC,
                                    on every text; (2) llama.cpp's llama-tokenize on the same GGUF,
                                    on the first PER_LANGUAGE prompts of each language and all the
                                    extra texts. Also checks the GGUF vocabulary equals the ranks.
Needs tiktoken and gguf (scripts/check-tokenizer.sh makes a virtual environment with them).
"""
import base64
import json
import subprocess
import sys
import unicodedata
from pathlib import Path

# Qwen2's pre-tokenizer split (its tokenizer.json), the same as Qwen's original tiktoken pattern.
QWEN_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
              r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
LANGUAGES = ["python", "java", "csharp", "typescript"]
EXTRA = [
    "# 计算两个数的和\ndef add(a, b):\n    return a + b  # 返回结果\n",
    "// コメント: ユーザー名を取得する\nconst name = user.getName();\n",
    "/* Комментарий на русском */ int счётчик = 0;\n",
    "print('héllo wörld – “quoted” — ellipsis…')\n",
    "emoji = '🚀🔥👍🏽 👨‍👩‍👧‍👦'  # ZWJ family\n",
    "café = 'e\u0301'  # decomposed é (NFC composes it)\n",
    "Å vs A\u030a, ñ vs n\u0303, ﬁ ligature, ① circled, ２ fullwidth\n",
    "x² + y³ = z⁴; π ≈ 3.14159; ∑ᵢ aᵢ ≤ ∞\n",
    "مرحبا بالعالم\nשלום עולם\nनमस्ते दुनिया\n한국어 주석\n",
    "\tif (x)\r\n\t\treturn;\r\n\r\n   \n\n\n    trailing   \n",
    "numbers 1234567890 0x1F 3.14e-10 1_000_000 ١٢٣\n",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE don't I'M\n",
    "\u00a0nbsp\u2003emspace\u200bzero-width\ufeffbom\n",
    "<|endoftext|> is a special token; <|fim_prefix|> too\n",
]


def corpus(golden, out_path):
    with open(out_path, "w") as out:
        for lang in LANGUAGES:
            for n, line in enumerate(Path(golden, "cceval", lang, "examples.jsonl").read_text().splitlines()):
                out.write(json.dumps({"text": json.loads(line)["prompt"], "source": f"{lang}/{n}"}) + "\n")
        for n, text in enumerate(EXTRA):
            out.write(json.dumps({"text": text, "source": f"extra/{n}"}) + "\n")


def load_ranks(path):
    ranks = {}
    for line in Path(path).read_text().splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    return ranks


def byte_level_decoder():
    """GPT-2's byte-to-unicode table, inverted: vocabulary characters to bytes."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare(corpus_path, ours_path, tiktoken_file, gguf_path, llama_tokenize, per_language):
    import gguf

    texts = [json.loads(line) for line in Path(corpus_path).read_text().splitlines()]
    ours = [json.loads(line)["ids"] for line in Path(ours_path).read_text().splitlines()]
    if len(texts) != len(ours):
        raise SystemExit(f"{ours_path}: {len(ours)} lines for {len(texts)} texts")

    reader = gguf.GGUFReader(gguf_path)
    field = reader.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
    pre = reader.fields.get("tokenizer.ggml.pre")
    if pre is None or bytes(pre.parts[pre.data[0]]).decode() != "qwen2":
        # Qwen's ranks are the reference of Qwen's vocabulary only; other models (Gemma's
        # SentencePiece) are checked against llama.cpp alone.
        print("vocabulary: not Qwen's (tokenizer.ggml.pre is not qwen2): the tiktoken reference is skipped")
    else:
        compare_with_ranks(texts, ours, tokens, tiktoken_file)
    compare_with_llama_tokenize(texts, ours, gguf_path, llama_tokenize, per_language)


def compare_with_ranks(texts, ours, tokens, tiktoken_file):
    import tiktoken

    ranks = load_ranks(tiktoken_file)
    to_byte = byte_level_decoder()
    vocab_same = sum(1 for i, t in enumerate(tokens[: len(ranks)]) if ranks.get(bytes(to_byte[c] for c in t)) == i)
    print(f"vocabulary: GGUF tokens 0..{len(ranks) - 1} equal to qwen.tiktoken ranks: {vocab_same}/{len(ranks)}"
          f" (GGUF has {len(tokens)} tokens; the rest are added/special)")

    # Special tokens as the original tokenizer splits them out of text (added tokens).
    specials = {t: i for i, t in enumerate(tokens) if i >= len(ranks) and t.startswith("<") and t.endswith(">")}
    encoding = tiktoken.Encoding("qwen2", pat_str=QWEN_SPLIT, mergeable_ranks=ranks, special_tokens=specials)

    def reference(text):
        return encoding.encode(unicodedata.normalize("NFC", text), allowed_special="all")

    mismatches = 0
    total_tokens = 0
    for row, ids in zip(texts, ours):
        ref = reference(row["text"])
        total_tokens += len(ref)
        if ref != ids:
            mismatches += 1
            at = first_difference(ref, ids)
            print(f"  MISMATCH vs tiktoken {row['source']}: token {at}: ours {ids[at:at + 6]} ref {ref[at:at + 6]}")
    print(f"ours vs original Qwen BPE ranks (tiktoken, NFC): {len(texts) - mismatches}/{len(texts)} texts identical,"
          f" {total_tokens} reference tokens")


def compare_with_llama_tokenize(texts, ours, gguf_path, llama_tokenize, per_language):
    chosen = []
    counts = {}
    for row, ids in zip(texts, ours):
        lang = row["source"].split("/")[0]
        counts[lang] = counts.get(lang, 0) + 1
        if lang == "extra" or counts[lang] <= per_language:
            chosen.append((row, ids))
    mismatches = 0
    for row, ids in chosen:
        run = subprocess.run([llama_tokenize, "-m", gguf_path, "-p", row["text"], "--ids", "--log-disable",
                              "--no-escape", "--no-bos"], capture_output=True, check=True, text=True)
        theirs = json.loads(run.stdout.strip().splitlines()[-1])
        if theirs != ids:
            mismatches += 1
            at = first_difference(theirs, ids)
            print(f"  MISMATCH vs llama-tokenize {row['source']}: token {at}: ours {ids[at:at + 6]}"
                  f" llama.cpp {theirs[at:at + 6]}")
    print(f"ours vs llama.cpp llama-tokenize: {len(chosen) - mismatches}/{len(chosen)} texts identical")


def main(argv):
    if len(argv) == 4 and argv[1] == "corpus":
        corpus(argv[2], argv[3])
    elif len(argv) == 8 and argv[1] == "compare":
        compare(*argv[2:7], int(argv[7]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
