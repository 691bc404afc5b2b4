"""PyTorch peers for the ResNet-101 benchmark, measured like kiln_gpu_bench: inputs resident on
the GPU, CUDA-event timing, median and p99 over repeated runs. One JSON object per line.

  python bench/peers/resnet101_peers.py --batch 1,8,64,256 [--compile-batch 1,64] [--iters 100]

Peers: eager FP32 (TF32 off), eager FP16 channels_last, FP16 channels_last replayed as a CUDA
graph, torch.compile(mode="reduce-overhead") FP16 channels_last.
"""
import argparse
import json
import os
import sys
import time

import torch
import torchvision


def timed(fn, iters):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(iters):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ms.append(e0.elapsed_time(e1))
    ms.sort()
    return ms[len(ms) // 2], ms[min(len(ms) - 1, len(ms) * 99 // 100)]


def emit(peer, batch, precision, med, p99, **extra):
    print(json.dumps(dict(peer=peer, batch=batch, precision=precision, median_ms=round(med, 4), p99_ms=round(p99, 4),
                          throughput_per_s=round(batch * 1000.0 / med, 1), **extra)), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", default="1,8,64,256")
    ap.add_argument("--compile-batch", default="1,64")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--photos-npz", help="calibrate BatchNorm exactly as scripts/export_models.py does (same model)")
    ap.add_argument("--agreement-npy", help="N x 3 x 224 x 224 float32 inputs (scripts/photo_inputs.py): PyTorch's own "
                    "FP16 / BF16 top-1 agreement with its FP32 on them, the yardstick for Kiln's")
    a = ap.parse_args()
    batches = [int(b) for b in a.batch.split(",")]
    torch.manual_seed(0)
    if a.photos_npz:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
        import export_models as em
        em.PHOTOS_NPZ = a.photos_npz
        model = em.build_model("resnet101", 0)
        em.calibrate_batchnorm(model, 0, "photos", 2, 4, 224)
        model = model.cuda().eval()
    else:
        model = torchvision.models.resnet101().cuda().eval()
    torch.backends.cudnn.benchmark = True
    with torch.inference_mode():
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        x = torch.randn(1, 3, 224, 224, device="cuda")
        med, p99 = timed(lambda: model(x), a.iters)
        emit("pytorch_eager", 1, "fp32", med, p99)
        # PyTorch's own FP16 error against its FP32 on the same seeded input: the yardstick
        # for Kiln's FP16 error (random weights can make a deep net sensitive to rounding).
        import copy
        ref32 = copy.deepcopy(model)
        xs = torch.randn(8, 3, 224, 224, device="cuda", generator=torch.Generator("cuda").manual_seed(7))
        y32 = ref32(xs).float()
        half = model.half().to(memory_format=torch.channels_last)
        y16 = half(xs.half().to(memory_format=torch.channels_last)).float()
        cos = torch.nn.functional.cosine_similarity(y32.flatten(), y16.flatten(), dim=0).item()
        rel = ((y32 - y16).abs().max() / y32.abs().max()).item()
        top1 = (y32.argmax(1) == y16.argmax(1)).sum().item()
        print(json.dumps(dict(peer="pytorch_fp16_vs_fp32", batch=8, max_abs_err_rel=round(rel, 6), cosine=round(cos, 7),
                              top1_agree=top1)), flush=True)
        if a.agreement_npy:
            import numpy as np
            xa = torch.from_numpy(np.load(a.agreement_npy)).cuda()
            ya32 = torch.cat([ref32(xa[i:i + 25]).float() for i in range(0, xa.shape[0], 25)])
            for name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
                low = copy.deepcopy(ref32).to(dt).to(memory_format=torch.channels_last)
                ya = torch.cat([low(xa[i:i + 25].to(dt).to(memory_format=torch.channels_last)).float()
                                for i in range(0, xa.shape[0], 25)])
                cos = torch.nn.functional.cosine_similarity(ya32, ya, dim=1)
                print(json.dumps(dict(peer="pytorch_agreement", precision=name, inputs=int(xa.shape[0]),
                                      top1_agree=int((ya32.argmax(1) == ya.argmax(1)).sum().item()),
                                      min_cosine=round(cos.min().item(), 6), mean_cosine=round(cos.mean().item(), 7))),
                      flush=True)
                del low
        del ref32
        for b in batches:
            x = torch.randn(b, 3, 224, 224, device="cuda").half().to(memory_format=torch.channels_last)
            med, p99 = timed(lambda: half(x), a.iters)
            emit("pytorch_eager", b, "fp16", med, p99)
            if b <= 64:
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):
                        half(x)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    half(x)
                med, p99 = timed(g.replay, a.iters)
                emit("pytorch_cuda_graph", b, "fp16", med, p99)
    for b in [int(v) for v in a.compile_batch.split(",") if v]:
        compiled = torch.compile(half, mode="reduce-overhead")
        x = torch.randn(b, 3, 224, 224, device="cuda").half().to(memory_format=torch.channels_last)
        t0 = time.time()
        with torch.inference_mode():
            for _ in range(3):
                compiled(x)
            torch.cuda.synchronize()
            compile_s = time.time() - t0
            med, p99 = timed(lambda: compiled(x), a.iters)
        emit("torch_compile_reduce_overhead", b, "fp16", med, p99, compile_s=round(compile_s, 1))
    print(json.dumps(dict(peer="versions", torch=torch.__version__, torchvision=torchvision.__version__,
                          gpu=torch.cuda.get_device_name(0))), flush=True)


if __name__ == "__main__":
    main()
