#!/usr/bin/python3
"""Training tokens/s of PyTorch on CPU for the model `moe train` trains (bench/train_vs_torch.sh runs
both side by side). Same architecture (qwen3moe-style: RMSNorm, GQA attention with per-head q/k
RMSNorm and NeoX RoPE, softmax top-k router with renormalised weights, SwiGLU experts gathered per
expert, untied head), same shape, batch, context, threads, AdamW and gradient clipping. Inputs are
random token windows: this measures speed only. Needs Debian's python3-torch
(apt-get install python3-torch); not part of the test suite.

usage: train_torch.py [--vocab 1024 --embd 128 --layers 4 --heads 4 --kv-heads 2 --head-dim 32
                       --ff 128 --experts 16 --top-k 2 --ctx 128 --batch 16 --threads 2 --steps 20]
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w


def rope(x, cos, sin):  # x [B, T, H, hd], NeoX halves
    h = x.shape[-1] // 2
    x0, x1 = x[..., :h], x[..., h:]
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        D, hd = a.embd, a.head_dim
        self.a = a
        self.attn_norm, self.ffn_norm = RMSNorm(D), RMSNorm(D)
        self.wq = nn.Linear(D, a.heads * hd, bias=False)
        self.wk = nn.Linear(D, a.kv_heads * hd, bias=False)
        self.wv = nn.Linear(D, a.kv_heads * hd, bias=False)
        self.wo = nn.Linear(a.heads * hd, D, bias=False)
        self.q_norm, self.k_norm = RMSNorm(hd), RMSNorm(hd)
        self.router = nn.Linear(D, a.experts, bias=False)
        self.gate = nn.Parameter(torch.randn(a.experts, a.ff, D) * 0.02)
        self.up = nn.Parameter(torch.randn(a.experts, a.ff, D) * 0.02)
        self.down = nn.Parameter(torch.randn(a.experts, D, a.ff) * 0.02)

    def forward(self, x, cos, sin, mask):
        a = self.a
        B, T, D = x.shape
        h = self.attn_norm(x)
        q = self.q_norm(self.wq(h).view(B, T, a.heads, a.head_dim))
        k = self.k_norm(self.wk(h).view(B, T, a.kv_heads, a.head_dim))
        v = self.wv(h).view(B, T, a.kv_heads, a.head_dim)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        g = a.heads // a.kv_heads
        k = k.repeat_interleave(g, dim=2)
        v = v.repeat_interleave(g, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, T, hd]
        s = (q @ k.transpose(-1, -2)) / math.sqrt(a.head_dim) + mask
        o = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, -1)
        x = x + self.wo(o)
        h = self.ffn_norm(x).view(B * T, D)
        p = self.router(h).softmax(-1)
        w, ids = p.topk(a.top_k, dim=-1)
        w = w / w.sum(-1, keepdim=True)
        y = torch.zeros_like(h)
        for e in range(a.experts):
            tok, slot = (ids == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            xe = h[tok]
            he = F.silu(xe @ self.gate[e].t()) * (xe @ self.up[e].t())
            y.index_add_(0, tok, (he @ self.down[e].t()) * w[tok, slot].unsqueeze(-1))
        return x + y.view(B, T, D)


class Net(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.a = a
        self.emb = nn.Embedding(a.vocab, a.embd)
        self.blocks = nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = RMSNorm(a.embd)
        self.head = nn.Linear(a.embd, a.vocab, bias=False)
        hd = a.head_dim
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd // 2).float() * 2 / hd))
        ang = torch.arange(a.ctx).float()[:, None] * inv[None, :]
        self.register_buffer("cos", ang.cos()[None, :, None, :])
        self.register_buffer("sin", ang.sin()[None, :, None, :])
        self.register_buffer("mask", torch.full((a.ctx, a.ctx), float("-inf")).triu(1))

    def forward(self, tok):
        x = self.emb(tok)
        for b in self.blocks:
            x = b(x, self.cos, self.sin, self.mask)
        return self.head(self.norm(x))


def main():
    ap = argparse.ArgumentParser()
    for k, v in dict(vocab=1024, embd=128, layers=4, heads=4, kv_heads=2, head_dim=32, ff=128, experts=16,
                     top_k=2, ctx=128, batch=16, threads=2, steps=20, warmup_steps=3).items():
        ap.add_argument("--" + k.replace("_", "-"), type=int, default=v)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    net = Net(a)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    n_params = sum(p.numel() for p in net.parameters())
    data = torch.randint(0, a.vocab, (a.steps + a.warmup_steps, a.batch, a.ctx + 1))
    t0 = None
    for i in range(a.steps + a.warmup_steps):
        if i == a.warmup_steps:
            t0, c0 = time.perf_counter(), time.process_time()
        x, y = data[i, :, :-1], data[i, :, 1:]
        loss = F.cross_entropy(net(x).reshape(-1, a.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    n = a.steps * a.batch * a.ctx
    print(f"pytorch {torch.__version__}: {n_params} params, {a.steps} steps of {a.batch}x{a.ctx} tokens, "
          f"{a.threads} threads: {n / dt:.0f} tok/s, cpu {dc:.1f} s: {n / dc:.0f} tok per cpu-s (loss {loss.item():.3f})")


if __name__ == "__main__":
    main()
