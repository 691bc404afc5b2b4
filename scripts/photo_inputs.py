#!/usr/bin/env python3
"""Writes N real-image inputs (default 100) for accuracy checks: deterministic crops and flips of
the calibration photos (scripts/export_models.py CALIB_PHOTOS, carried as .gpu-carry/calib_photos.npz),
bilinear-resized to SIZE x SIZE, ImageNet-normalized, as one float32 NCHW .npy [N, 3, SIZE, SIZE].

Crops per photo, in order: the full centre square, then squares of 85/70/55/40 % of the short
side at the centre, top-left and bottom-right; each crop also mirrored. Inputs are dealt
round-robin over the photos so any prefix covers every photo. numpy only.

  photo_inputs.py --photos-npz .gpu-carry/calib_photos.npz -n 100 -o /tmp/photos100.npy
"""
import argparse

import numpy as np

CALIB_PHOTOS = ("chelsea", "coffee", "astronaut", "rocket", "immunohistochemistry", "hubble_deep_field")
MEAN = np.array((0.485, 0.456, 0.406), np.float32).reshape(3, 1, 1)
STD = np.array((0.229, 0.224, 0.225), np.float32).reshape(3, 1, 1)


def resize_bilinear(img, size):
    """HWC float32 -> size x size x C, half-pixel centres (PyTorch align_corners=False)."""
    h, w, _ = img.shape

    def coords(n_in):
        x = (np.arange(size, dtype=np.float64) + 0.5) * n_in / size - 0.5
        x = np.clip(x, 0, n_in - 1)
        lo = np.floor(x).astype(np.int64)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, (x - lo).astype(np.float32)

    y0, y1, fy = coords(h)
    x0, x1, fx = coords(w)
    top = img[y0][:, x0] * (1 - fx)[None, :, None] + img[y0][:, x1] * fx[None, :, None]
    bot = img[y1][:, x0] * (1 - fx)[None, :, None] + img[y1][:, x1] * fx[None, :, None]
    return top * (1 - fy)[:, None, None] + bot * fy[:, None, None]


def crops(img, size):
    h, w, _ = img.shape
    short = min(h, w)
    boxes = [((h - short) // 2, (w - short) // 2, short)]
    for frac in (0.85, 0.70, 0.55, 0.40):
        s = int(short * frac)
        boxes += [((h - s) // 2, (w - s) // 2, s), (0, 0, s), (h - s, w - s, s)]
    for y, x, s in boxes:
        c = resize_bilinear(img[y:y + s, x:x + s], size)
        for flip in (False, True):
            yield c[:, ::-1] if flip else c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos-npz", required=True)
    ap.add_argument("-n", type=int, default=100)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    with np.load(args.photos_npz) as z:
        photos = [z[p] for p in CALIB_PHOTOS]
    per_photo = []
    for p in photos:
        if p.ndim == 2:
            p = np.stack([p] * 3, axis=-1)
        per_photo.append(list(crops(p[..., :3].astype(np.float32) / 255.0, args.size)))
    out = []
    for i in range(max(len(c) for c in per_photo)):
        for c in per_photo:
            if i < len(c) and len(out) < args.n:
                out.append(((c[i].transpose(2, 0, 1) - MEAN) / STD).astype(np.float32))
    if len(out) < args.n:
        raise SystemExit(f"only {len(out)} crops available, {args.n} requested")
    x = np.ascontiguousarray(np.stack(out))
    np.save(args.output, x)
    print(f"wrote {args.output}: {x.shape} float32, mean {x.mean():.3f}, std {x.std():.3f}")


if __name__ == "__main__":
    main()
