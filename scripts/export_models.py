#!/usr/bin/python3
"""Export a torchvision model to ONNX for Kiln's demo and model tests, with a PyTorch reference output.

No pretrained weights can be downloaded here, so weights are random (seeded) — but BatchNorm running
statistics are calibrated on seeded random batches (train mode, then eval; by default random crops of
scikit-image's bundled photos), so outputs are O(1) instead of ~7e4 (ResNet) or ~1e-9 (MobileNet).
Same seed and torch => same weights => same ONNX and reference.
Run with /usr/bin/python3 (Debian's torch 1.13 + torchvision 0.14) or any torch >= 1.13.

  export_models.py --model resnet101 -o models/resnet101.onnx \
      --reference-input x.npy --reference-output y.npy
  export_models.py --model bert_base -o models/bert_base.onnx \
      --reference-input feeds.npz --reference-output last_hidden_state.npy

bert_base and gpt2 (scripts/transformer_models.py: HuggingFace BertModel / GPT2Model structure, random
seeded weights, no BatchNorm) take an .npz of named int64 inputs [batch, seq] (input_ids, and for BERT
attention_mask) and write their first output (last_hidden_state [batch, seq, 768]) as the reference.
"""
import argparse
import inspect
import hashlib
import os
import sys
import time

import numpy as np
import torch
import torchvision

from transformer_models import TEXT_MODELS, build_text_model, export_text_onnx  # noqa: E402

MODELS = ("resnet101", "resnet50", "mobilenet_v2", "efficientnet_b0", "vit_b_16", "convnext_tiny", "googlenet") + tuple(TEXT_MODELS)
WANTED_OPSET = 17


def log(msg):
    print(f"[export] {msg}", flush=True)


def max_supported_opset():
    try:
        from torch.onnx import _constants
        return int(getattr(_constants, "ONNX_MAX_OPSET", getattr(_constants, "onnx_main_opset", WANTED_OPSET)))
    except ImportError:
        return WANTED_OPSET


def build_model(name, seed):
    """Random-init model with the given seed (torchvision's own init schemes, no download)."""
    torch.manual_seed(seed)
    model = getattr(torchvision.models, name)(weights=None)
    make_informative(model)
    return model


def make_informative(model):
    """Undo the inits that are right for training but make a random model's output uninformative:
    zero-initialized weights (ViT's classifier head: every output exactly 0) get N(0, 1/fan_in), and
    ConvNeXt's layer scale (1e-6, which hides every block's contribution from the output) becomes 0.2."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)) and not m.weight.any():
                m.weight.normal_(0.0, m.weight[0].numel() ** -0.5)
        for name, p in model.named_parameters():
            if name.endswith("layer_scale"):
                p.fill_(0.2)


# Photos bundled with python3-skimage (no download). Random crops of real photos give BN statistics
# that match real inputs: calibrated on white noise, ResNet-101 still outputs ~260 on a photo;
# calibrated on photo crops, ~3 (and ~20 on white noise).
CALIB_PHOTOS = ("chelsea", "coffee", "astronaut", "rocket", "immunohistochemistry", "hubble_deep_field")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# Set by --photos-npz: the same photos saved with save_photos_npz, for machines without skimage.
PHOTOS_NPZ = None


def load_photos():
    """The calibration photos as HWC uint8 arrays, from skimage or from PHOTOS_NPZ."""
    if PHOTOS_NPZ:
        with np.load(PHOTOS_NPZ) as z:
            return [z[p] for p in CALIB_PHOTOS]
    from skimage import data
    return [getattr(data, p)() for p in CALIB_PHOTOS]


def save_photos_npz(path):
    from skimage import data
    np.savez_compressed(path, **{p: getattr(data, p)() for p in CALIB_PHOTOS})


def photo_crops(gen, n, size):
    """n seeded random crops (25-100% of the area, random flips) of skimage photos, ImageNet-normalized."""
    import torch.nn.functional as F
    mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(3, 1, 1)
    srcs = [torch.from_numpy(np.ascontiguousarray(p)).permute(2, 0, 1).float() / 255 for p in load_photos()]
    out = []
    for _ in range(n):
        img = srcs[int(torch.randint(len(srcs), (1,), generator=gen))]
        _, h, w = img.shape
        side = int(min(h, w) * float(torch.empty(1).uniform_(0.25, 1.0, generator=gen)) ** 0.5)
        y = int(torch.randint(h - side + 1, (1,), generator=gen))
        x = int(torch.randint(w - side + 1, (1,), generator=gen))
        crop = F.interpolate(img[None, :, y:y + side, x:x + side], size=(size, size), mode="bilinear",
                             align_corners=False)[0]
        if float(torch.rand(1, generator=gen)) < 0.5:
            crop = crop.flip(2)
        out.append((crop - mean) / std)
    return torch.stack(out)


def calibration_source(requested):
    if requested == "photos" and not PHOTOS_NPZ:
        try:
            import skimage.data  # noqa: F401
        except ImportError:
            log("WARNING: scikit-image missing, calibrating BatchNorm on white noise instead of photos")
            return "noise"
    return requested


def calibrate_batchnorm(model, seed, source, batches, batch_size, size):
    """Replace BN running stats by the exact average of the batch stats over seeded batches."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return 0
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative moving average: the exact mean over the calibration batches
    gen = torch.Generator().manual_seed(seed + 1)
    model.eval()  # dropout and stochastic depth stay off; only BatchNorm runs in training mode
    for bn in bns:
        bn.train()
    with torch.no_grad():
        for _ in range(batches):
            x = photo_crops(gen, batch_size, size) if source == "photos" else \
                torch.randn(batch_size, 3, size, size, generator=gen)
            model(x)
    return len(bns)


