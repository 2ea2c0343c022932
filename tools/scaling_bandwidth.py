#!/usr/bin/python3
"""What memory bandwidth allows a logreg speed-up, for tools/scaling_report.py, and the probe
that measures the host's read bandwidth (tools/scaling_study.sh runs it once per study).

    /usr/bin/python3 tools/scaling_bandwidth.py [--mib N]   # prints {"1": GB/s, "2": GB/s}

Model: every objective evaluation of spmd logreg reads its shard of X (rows x features float32)
once, so an iteration reads X (evaluations / iterations) times, split over the ranks. The
1-rank run's step time gives the rate at which one rank reads X (a lower bound on the kernel's:
the step also holds the solver's own work). On 2 ranks the two share the host's memory: they
cannot together read faster than the host's 2-thread bandwidth, so the speed-up is at most
bandwidth(2 threads) / rate(1 rank), and at most 2. Where that bound is below 2, memory
bandwidth holds the speed-up below the ideal; where not, the loss is elsewhere (communication,
shared cores: the report's breakdown).

The probe: 1, then 2 processes at once, each summing its own array of --mib MiB (larger than
the caches) a few times; the bandwidth is the bytes read over the slowest reader's best time.
"""
import argparse
import json
import multiprocessing
import time

import numpy as np

FLOAT32_BYTES = 4


def reader(mib, barrier, results):
    x = np.ones(mib * 2**20 // FLOAT32_BYTES, dtype=np.float32)
    x.sum()  # pages touched before the clock starts
    barrier.wait()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - start)
    results.put(best)


def probe(threads, mib):
    """GB/s read by `threads` processes together."""
    barrier, results = multiprocessing.Barrier(threads), multiprocessing.Queue()
    procs = [multiprocessing.Process(target=reader, args=(mib, barrier, results)) for _ in range(threads)]
    for p in procs:
        p.start()
    times = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    return threads * mib * 2**20 / max(times) / 1e9


def model_line(runs, base, study):
    """The bandwidth bound on the 2-rank logreg speed-up, in words; None without the inputs."""
    bandwidth = study.get("read_gbps") or {}
    two = next((r for r in runs if r.workers == 2 and r.devices == 1), None)
    size = getattr(base, "sizes", {})
    if (base.workload != "logreg" or base.workers != 1 or two is None or not {"1", "2"} <= set(bandwidth)
            or not all(size.get(k) for k in ("rows", "features", "evaluations", "iterations"))
            or not base.seconds_per_step or two.speedup is None):
        return None
    x_bytes = size["rows"] * size["features"] * FLOAT32_BYTES
    reads = size["evaluations"] / size["iterations"]
    rate = reads * x_bytes / base.seconds_per_step / 1e9
    one_bw, two_bw = float(bandwidth["1"]), float(bandwidth["2"])
    bound = two_bw / rate
    words = (f"Bandwidth model: an iteration reads X ({size['rows']} x {size['features']} float32, "
             f"{x_bytes / 1e6:.0f} MB) {reads:.2f} times (evaluations / iterations); 1 rank read it at {rate:.3g} GB/s, "
             f"{100 * rate / one_bw:.0f}% of the host's 1-thread read bandwidth ({one_bw:.3g} GB/s); 2 threads read "
             f"{two_bw:.3g} GB/s together, ")
    if bound < 2:
        return words + (f"so memory bandwidth holds 2 ranks at or below {bound:.2f}x "
                        f"({two_bw:.3g} / {rate:.3g}); measured {two.speedup:.2f}x.")
    return words + (f"enough for {bound:.2f}x: memory bandwidth does not hold 2 ranks below 2x "
                    f"(measured {two.speedup:.2f}x: see where the time went).")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=256, help="array per reader, MiB (default 256)")
    args = parser.parse_args()
    print(json.dumps({str(t): round(probe(t, args.mib), 3) for t in (1, 2)}))


if __name__ == "__main__":
    main()
