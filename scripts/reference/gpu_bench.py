#!/usr/bin/env python3
"""gpu_bench.py - the Python half of scripts/gpu-bench.sh, run on the GPU machine (no network).

  model SHAPE DIR [--tokenizer FILE] [--seed N]
        writes a random-weight Qwen2 model of SHAPE (qwen2.5-coder-1.5b, qwen2.5-coder-7b, or tiny
        for tests) to DIR: config.json with the real model's hyper-parameters (v4-style keys, which
        both our engine and transformers read), bf16 safetensors (sharded at 4 GiB, with
        model.safetensors.index.json), and FILE copied as tokenizer.json. Idempotent: weights
        already written with the same shape, seed and writer version are kept.
        Weights: matrices and biases N(0, 0.02), norm weights 1 + N(0, 0.1). Drawn with torch on
        the GPU when there is one, else numpy (slow for big shapes; fine for tiny).
  tokenizer OUT.json [--vocab N]
        trains a small byte-level BPE tokenizer (Qwen2's pre-tokenizer split and NFC, N tokens,
        default 8192) on this Python's standard library sources, with the `tokenizers` package;
        for when no real tokenizer.json was carried. The model's vocabulary may be larger.
  transformers DIR OURS_SPEED.json OURS_LOGITS.json OUT.json [--batches 1,8,32,64]
        [--prompt-tokens N] [--decode-tokens N] [--runs N] [--device cuda:0]
        times transformers' generate on DIR (bf16, greedy) on the same prompts as our engine
        (the token ids in OURS_SPEED.json, written by bench_generate --speed-json; random ids when
        that file is missing), left-padded with an attention mask, and compares the logits of the
        first generated position with ours (OURS_LOGITS.json, bench_generate --logits): max |diff|
        against transformers in bf16, and of both against transformers in fp32 on the same weights
        (the bf16 noise floor). Prefill = one forward of the prompt batch (last-position logits
        only, as generate does); decode = (generate time - prefill time) / (batch x decode steps),
        generate making decode-tokens + 1 tokens (the first comes from the prefill), as ours does.
        --device cpu runs it on the CPU: a dry run of the scripts (with the tiny shape), not a benchmark.
  table RESULTS_DIR MODEL... [--build BUILD.json]
        the markdown report of RESULTS_DIR/MODEL.codesweep.json and MODEL.transformers.json.
"""
import argparse
import inspect
import json
import math
import shutil
import statistics
import struct
import sys
import time
from pathlib import Path

# Qwen2's pre-tokenizer split (its tokenizer.json).
QWEN_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
              r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")

# The hyper-parameters of the real models (their config.json on the hub).
SHAPES = {
    "qwen2.5-coder-1.5b": dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12,
                               num_key_value_heads=2, intermediate_size=8960, vocab_size=151936,
                               tie_word_embeddings=True),
    "qwen2.5-coder-7b": dict(hidden_size=3584, num_hidden_layers=28, num_attention_heads=28,
                             num_key_value_heads=4, intermediate_size=18944, vocab_size=152064,
                             tie_word_embeddings=False),
    # For testing the scripts without a GPU.
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=128, vocab_size=9000, tie_word_embeddings=True),
}
WRITER_VERSION = 1
SHARD_BYTES = 4 << 30
MARKER = "gpu-bench-model.json"


def config_json(shape):
    s = SHAPES[shape]
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_act": "silu",
        "hidden_size": s["hidden_size"],
        "intermediate_size": s["intermediate_size"],
        "num_hidden_layers": s["num_hidden_layers"],
        "num_attention_heads": s["num_attention_heads"],
        "num_key_value_heads": s["num_key_value_heads"],
        "max_position_embeddings": 32768,
        "max_window_layers": s["num_hidden_layers"],
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "sliding_window": 32768,
        "use_sliding_window": False,
        "tie_word_embeddings": s["tie_word_embeddings"],
        "vocab_size": s["vocab_size"],
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": True,
        "torch_dtype": "bfloat16",
        # No eos_token_id: random weights must not stop early, in either engine.
    }


