"""CUDA-event timing shared by the PyTorch peer scripts in bench/peers (median of `iters` runs)."""
import torch


def time_replays(fn, iters):
    """Median device time (ms) of `fn`, each call alone between two CUDA events, after 10 warm-up calls."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def time_graph(fn, iters):
    """`fn`'s eager ops captured in one CUDA graph (after 3 warm-up calls on a side stream), timed as
    replays (time_replays)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return time_replays(g.replay, iters)