def output_scale(model, seed, source, size):
    gen = torch.Generator().manual_seed(seed + 2)
    x = photo_crops(gen, 2, size) if source == "photos" else torch.randn(2, 3, size, size, generator=gen)
    with torch.no_grad():
        y = model(x)
    return float(y.abs().max()), float(y.std())


def read_sidecar(path):
    side = path + ".recipe"
    if not (os.path.exists(path) and os.path.exists(side)):
        return None
    with open(side) as f:
        return f.read().strip()


def write_sidecar(path, recipe):
    with open(path + ".recipe", "w") as f:
        f.write(recipe + "\n")


def export_onnx(model, path, opset, size):
    dummy = torch.zeros(1, 3, size, size)
    tmp = path + ".tmp"
    # torch >= 2.9 defaults to the dynamo exporter (needs onnxscript); keep the TorchScript one.
    extra = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, dummy, tmp, opset_version=opset, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, do_constant_folding=True, **extra)
    os.replace(tmp, path)  # never leave a half-written model that a later run would take as cached


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet101", choices=MODELS)
    ap.add_argument("-o", "--output", help="ONNX path (default models/<model>.onnx)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--opset", type=int, default=None, help=f"default: {WANTED_OPSET} or the highest torch supports")
    ap.add_argument("--size", type=int, default=224, help="image side used for calibration and export")
    ap.add_argument("--calib", choices=("photos", "noise"), default="photos",
                    help="BatchNorm calibration data: random crops of skimage photos, or N(0,1) noise")
    ap.add_argument("--calib-batches", type=int, default=2)
    ap.add_argument("--calib-batch-size", type=int, default=4)
    ap.add_argument("--force", action="store_true", help="re-export even if the ONNX file exists")
    ap.add_argument("--reference-input", help="NCHW float32 .npy to run through the PyTorch model")
    ap.add_argument("--reference-output", help="where to write the PyTorch output .npy")
    ap.add_argument("--photos-npz", help="calibration photos saved by --save-photos-npz (no skimage needed)")
    ap.add_argument("--save-photos-npz", help="write skimage's calibration photos to this .npz and exit")
    args = ap.parse_args()
    if args.save_photos_npz:
        save_photos_npz(args.save_photos_npz)
        return
    global PHOTOS_NPZ
    PHOTOS_NPZ = args.photos_npz
    if bool(args.reference_input) != bool(args.reference_output):
        ap.error("--reference-input and --reference-output go together")

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    out = args.output or os.path.join("models", f"{args.model}.onnx")
    opset = args.opset or min(WANTED_OPSET, max_supported_opset())
    log(f"torch {torch.__version__}, torchvision {torchvision.__version__}, opset {opset} "
        f"(torch supports up to {max_supported_opset()})")

    # Sidecars record what produced each cached file (recipe; for references also the input's hash),
    # so a cached model and a cached reference always belong together.
    if args.model in TEXT_MODELS:
        return export_text_model(args, out, opset)
    source = calibration_source(args.calib)
    recipe = (f"{args.model} seed={args.seed} opset={opset} size={args.size} "
              f"calib={source}:{args.calib_batches}x{args.calib_batch_size} torch={torch.__version__}")
    onnx_cached = not args.force and read_sidecar(out) == recipe
    ref_recipe = ref_cached = None
    if args.reference_input:
        with open(args.reference_input, "rb") as f:
            ref_recipe = f"{recipe} input-sha256={hashlib.sha256(f.read()).hexdigest()}"
        ref_cached = onnx_cached and read_sidecar(args.reference_output) == ref_recipe
    if onnx_cached and (ref_cached or not args.reference_input):
        log(f"{out}{' and ' + args.reference_output if ref_cached else ''} cached ({recipe}; --force to redo)")
        return

    t0 = time.perf_counter()
    model = build_model(args.model, args.seed)
    n_bn = calibrate_batchnorm(model, args.seed, source, args.calib_batches, args.calib_batch_size, args.size)
    model.eval()
    log(f"{args.model}: seed {args.seed}, {n_bn} BatchNorm layers calibrated on "
        f"{args.calib_batches}x{args.calib_batch_size} random {source} ({time.perf_counter() - t0:.1f} s)")
    peak, std = output_scale(model, args.seed, source, args.size)
    log(f"output scale on held-out random {source}: max |y| = {peak:.4g}, std = {std:.4g}")
    if not (1e-3 < peak < 1e3):
        log("WARNING: output scale is far from O(1); references would be a poor test")

    if onnx_cached:
        log(f"{out} cached ({recipe})")
    else:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        t1 = time.perf_counter()
        export_onnx(model, out, opset, args.size)
        write_sidecar(out, recipe)
        log(f"wrote {out} ({os.path.getsize(out) / 1e6:.1f} MB) in {time.perf_counter() - t1:.1f} s")

    if args.reference_input:
        x = np.load(args.reference_input)
        if x.dtype != np.float32 or x.ndim != 4:
            sys.exit(f"[export] {args.reference_input}: expected float32 NCHW, got {x.dtype} {x.shape}")
        t2 = time.perf_counter()
        with torch.no_grad():
            y = model(torch.from_numpy(x)).numpy()
        np.save(args.reference_output, y.astype(np.float32))
        write_sidecar(args.reference_output, ref_recipe)
        log(f"PyTorch reference {y.shape} -> {args.reference_output} ({(time.perf_counter() - t2) * 1e3:.0f} ms, "
            f"max |y| = {np.abs(y).max():.4g})")


