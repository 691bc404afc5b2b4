"""Helpers the examples share: export a torchvision classifier to ONNX (random init, seeded,
BatchNorm statistics made informative as scripts/export_models.py does; no download) and load a
photo as an ImageNet-normalized NCHW float32 batch."""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))


def torch_model(arch="resnet101", seed=0, size=224):
    """The seeded torchvision model (eval mode) that export() writes to ONNX, its BatchNorm
    statistics calibrated on photo crops as scripts/export_models.py does (outputs O(1), so FP16
    plans do not overflow)."""
    import export_models
    npz = os.path.join(ROOT, ".gpu-carry", "calib_photos.npz")
    try:
        import skimage.data  # noqa: F401
    except ImportError:
        if os.path.exists(npz):
            export_models.PHOTOS_NPZ = npz
    model = export_models.build_model(arch, seed)
    export_models.calibrate_batchnorm(model, seed, export_models.calibration_source("photos"), 2, 4, size)
    return model.eval()


def export(arch, path, size=224, seed=0):
    """Writes `arch` to `path` as ONNX (input 'input' [batch,3,size,size], output 'logits');
    returns the torch model."""
    import export_models
    model = torch_model(arch, seed, size)
    if not os.path.exists(path):
        export_models.export_onnx(model, path, min(17, export_models.max_supported_opset()), size)
    return model


def photo(path=None, size=224):
    """NCHW float32 [1,3,size,size]: `path` (any format PIL reads), else skimage's chelsea (a cat),
    else the photos .npz next to the GPU carry; center-cropped, ImageNet-normalized."""
    if path:
        from PIL import Image
        img = np.asarray(Image.open(path).convert("RGB"))
    else:
        npz = os.path.join(ROOT, ".gpu-carry", "calib_photos.npz")
        try:
            from skimage import data
            img = data.chelsea()
        except ImportError:
            with np.load(npz) as z:
                img = z["chelsea"]
    h, w, _ = img.shape
    s = min(h, w)
    img = img[(h - s) // 2:(h - s) // 2 + s, (w - s) // 2:(w - s) // 2 + s]
    idx = (np.arange(size) * s / size).astype(int)  # nearest-neighbour resize: no extra dependency
    img = img[idx][:, idx].astype(np.float32) / 255
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    return np.ascontiguousarray(((img - mean) / std).transpose(2, 0, 1)[None])


def top5(logits):
    logits = np.asarray(logits, np.float64).reshape(-1)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    best = np.argsort(-p)[:5]
    return [(int(i), float(p[i])) for i in best]