def tensor_specs(shape):
    """[(name, shape, kind)] in file order; kind is 'normal' (N(0, 0.02)) or 'norm' (1 + N(0, 0.1))."""
    s = SHAPES[shape]
    h, inter, vocab = s["hidden_size"], s["intermediate_size"], s["vocab_size"]
    hd = h // s["num_attention_heads"]
    q, kv = s["num_attention_heads"] * hd, s["num_key_value_heads"] * hd
    specs = [("model.embed_tokens.weight", (vocab, h), "normal")]
    for i in range(s["num_hidden_layers"]):
        p = f"model.layers.{i}."
        specs += [
            (p + "input_layernorm.weight", (h,), "norm"),
            (p + "self_attn.q_proj.weight", (q, h), "normal"),
            (p + "self_attn.q_proj.bias", (q,), "normal"),
            (p + "self_attn.k_proj.weight", (kv, h), "normal"),
            (p + "self_attn.k_proj.bias", (kv,), "normal"),
            (p + "self_attn.v_proj.weight", (kv, h), "normal"),
            (p + "self_attn.v_proj.bias", (kv,), "normal"),
            (p + "self_attn.o_proj.weight", (h, q), "normal"),
            (p + "post_attention_layernorm.weight", (h,), "norm"),
            (p + "mlp.gate_proj.weight", (inter, h), "normal"),
            (p + "mlp.up_proj.weight", (inter, h), "normal"),
            (p + "mlp.down_proj.weight", (h, inter), "normal"),
        ]
    specs.append(("model.norm.weight", (h,), "norm"))
    if not s["tie_word_embeddings"]:
        specs.append(("lm_head.weight", (vocab, h), "normal"))
    return specs


class RandomBf16:
    """bf16 bytes of random tensors: torch on the GPU when available, else numpy."""

    def __init__(self, seed):
        self.seed = seed
        self.torch = None
        try:
            import torch
            if torch.cuda.is_available():
                self.torch = torch
        except ImportError:
            pass

    def bytes(self, index, shape, kind):
        seed = self.seed * 1_000_003 + index
        if self.torch is not None:
            torch = self.torch
            g = torch.Generator(device="cuda").manual_seed(seed)
            t = torch.randn(shape, generator=g, device="cuda", dtype=torch.float32)
            t = 1.0 + 0.1 * t if kind == "norm" else 0.02 * t
            return t.to(torch.bfloat16).contiguous().view(torch.int16).cpu().numpy().tobytes()
        import numpy as np
        a = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
        a = (1.0 + 0.1 * a if kind == "norm" else 0.02 * a).astype(np.float32)
        u = a.view(np.uint32)
        # Round to nearest even, as torch's float -> bfloat16 does (no NaNs here).
        u = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
        return u.astype("<u2").tobytes()