def export_text_model(args, out, opset):
    """bert_base / gpt2: export (dynamic batch and sequence) and the PyTorch reference, cached like the
    torchvision models."""
    recipe = f"{args.model} seed={args.seed} opset={opset} torch={torch.__version__}"
    onnx_cached = not args.force and read_sidecar(out) == recipe
    ref_recipe = None
    if args.reference_input:
        with open(args.reference_input, "rb") as f:
            ref_recipe = f"{recipe} input-sha256={hashlib.sha256(f.read()).hexdigest()}"
        if onnx_cached and read_sidecar(args.reference_output) == ref_recipe:
            log(f"{out} and {args.reference_output} cached ({recipe}; --force to redo)")
            return
    elif onnx_cached:
        log(f"{out} cached ({recipe}; --force to redo)")
        return
    model = build_text_model(args.model, args.seed)
    if not onnx_cached:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        t1 = time.perf_counter()
        export_text_onnx(model, args.model, out + ".tmp", opset)
        os.replace(out + ".tmp", out)
        write_sidecar(out, recipe)
        log(f"wrote {out} ({os.path.getsize(out) / 1e6:.1f} MB) in {time.perf_counter() - t1:.1f} s")
    if args.reference_input:
        names = TEXT_MODELS[args.model][1]
        with np.load(args.reference_input) as z:
            missing = [n for n in names if n not in z]
            if missing:
                sys.exit(f"[export] {args.reference_input}: no array named {', '.join(missing)}")
            feeds = [torch.from_numpy(z[n].astype(np.int64)) for n in names]
        with torch.no_grad():
            y = model(*feeds)
        y = (y[0] if isinstance(y, tuple) else y).numpy()
        np.save(args.reference_output, y.astype(np.float32))
        write_sidecar(args.reference_output, ref_recipe)
        log(f"PyTorch reference {y.shape} -> {args.reference_output} (max |y| = {np.abs(y).max():.4g})")


if __name__ == "__main__":
    main()
