"""Reference embeddings from sentence-transformers for `bench_embed --reference`.

Embeds 12-line windows of this repository's Rust sources (the same chunking as the example) plus
a few short and empty-ish texts with the model directory as sentence-transformers loads it (mean
pooling, max_seq_length 256, normalised), and writes {"texts": [...], "embeddings": [[...]]}.

    python embed_reference.py MODEL_DIR OUT.json [--limit 200]

Needs `pip install sentence-transformers` (torch); run it in a virtual environment outside the
repository. MODEL_DIR is what scripts/fetch-embedder.sh prints.
"""

import argparse
import glob
import json
import os

from sentence_transformers import SentenceTransformer
from sentence_transformers.models import Normalize, Pooling, Transformer


def chunks(root):
    files = []
    for d in ["engine/src", "engine/src/generate", "engine/src/models", "tasks/src", "cli/src"]:
        files += glob.glob(os.path.join(root, d, "*.rs"))
    out = []
    for f in sorted(files):
        lines = open(f, encoding="utf-8").read().splitlines()
        for i in range(0, len(lines), 12):
            c = "\n".join(lines[i:i + 12])
            if len(c.strip()) > 40:
                out.append(c)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--limit", type=int, default=200)
    args = ap.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    texts = chunks(root)[: args.limit] + ["x", "def f():\n    pass", "日本語のテキスト", "a " * 600]
    # The fetched directory has no modules.json: build all-MiniLM-L6-v2's modules explicitly.
    transformer = Transformer(args.model_dir, max_seq_length=256)
    pooling = Pooling(transformer.get_word_embedding_dimension(), pooling_mode="mean")
    model = SentenceTransformer(modules=[transformer, pooling, Normalize()], device="cpu")
    emb = model.encode(texts, batch_size=32, convert_to_numpy=True)
    with open(args.out, "w") as f:
        json.dump({"texts": texts, "embeddings": emb.tolist()}, f)
    print(f"{len(texts)} texts -> {args.out}")


if __name__ == "__main__":
    main()