def write_safetensors(path, entries, random):
    """entries: [(index, name, shape, kind)]; streams each tensor as it is drawn."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for _, name, shape, _ in entries:
        size = 2 * math.prod(shape)
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for index, name, shape, kind in entries:
            data = random.bytes(index, shape, kind)
            if len(data) != 2 * math.prod(shape):
                raise SystemExit(f"{name}: drew {len(data)} bytes for shape {shape}")
            f.write(data)
    return offset


def tokenizer_vocab_size(path):
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    ids = list(doc.get("model", {}).get("vocab", {}).values()) + [t["id"] for t in doc.get("added_tokens", [])]
    return max(ids) + 1 if ids else 0


def cmd_model(args):
    if args.shape not in SHAPES:
        raise SystemExit(f"unknown shape {args.shape!r}; known: {', '.join(SHAPES)}")
    out = Path(args.dir)
    config = config_json(args.shape)
    if args.tokenizer:
        n = tokenizer_vocab_size(args.tokenizer)
        if n > config["vocab_size"]:
            raise SystemExit(f"{args.tokenizer}: {n} tokens, more than the model's vocabulary of {config['vocab_size']}")
    marker = {"shape": args.shape, "seed": args.seed, "writer": WRITER_VERSION, "config": config}
    done = out / MARKER
    if done.exists() and json.loads(done.read_text()) == marker:
        print(f"{out}: random {args.shape} weights already there (seed {args.seed})", flush=True)
    else:
        partial = out.with_name(out.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        partial.mkdir(parents=True)
        started = time.time()
        random = RandomBf16(args.seed)
        entries = [(i, name, shape, kind) for i, (name, shape, kind) in enumerate(tensor_specs(args.shape))]
        shards, current, size = [], [], 0
        for e in entries:
            n = 2 * math.prod(e[2])
            if current and size + n > SHARD_BYTES:
                shards.append(current)
                current, size = [], 0
            current.append(e)
            size += n
        shards.append(current)
        total = 0
        if len(shards) == 1:
            total = write_safetensors(partial / "model.safetensors", shards[0], random)
        else:
            weight_map = {}
            for k, shard in enumerate(shards):
                file = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
                total += write_safetensors(partial / file, shard, random)
                weight_map.update({name: file for _, name, _, _ in shard})
            index = {"metadata": {"total_size": total}, "weight_map": weight_map}
            (partial / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
        (partial / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        (partial / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        partial.rename(out)
        how = "torch on the GPU" if random.torch is not None else "numpy"
        print(f"{out}: random {args.shape} weights, {total / 2**30:.2f} GiB bf16 in {len(shards)} file(s), "
              f"{time.time() - started:.0f}s ({how})", flush=True)
    if args.tokenizer:
        shutil.copyfile(args.tokenizer, out / "tokenizer.json")


def cmd_tokenizer(args):
    import sysconfig
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts, size = [], 0
    for path in sorted(stdlib.rglob("*.py")):
        if "site-packages" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        texts.append(text)
        size += len(text)
        if size > 8_000_000:
            break
    if size < 100_000:
        raise SystemExit(f"only {size} characters of Python sources under {stdlib}; cannot train a tokenizer")
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=args.vocab, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    tok.save(args.out)
    print(f"{args.out}: byte-level BPE of {tok.get_vocab_size()} tokens trained on {size} characters "
          f"of {stdlib}", flush=True)


def left_pad(rows, pad_id=0):
    width = max(len(r) for r in rows)
    ids = [[pad_id] * (width - len(r)) + list(r) for r in rows]
    mask = [[0] * (width - len(r)) + [1] * len(r) for r in rows]
    return ids, mask


def cmd_transformers(args):
    import numpy as np
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    if on_gpu and not torch.cuda.is_available():
        raise SystemExit("torch sees no GPU (--device cpu for a dry run on the CPU)")

    def sync():
        if on_gpu:
            torch.cuda.synchronize(device)

    device_name = torch.cuda.get_device_name(device) if on_gpu else f"CPU ({torch.get_num_threads()} threads)"
    batches = [int(b) for b in args.batches.split(",")]
    ours_speed = json.loads(Path(args.ours_speed).read_text()) if Path(args.ours_speed).exists() else None
    ours_logits = json.loads(Path(args.ours_logits).read_text()) if Path(args.ours_logits).exists() else None
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    dtype_key = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
    started = time.time()
    model = AutoModelForCausalLM.from_pretrained(args.dir, **{dtype_key: torch.bfloat16})
    model = model.to(device).eval()
    sync()
    load_seconds = time.time() - started
    vocab = model.config.vocab_size
    params = inspect.signature(model.forward).parameters
    keep = {"logits_to_keep": 1} if "logits_to_keep" in params else (
        {"num_logits_to_keep": 1} if "num_logits_to_keep" in params else {})
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, {device_name}; "
          f"{args.dir} loaded in {load_seconds:.1f}s", flush=True)

    if ours_speed is not None:
        prompts = ours_speed["prompt_ids"]
    else:
        g = torch.Generator().manual_seed(0)
        prompts = torch.randint(100, min(vocab, 50_000), (max(batches), args.prompt_tokens), generator=g).tolist()
    if len(prompts) < max(batches):
        raise SystemExit(f"{args.ours_speed}: {len(prompts)} prompts, fewer than batch {max(batches)}")
    new_tokens = args.decode_tokens + 1

    def prefill_and_generate(batch, max_new):
        ids, mask = left_pad(prompts[:batch])
        ids = torch.tensor(ids, device=device)
        mask = torch.tensor(mask, device=device)
        with torch.inference_mode():
            sync()
            t0 = time.perf_counter()
            model(input_ids=ids, attention_mask=mask, use_cache=True, **keep)
            sync()
            t1 = time.perf_counter()
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=max_new,
                                 min_new_tokens=max_new, pad_token_id=0)
            sync()
            t2 = time.perf_counter()
        made = out.shape[1] - ids.shape[1]
        if made != max_new:
            raise SystemExit(f"generate made {made} tokens, not {max_new}")
        return int(mask.sum()), t1 - t0, t2 - t1

    def last_logits(ids):
        with torch.inference_mode():
            out = model(input_ids=torch.tensor([ids], device=device), use_cache=False, **keep)
        return out.logits[0, -1].float().cpu().numpy()

    # bf16 logits first (the comparison matters most), fp32 ones last (the model is converted).
    logit_prompts = ours_logits["prompts"] if ours_logits is not None else []
    bf16 = [last_logits(p["ids"]) for p in logit_prompts]

    def save(speed, comparisons):
        # Rewritten after each batch size too, so a run cut short keeps what it measured.
        Path(args.out).write_text(json.dumps({
            "engine": "transformers", "transformers": transformers.__version__, "torch": torch.__version__,
            "torch_cuda": torch.version.cuda, "gpu": device_name, "model": args.dir,
            "load_seconds": load_seconds, "prompt_tokens": len(prompts[0]), "decode_tokens": args.decode_tokens,
            "runs": args.runs, "same_prompts_as_ours": ours_speed is not None, "batches": speed,
            "logits": comparisons,
        }, indent=1) + "\n")

    speed = []
    for batch in batches:
        try:
            prefill_and_generate(batch, 2)  # warm-up at this shape, not measured
            runs = []
            for _ in range(args.runs):
                tokens, prefill_s, generate_s = prefill_and_generate(batch, new_tokens)
                runs.append({"prompt_tokens": tokens, "prefill_seconds": prefill_s, "generate_seconds": generate_s,
                             "decode_rows": batch * args.decode_tokens})
        except torch.cuda.OutOfMemoryError as e:
            print(f"batch {batch}: out of GPU memory ({e})", flush=True)
            speed.append({"batch": batch, "error": f"out of GPU memory: {e}"})
            torch.cuda.empty_cache()
            continue
        prefill = statistics.median(r["prompt_tokens"] / r["prefill_seconds"] for r in runs)
        decode = statistics.median(r["decode_rows"] / max(r["generate_seconds"] - r["prefill_seconds"], 1e-9)
                                   for r in runs)
        print(f"batch {batch}: prefill {prefill:.1f} tok/s, decode {decode:.2f} tok/s (median of {args.runs})",
              flush=True)
        speed.append({"batch": batch, "prefill_tokens_per_s": prefill, "decode_tokens_per_s": decode, "runs": runs})
        save(speed, [])
        if on_gpu:
            torch.cuda.empty_cache()

    comparisons = []
    if logit_prompts:
        ours = [np.asarray(p["logits"], dtype=np.float32) for p in logit_prompts]
        model = model.float()
        fp32 = [last_logits(p["ids"]) for p in logit_prompts]
        for p, o, b, f in zip(logit_prompts, ours, bf16, fp32):
            if o.shape != b.shape:
                raise SystemExit(f"logits of {o.shape[0]} tokens from ours, {b.shape[0]} from transformers")
            row = {
                "prompt_tokens": len(p["ids"]),
                "max_abs_diff": float(np.max(np.abs(o - b))),
                "ours_vs_fp32": float(np.max(np.abs(o - f))),
                "transformers_bf16_vs_fp32": float(np.max(np.abs(b - f))),
                "max_abs_logit": float(np.max(np.abs(f))),
                "same_argmax": int(np.argmax(o)) == int(np.argmax(b)),
                "argmax_ours": int(np.argmax(o)), "argmax_transformers": int(np.argmax(b)),
            }
            print(f"logits, {row['prompt_tokens']} tokens: max |ours - transformers| {row['max_abs_diff']:.4f} "
                  f"(ours vs fp32 {row['ours_vs_fp32']:.4f}, transformers bf16 vs fp32 "
                  f"{row['transformers_bf16_vs_fp32']:.4f}; max |logit| {row['max_abs_logit']:.3f}), "
                  f"same argmax: {row['same_argmax']}", flush=True)
            comparisons.append(row)
    save(speed, comparisons)


def fmt(x, digits=1):
    return "—" if x is None else f"{x:,.{digits}f}"


def ratio(a, b):
    return "—" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def cmd_table(args):
    d = Path(args.results_dir)
    build = json.loads(Path(args.build).read_text()) if args.build and Path(args.build).exists() else {}
    loaded = {}
    for model in args.models:
        sides = {}
        for side in ("codesweep", "transformers"):
            path = d / f"{model}.{side}.json"
            sides[side] = json.loads(path.read_text()) if path.exists() else None
        loaded[model] = sides
    first = next((s for m in loaded.values() for s in m.values() if s), {})
    hf = next((m["transformers"] for m in loaded.values() if m["transformers"]), {})
    ours = next((m["codesweep"] for m in loaded.values() if m["codesweep"]), {})
    device = hf.get("gpu", "?")
    dry_run = device.startswith("CPU")
    title = "codesweep vs transformers `generate` on the CPU: a dry run of the scripts, not a benchmark" if dry_run \
        else "codesweep CUDA engine vs transformers `generate`"
    lines = [f"# {title}", ""]
    lines.append(f"- {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {'device' if dry_run else 'GPU'}: {device}; "
                 f"driver {args.driver or '?'}; transformers {hf.get('transformers', '?')}, "
                 f"torch {hf.get('torch', '?')} (CUDA {hf.get('torch_cuda', '?')})")
    if build:
        lines.append(f"- codesweep bench_generate built from {build.get('commit', '?')}"
                     f"{' (uncommitted changes)' if build.get('dirty') else ''} on {build.get('built', '?')}, "
                     f"--features cuda, compute capability {build.get('compute_cap', '?')}, {build.get('nvcc', '?')}")
    lines.append(f"- random-weight models of the real shapes, bf16 safetensors, same weights and same prompt "
                 f"token ids for both; {first.get('prompt_tokens', '?')}-token prompts, "
                 f"{first.get('decode_tokens', '?')} decode steps after the first token; medians of "
                 f"{first.get('runs', '?')} runs after a warm-up per batch size; codesweep prefill chunk "
                 f"{ours.get('prefill_chunk', '?')} tokens")
    lines.append("- prefill: prompt tokens / time to the first logits; decode: batch x steps / decode time; "
                 "ratio: codesweep / transformers")
    lines += ["", "## Speed (tokens/s)", "",
              "| model | batch | prefill codesweep | prefill transformers | ratio | decode codesweep | decode transformers | ratio |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for model, sides in loaded.items():
        rows = {}
        for side in ("codesweep", "transformers"):
            for b in (sides[side] or {}).get("batches", []):
                rows.setdefault(b["batch"], {})[side] = b
        if not rows:
            lines.append(f"| {model} | — | — | — | — | — | — | — |")
        for batch in sorted(rows):
            o, t = rows[batch].get("codesweep", {}), rows[batch].get("transformers", {})
            op, tp = o.get("prefill_tokens_per_s"), t.get("prefill_tokens_per_s")
            od, td = o.get("decode_tokens_per_s"), t.get("decode_tokens_per_s")
            lines.append(f"| {model} | {batch} | {fmt(op)} | {fmt(tp)} | {ratio(op, tp)} | {fmt(od)} | {fmt(td)} | {ratio(od, td)} |")
    lines += ["", "## Logits of the first generated position", "",
              "max |logit difference| over the whole vocabulary, one prompt at a time (batch 1, no padding); "
              "transformers bf16 vs fp32 is the bf16 noise floor on the same weights.", "",
              "| model | prompt tokens | codesweep vs transformers (bf16) | codesweep vs fp32 | transformers bf16 vs fp32 | max \\|logit\\| | same argmax |",
              "|---|---:|---:|---:|---:|---:|---|"]
    for model, sides in loaded.items():
        comps = (sides["transformers"] or {}).get("logits", [])
        if not comps:
            lines.append(f"| {model} | — | — | — | — | — | — |")
        for c in comps:
            lines.append(f"| {model} | {c['prompt_tokens']} | {fmt(c['max_abs_diff'], 4)} | {fmt(c['ours_vs_fp32'], 4)} | "
                         f"{fmt(c['transformers_bf16_vs_fp32'], 4)} | {fmt(c['max_abs_logit'], 3)} | "
                         f"{'yes' if c['same_argmax'] else 'no'} |")
    missing = [f"{m} {s}" for m, sides in loaded.items() for s, v in sides.items() if v is None]
    if missing:
        lines += ["", f"Missing (that step failed; see its log): {', '.join(missing)}"]
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("model")
    p.add_argument("shape")
    p.add_argument("dir")
    p.add_argument("--tokenizer")
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("tokenizer")
    p.add_argument("out")
    p.add_argument("--vocab", type=int, default=8192)
    p = sub.add_parser("transformers")
    p.add_argument("dir")
    p.add_argument("ours_speed")
    p.add_argument("ours_logits")
    p.add_argument("out")
    p.add_argument("--batches", default="1,8,32,64")
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--decode-tokens", type=int, default=32)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--device", default="cuda:0")
    p = sub.add_parser("table")
    p.add_argument("results_dir")
    p.add_argument("models", nargs="+")
    p.add_argument("--build")
    p.add_argument("--driver")
    args = ap.parse_args()
    {"model": cmd_model, "tokenizer": cmd_tokenizer, "transformers": cmd_transformers, "table": cmd_table}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
