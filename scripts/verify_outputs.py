#!/usr/bin/python3
"""Compare a classifier output (N x classes .npy) from Kiln (or any engine) with a reference.

Pass criteria, per the Kiln model tests: max |Δ| / max |reference| <= --tol (default 1e-3), and for
every batch row the top-k class indices are identical, in the same order. Prints both top-k lists
with ImageNet class names (torchvision's bundled metadata; the weights themselves are random, so the
names only label the indices). Exit status 0 = agreement, 1 = disagreement, 2 = unusable input.

  verify_outputs.py kiln_out/logits.npy torch_ref.npy [--label resnet101] [--tol 1e-3] [--topk 5]
"""
import argparse
import json
import sys

import numpy as np


def imagenet_categories():
    try:
        from torchvision.models import ResNet101_Weights
        return list(ResNet101_Weights.IMAGENET1K_V1.meta["categories"])
    except Exception:  # torchvision missing or too old: indices alone still identify classes
        return None


def topk(row, k):
    # Stable sort on -value: ties resolve by index, identically for both arrays.
    return [int(i) for i in np.argsort(-row, kind="stable")[:k]]


def fmt_topk(row, idx, names):
    parts = []
    for i in idx:
        name = f" {names[i]}" if names and i < len(names) else ""
        parts.append(f"{i}{name} ({row[i]:.4f})")
    return ", ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("actual", help="engine output .npy (e.g. Kiln's)")
    ap.add_argument("reference", help="reference output .npy (e.g. PyTorch's)")
    ap.add_argument("--tol", type=float, default=1e-3, help="max |Δ| allowed, relative to max |reference|")
    ap.add_argument("--topk", type=int, default=5)
    ap.add_argument("--label", default="", help="name printed with the verdict")
    ap.add_argument("--names", action=argparse.BooleanOptionalAction, default=True, help="print class names")
    ap.add_argument("--json", help="append a one-line JSON verdict to this file")
    args = ap.parse_args()

    a = np.load(args.actual)
    r = np.load(args.reference)
    tag = f"[verify{(' ' + args.label) if args.label else ''}]"
    if a.shape != r.shape:
        print(f"{tag} FAIL: shape {a.shape} vs reference {r.shape}")
        return 2
    if a.ndim == 1:
        a, r = a[None], r[None]
    a = a.reshape(a.shape[0], -1).astype(np.float64)
    r = r.reshape(r.shape[0], -1).astype(np.float64)
    if not np.isfinite(a).all():
        print(f"{tag} FAIL: output has {np.size(a) - np.isfinite(a).sum()} non-finite values")
        return 1

    scale = float(np.abs(r).max())
    max_abs = float(np.abs(a - r).max())
    rel = max_abs / scale if scale > 0 else max_abs
    names = imagenet_categories() if args.names and r.shape[1] == 1000 else None

    ok = rel <= args.tol
    rows_ok = 0
    for n in range(r.shape[0]):
        ta, tr = topk(a[n], args.topk), topk(r[n], args.topk)
        same = ta == tr
        rows_ok += same
        ok &= same
        # Gap between the k-th and (k+1)-th reference scores: how close the ranking is to a tie.
        srt = np.sort(r[n])[::-1]
        gap = srt[args.topk - 1] - srt[args.topk] if r.shape[1] > args.topk else float("nan")
        print(f"{tag} row {n} top-{args.topk} {'identical' if same else 'DIFFER'} (k/k+1 gap {gap:.3g})")
        print(f"    engine:    {fmt_topk(a[n], ta, names)}")
        print(f"    reference: {fmt_topk(r[n], tr, names)}")
    verdict = "PASS" if ok else "FAIL"
    print(f"{tag} {verdict}: max |Δ| = {max_abs:.3g}, max |ref| = {scale:.4g}, relative {rel:.3g} "
          f"(tol {args.tol:g}); top-{args.topk} identical in {rows_ok}/{r.shape[0]} rows")
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps({"label": args.label, "pass": bool(ok), "max_abs": max_abs, "ref_max": scale,
                                "rel": rel, "topk_rows_identical": int(rows_ok), "rows": int(r.shape[0])}) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
