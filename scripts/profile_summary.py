#!/usr/bin/env python3
"""Summary of `kiln run --dump-profile` JSON files (the GPU scripts' per-layer profiles): per file, the
layer count and summed median time, the 12 ops taking the most time (layers, ms, share), and the
slowest layers with their tactics.
  python3 scripts/profile_summary.py [--top N] PROFILE.json [...]   (standard library only)"""
import argparse
import collections
import json

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--top", type=int, default=8, help="slowest layers listed per file (default 8)")
ap.add_argument("profiles", nargs="+")
a = ap.parse_args()
for f in a.profiles:
    layers = json.load(open(f))["layers"]
    agg = collections.defaultdict(lambda: [0, 0.0])
    for l in layers:
        agg[l.get("op", "?")][0] += 1
        agg[l.get("op", "?")][1] += l["median_ms"]
    tot = sum(v[1] for v in agg.values())
    print(f"{f.split('/')[-1]}: {len(layers)} layers, {tot:.3f} ms summed")
    for k, v in sorted(agg.items(), key=lambda x: -x[1][1])[:12]:
        print(f"  {k:22s} {v[0]:4d} layers {v[1]:.4f} ms ({100 * v[1] / max(tot, 1e-12):.1f}%)")
    for l in sorted(layers, key=lambda l: -l["median_ms"])[:a.top]:
        print(f"    {l['median_ms']:.4f} ms  {l.get('op')}  {l.get('name', '')[:60]}  {l.get('tactic', '')[:70]}")
