#!/usr/bin/env python3
"""gemma3_reference.py - an independent f32 forward pass of a Gemma 3 GGUF, to check the engine.

  gemma3_reference.py MODEL.gguf IDS.jsonl      (each line {"ids": [...]}, BOS included)

Dequantizes every tensor with gguf-py and runs the model in numpy in f32 (norms in f64), with no
activation quantization, f16 cache or lookup-table GELU: what the model computes, not what an
engine approximates. Prints, per line, the token count and the top 5 next tokens with their
probabilities. Written from the model's definition (sandwich RMSNorms, QK-norm, GeGLU, √hidden
embedding scale, 5 local layers of the file's window with rotary base 10,000 then 1 global).
Needs numpy and gguf (pip install gguf).
"""
import json, sys, numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize
r = GGUFReader(sys.argv[1])
T = {t.name: t for t in r.tensors}
def W(n):
    t = T[n]; a = dequantize(t.data, t.tensor_type)
    return np.asarray(a, dtype=np.float32).reshape([int(x) for x in reversed(t.shape)]) if a.ndim == 1 else np.asarray(a, dtype=np.float32)
f = lambda k: r.fields[k].contents()
H, L, NH, NKV, D = f("gemma3.embedding_length"), f("gemma3.block_count"), f("gemma3.attention.head_count"), f("gemma3.attention.head_count_kv"), f("gemma3.attention.key_length")
eps, theta, win = f("gemma3.attention.layer_norm_rms_epsilon"), f("gemma3.rope.freq_base"), f("gemma3.attention.sliding_window")
emb = W("token_embd.weight")
def rms(x, w): return x / np.sqrt((x.astype(np.float64)**2).mean(-1, keepdims=True) + eps).astype(np.float32) * w
def rope(x, pos, base):  # x (heads, t, D), NEOX halves
    half = D // 2; inv = 1.0 / base ** (np.arange(half) * 2.0 / D)
    ang = pos[:, None] * inv[None, :]; c, s = np.cos(ang), np.sin(ang)
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, a * s + b * c], -1).astype(np.float32)
def gelu(x): return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
Ws = {}
def w(n):
    if n not in Ws: Ws[n] = W(n)
    return Ws[n]
for line in open(sys.argv[2]):
    ids = json.loads(line)["ids"]; t = len(ids); pos = np.arange(t, dtype=np.float64)
    x = emb[ids] * np.float32(np.sqrt(H))
    for i in range(L):
        local = i % 6 < 5
        g = lambda s: w(f"blk.{i}.{s}.weight")
        h = rms(x, g("attn_norm"))
        q = (h @ g("attn_q").T).reshape(t, NH, D).transpose(1, 0, 2)
        k = (h @ g("attn_k").T).reshape(t, NKV, D).transpose(1, 0, 2)
        v = (h @ g("attn_v").T).reshape(t, NKV, D).transpose(1, 0, 2)
        q, k = rms(q, g("attn_q_norm")), rms(k, g("attn_k_norm"))
        base = 10000.0 if local else theta
        q, k = rope(q, pos, base), rope(k, pos, base)
        k, v = np.repeat(k, NH // NKV, 0), np.repeat(v, NH // NKV, 0)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(D)
        qi, ki = np.arange(t)[:, None], np.arange(t)[None, :]
        mask = (ki > qi) | ((qi - ki >= win) if local else False)
        s = np.where(mask, -np.inf, s); s = np.exp(s - s.max(-1, keepdims=True)); s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(t, NH * D) @ g("attn_output").T
        x = x + rms(a, g("post_attention_norm"))
        h = rms(x, g("ffn_norm"))
        m = (gelu(h @ g("ffn_gate").T) * (h @ g("ffn_up").T)) @ g("ffn_down").T
        x = x + rms(m, g("post_ffw_norm"))
    logits = rms(x[-1:], w("output_norm.weight")) @ emb.T
    l = logits[0].astype(np.float64); p = np.exp(l - l.max()); p /= p.sum()
    top = np.argsort(-l)[:5]
    print(t, [(int(i), round(float(p[i]), 3)) for i in top])
