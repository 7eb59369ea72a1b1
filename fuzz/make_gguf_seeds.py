#!/usr/bin/env python3
"""Writes the small gguf_bind seeds in fuzz/corpus/gguf_bind/ (run from the repository root).

Micro models (n_embd 8, 2 heads of 4, 4 experts top-2, expert ffn 4, one block) in the layout
`moe gen` writes for its tiny presets, with the 320-token byte-level BPE vocabulary copied from
a `moe gen tiny-olmoe` file (argument 1), so each seed loads and runs in about a millisecond and
is ~15 KB: small enough for libFuzzer to mutate usefully. Weights: seeded N(0, 1/8).
"""
import random
import struct
import sys

F32, F16 = 0, 1


def read_gguf_kv(path):
    d = open(path, 'rb').read()
    p = 8
    _, nkv = struct.unpack_from('<QQ', d, p)
    p += 16
    out = []
    sizes = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: 'B', 10: 'Q', 11: 'q', 12: 'd'}

    def rs():
        nonlocal p
        n, = struct.unpack_from('<Q', d, p)
        p += 8
        s = d[p:p + n]
        p += n
        return s

    def rv(t):
        nonlocal p
        if t == 8:
            return rs()
        if t == 9:
            et, n = struct.unpack_from('<IQ', d, p)
            p += 12
            return (et, [rv(et) for _ in range(n)])
        v, = struct.unpack_from('<' + sizes[t], d, p)
        p += struct.calcsize(sizes[t])
        return v

    for _ in range(nkv):
        k = rs().decode()
        t, = struct.unpack_from('<I', d, p)
        p += 4
        out.append((k, t, rv(t)))
    return out


def enc_str(s):
    if isinstance(s, str):
        s = s.encode()
    return struct.pack('<Q', len(s)) + s


def enc_val(t, v):
    if t == 8:
        return enc_str(v)
    if t == 9:
        et, items = v
        return struct.pack('<IQ', et, len(items)) + b''.join(enc_val(et, x) for x in items)
    fmt = {0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: 'B', 10: 'Q', 11: 'q', 12: 'd'}[t]
    return struct.pack('<' + fmt, v)


def write(path, arch, kvs, tensors, seed):
    rng = random.Random(seed)
    header = b'GGUF' + struct.pack('<IQQ', 3, len(tensors), len(kvs))
    header += b''.join(enc_str(k) + struct.pack('<I', t) + enc_val(t, v) for k, t, v in kvs)
    blobs, off = [], 0
    for name, typ, shape in tensors:
        n = 1
        for s in shape:
            n *= s
        if name.endswith('norm.weight'):
            vals = [1.0 + 0.1 * rng.gauss(0, 1) for _ in range(n)]
        else:
            vals = [rng.gauss(0, 1) / 8 for _ in range(n)]
        data = struct.pack('<%d%s' % (n, 'f' if typ == F32 else 'e'), *vals)
        header += enc_str(name) + struct.pack('<I', len(shape)) + b''.join(struct.pack('<Q', s) for s in shape)
        header += struct.pack('<IQ', typ, off)
        blobs.append(data + b'\0' * (-len(data) % 32))
        off += len(blobs[-1])
    header += b'\0' * (-len(header) % 32)
    open(path, 'wb').write(header + b''.join(blobs))


def main():
    src = read_gguf_kv(sys.argv[1])
    tok = [(k, t, v) for k, t, v in src if k.startswith('tokenizer.')]
    D, H, HD, E, K, FF, V = 8, 2, 4, 4, 2, 4, 320
    for arch, wtype, qk_norm in (('olmoe', F32, True), ('olmoe', F16, True), ('llama', F16, False)):
        kvs = [('general.architecture', 8, arch), ('general.name', 8, 'micro-' + arch),
               (arch + '.context_length', 4, 64), (arch + '.embedding_length', 4, D),
               (arch + '.block_count', 4, 1), (arch + '.feed_forward_length', 4, FF),
               (arch + '.attention.head_count', 4, H), (arch + '.attention.head_count_kv', 4, H),
               (arch + '.rope.dimension_count', 4, HD), (arch + '.rope.freq_base', 6, 10000.0),
               (arch + '.attention.layer_norm_rms_epsilon', 6, 1e-5),
               (arch + '.expert_count', 4, E), (arch + '.expert_used_count', 4, K)] + tok
        t = [('token_embd.weight', wtype, [D, V]), ('output_norm.weight', F32, [D]),
             ('output.weight', wtype, [D, V]), ('blk.0.attn_norm.weight', F32, [D])]
        t += [('blk.0.attn_%s.weight' % n, wtype, [D, D]) for n in ('q', 'k', 'v', 'output')]
        if qk_norm:
            t += [('blk.0.attn_q_norm.weight', F32, [D]), ('blk.0.attn_k_norm.weight', F32, [D])]
        t += [('blk.0.ffn_norm.weight', F32, [D]), ('blk.0.ffn_gate_inp.weight', F32, [D, E]),
              ('blk.0.ffn_gate_exps.weight', wtype, [D, FF, E]), ('blk.0.ffn_down_exps.weight', wtype, [FF, D, E]),
              ('blk.0.ffn_up_exps.weight', wtype, [D, FF, E])]
        name = 'micro-%s-%s.gguf' % (arch, 'f32' if wtype == F32 else 'f16')
        write('fuzz/corpus/gguf_bind/' + name, arch, kvs, t, seed=len(name))


if __name__ == '__main__':
    main()
