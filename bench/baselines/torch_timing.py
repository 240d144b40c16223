"""What the PyTorch baselines share: CUDA-event timing of a call and the device-to-device copy rate.

The scripts run as `python3 bench/baselines/<name>.py`, so this folder is on sys.path and they
import it as `from torch_timing import timed, copy_gbps`. The statistics are the C benches'
(bench/bench_util.c): median (the mean of the middle two for an even count) and minimum."""
import statistics

import torch


def event_times(fn, reps, warmup=3, before=None):
    """fn() called `warmup` times, then `reps` times each between two CUDA events (before(), when
    given, runs ahead of each timed call, outside the events): the times in ms."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        if before is not None:
            before()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return times


def timed(fn, reps, warmup=3):
    """fn() called `warmup` times, then `reps` times each between two CUDA events: (median, min) in ms."""
    times = event_times(fn, reps, warmup)
    return statistics.median(times), min(times)


def copy_gbps(reps, nbytes=1 << 30):
    """Device-to-device copy of nbytes: 2 nbytes (read + write) / median time, in GB/s."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(0x5A)
    dst = torch.empty_like(src)
    med, _ = timed(lambda: dst.copy_(src), reps)
    del src, dst
    return 2.0 * nbytes / (med * 1e6)
