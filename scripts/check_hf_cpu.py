#!/usr/bin/python3
"""CPU plans of the test-size Hugging Face exports against PyTorch's outputs.

For each DIR/<model>/<model>.<exporter>.onnx (scripts/export_hf.py --export-only writes them with one
<input>.npy per graph input and reference_out.npy): `kiln build --device cpu --shapes <the .npy
shapes>`, `kiln run --input ... --output-dir`, and the cosine and max relative error of the first
output against reference_out.npy (passes at cosine >= 0.99999, as scripts/export_hf.py). Extra
`kiln build` flags (e.g. "--disable-pass fold_attention_transposes") go in --build-flags; --inspect
counts the plan's Transpose and Attention layers from `kiln inspect`. Exit status 1 when any case
fails. Run with Debian's /usr/bin/python3 (numpy).

  scripts/check_hf_cpu.py build/kiln /tmp/hft --work /tmp/hft-cpu
"""
import argparse
import os
import subprocess
import sys

import numpy as np

COS_MIN = 0.99999


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln", help="the kiln CLI binary")
    ap.add_argument("dir", help="directory of <model>/<model>.<exporter>.onnx exports")
    ap.add_argument("--work", default="/tmp/hf-cpu-check", help="plans and outputs go here")
    ap.add_argument("--build-flags", default="", help="extra `kiln build` flags (one string)")
    ap.add_argument("--inspect", action="store_true", help="count Transpose / Attention layers of each plan")
    a = ap.parse_args()
    ok = True
    for model in sorted(os.listdir(a.dir)):
        d = os.path.join(a.dir, model)
        if not os.path.isdir(d):
            continue
        feeds = sorted(f[:-4] for f in os.listdir(d) if f.endswith(".npy") and f != "reference_out.npy")
        ref_path = os.path.join(d, "reference_out.npy")
        for onnx in sorted(f for f in os.listdir(d) if f.endswith(".onnx")):
            case = f"{model}/{onnx}"
            work = os.path.join(a.work, model, onnx[:-5])
            os.makedirs(work, exist_ok=True)
            plan = os.path.join(work, "x.plan")
            shapes = ",".join(n + ":" + "x".join(str(x) for x in np.load(os.path.join(d, n + ".npy")).shape) for n in feeds)
            cmd = [a.kiln, "build", os.path.join(d, onnx), "-o", plan, "--device", "cpu", "--shapes", shapes] + a.build_flags.split()
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"[{case}] build failed: {(r.stdout + r.stderr)[-800:]}")
                ok = False
                continue
            od = os.path.join(work, "out")
            cmd = [a.kiln, "run", plan, "--output-dir", od]
            for n in feeds:
                cmd += ["--input", f"{n}={os.path.join(d, n + '.npy')}"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"[{case}] run failed: {(r.stdout + r.stderr)[-800:]}")
                ok = False
                continue
            files = sorted(f for f in os.listdir(od) if f.endswith(".npy"))
            got = np.load(os.path.join(od, files[0])).astype(np.float64).ravel()
            want = np.load(ref_path).astype(np.float64).ravel()
            if got.size != want.size:
                print(f"[{case}] output size {got.size} vs reference {want.size}")
                ok = False
                continue
            cos = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want) + 1e-30))
            rel = float(np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-30))
            extra = ""
            if a.inspect:
                r = subprocess.run([a.kiln, "inspect", plan], capture_output=True, text=True)
                text = r.stdout
                extra = f"  Transpose {text.count(' (Transpose) ')}  Attention {text.count(' (Attention) ')}"
            passed = cos >= COS_MIN
            ok &= passed
            print(f"[{case}] cosine {cos:.7f}  max_rel {rel:.3g}  {'ok' if passed else 'FAIL'}{extra}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
