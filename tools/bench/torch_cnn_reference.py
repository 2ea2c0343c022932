#!/usr/bin/env python3
"""PyTorch reference for bench_cnn: the CNN of Flax's ensembling guide on ONE CPU thread.

Same model as SPMD Kit's CNN (conv 3x3 SAME 1->32, ReLU, avg-pool 2, conv 3x3 SAME
32->64, ReLU, avg-pool 2, dense 3136->256, ReLU, dense 256->10), softmax cross-entropy,
SGD lr 0.1 momentum 0.9. Measures training images/s (batch 32, forward + backward +
optimizer step) and eval images/s (batch 512, forward + softmax under inference_mode),
each the median of several timed runs after a warm-up, for the default NCHW layout and
for channels_last; rates by process CPU time beside them (the cores may be shared). The flatten uses PyTorch's NCHW order: the cost is the same as NHWC.

Needs python3-torch (Debian). Run as:
  /usr/bin/python3 tools/bench/torch_cnn_reference.py [--json] [--runs N]
Environment: OPENBLAS_CORETYPE affects PyTorch's dense layers (Debian's torch calls
OpenBLAS for them); the convolutions go through oneDNN, which picks its own ISA.
"""
import argparse
import json
import os
import statistics
import sys
import time


def build_model(torch):
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
        nn.Flatten(), nn.Linear(3136, 256), nn.ReLU(), nn.Linear(256, 10))


def median_rate(fn, images_per_call, calls_per_run, runs, warmup):
    """(median wall-clock rate, max wall-clock rate, median rate by process CPU time)."""
    for _ in range(warmup):
        fn()
    rates, cpu_rates = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(calls_per_run):
            fn()
        images = images_per_call * calls_per_run
        rates.append(images / (time.perf_counter() - t0))
        cpu_rates.append(images / (time.process_time() - c0))
    return statistics.median(rates), max(rates), statistics.median(cpu_rates)


def measure(torch, channels_last, runs):
    torch.manual_seed(0)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    model = build_model(torch).to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    train_x = torch.rand(32, 1, 28, 28).contiguous(memory_format=fmt)
    train_y = torch.randint(0, 10, (32,))
    eval_x = torch.rand(512, 1, 28, 28).contiguous(memory_format=fmt)

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(train_x), train_y)
        loss.backward()
        opt.step()

    def eval_step():
        with torch.inference_mode():
            torch.softmax(model(eval_x), dim=-1)

    train = median_rate(train_step, 32, 20, runs, 10)
    evaluate = median_rate(eval_step, 512, 3, runs, 2)
    return {"variant": "channels_last" if channels_last else "nchw",
            "train_images_per_s": train[0], "train_images_per_s_max": train[1],
            "train_images_per_s_cpu_time": train[2],
            "eval_images_per_s": evaluate[0], "eval_images_per_s_max": evaluate[1],
            "eval_images_per_s_cpu_time": evaluate[2]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per figure (median reported)")
    args = parser.parse_args()
    # One core means one thread in every pool: torch's own, OpenMP's, and OpenBLAS's (Debian's
    # torch calls OpenBLAS for the dense layers, and OpenBLAS starts a thread per core).
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    try:
        import torch
    except ImportError:
        msg = "PyTorch is not installed (Debian: apt-get install -y python3-torch)"
        print(json.dumps({"error": msg}) if args.json else msg)
        return 2
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    results = [measure(torch, cl, args.runs) for cl in (False, True)]
    info = {"torch": torch.__version__, "threads": torch.get_num_threads(),
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""), "results": results}
    if args.json:
        print(json.dumps(info))
        return 0
    print(f"# PyTorch {info['torch']}, {info['threads']} thread, OPENBLAS_CORETYPE='{info['openblas_coretype']}'")
    print(f"# {'variant':<14} {'train img/s':>12} {'(max)':>10} {'(cpu time)':>12}"
          f" {'eval img/s':>12} {'(max)':>10} {'(cpu time)':>12}")
    for r in results:
        print(f"  {r['variant']:<14} {r['train_images_per_s']:>12.0f} {r['train_images_per_s_max']:>10.0f}"
              f" {r['train_images_per_s_cpu_time']:>12.0f} {r['eval_images_per_s']:>12.0f}"
              f" {r['eval_images_per_s_max']:>10.0f} {r['eval_images_per_s_cpu_time']:>12.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
