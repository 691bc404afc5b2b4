#!/usr/bin/python3
"""Turn real photographs from scikit-image's bundled sample data into an ImageNet-style input tensor.

torchvision's classic eval transform: resize the shorter side to 256 (bilinear, antialiased), center
crop 224x224, scale to [0, 1], normalize with ImageNet mean/std, NCHW float32. Several --images give
a batch (one image per row), e.g. to exercise a dynamic batch dimension.

  prepare_image.py -o photo.npy                     # chelsea the cat, shape 1x3x224x224
  prepare_image.py --images chelsea,coffee -o x.npy # batch of 2
"""
import argparse

import numpy as np
from PIL import Image
from skimage import data

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
PHOTOS = ("chelsea", "coffee", "astronaut", "rocket", "cat")


def load_photo(name):
    img = getattr(data, name)()  # HxWx3 uint8, bundled with python3-skimage (no download)
    if img.ndim != 3 or img.shape[2] != 3:
        raise SystemExit(f"skimage.data.{name}() is not an RGB photo: shape {img.shape}")
    return Image.fromarray(img)


def eval_transform(img, resize=256, crop=224):
    # Same size arithmetic as torchvision's Resize(256) + CenterCrop(224): short side exactly `resize`,
    # long side truncated, crop offset rounded.
    w, h = img.size
    if w <= h:
        size = (resize, int(resize * h / w))
    else:
        size = (int(resize * w / h), resize)
    img = img.resize(size, Image.BILINEAR)
    w, h = img.size
    left, top = int(round((w - crop) / 2.0)), int(round((h - crop) / 2.0))
    img = img.crop((left, top, left + crop, top + crop))
    x = np.asarray(img, dtype=np.float32) / 255.0
    x = (x - IMAGENET_MEAN) / IMAGENET_STD
    return x.transpose(2, 0, 1)  # HWC -> CHW


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", default="chelsea", help=f"comma-separated, from {', '.join(PHOTOS)}")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    names = [n.strip() for n in args.images.split(",") if n.strip()]
    for n in names:
        if n not in PHOTOS:
            ap.error(f"unknown photo '{n}' (choose from {', '.join(PHOTOS)})")
    batch = np.stack([eval_transform(load_photo(n), resize=args.size * 256 // 224, crop=args.size) for n in names])
    batch = np.ascontiguousarray(batch, dtype=np.float32)
    np.save(args.output, batch)
    print(f"[image] {','.join(names)} -> {args.output} {batch.dtype} {'x'.join(map(str, batch.shape))}, "
          f"mean {batch.mean():.3f}, std {batch.std():.3f}")


if __name__ == "__main__":
    main()
