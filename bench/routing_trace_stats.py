#!/usr/bin/env python3
"""Inference-side effect of a router's balance, from a `moe run --routing-trace` TSV (layer, token,
experts, weights): per layer, the load entropy (bits), max/mean load, an LRU expert-cache hit rate
(CAP experts of E resident per layer, tokens in order, as a decode-time offloading cache sees
them) and the rank balance of expert parallelism (E experts placed contiguously on RANKS ranks:
busiest rank's slots / mean). Used for docs/TRAINING.md; not part of the test suite.

usage: routing_trace_stats.py TRACE.tsv N_EXPERT [CAP] [RANKS]   (several runs may be concatenated)
"""
import math
import sys
from collections import OrderedDict, defaultdict


def main():
    path, E = sys.argv[1], int(sys.argv[2])
    cap = int(sys.argv[3]) if len(sys.argv) > 3 else E // 4
    ranks = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    rows = defaultdict(list)
    with open(path) as f:
        for line in f:
            if line.startswith("layer"):  # header (one per concatenated run)
                continue
            layer, tok, experts, _ = line.rstrip("\n").split("\t")
            rows[int(layer)].append((int(tok), [int(e) for e in experts.split(",")]))
    tot = defaultdict(float)
    for layer in sorted(rows):
        seq = rows[layer]  # file order: token order within each traced run
        load = [0] * E
        lru, hits, refs = OrderedDict(), 0, 0
        for _, ex in seq:
            for e in ex:
                load[e] += 1
                refs += 1
                if e in lru:
                    hits += 1
                    lru.move_to_end(e)
                else:
                    lru[e] = True
                    if len(lru) > cap:
                        lru.popitem(last=False)
        n = sum(load)
        ent = -sum(c / n * math.log2(c / n) for c in load if c)
        rank = [0] * ranks
        for e, c in enumerate(load):
            rank[e * ranks // E] += c
        vals = dict(entropy=ent, max_mean=max(load) / (n / E), dead=sum(1 for c in load if c == 0),
                    lru_hit=hits / refs, rank_balance=max(rank) / (n / ranks))
        for k, v in vals.items():
            tot[k] += v
        print(f"L{layer}: tokens {len(seq)}  entropy {ent:.3f} bits  max/mean {vals['max_mean']:.2f}  dead {vals['dead']}"
              f"  LRU hit ({cap}/{E}) {100 * vals['lru_hit']:.1f}%  rank max/mean ({ranks} ranks) {vals['rank_balance']:.2f}")
    L = len(rows)
    print("mean: " + "  ".join(f"{k} {v / L:.3f}" for k, v in tot.items()))


if __name__ == "__main__":
    main()
