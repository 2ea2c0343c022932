#!/usr/bin/python3
"""Scaling report for a folder of `spmd ... --json` summaries (one file per run).

    /usr/bin/python3 tools/scaling_report.py RUNS_FOLDER [--mode strong|weak] [--out DIR]

Writes into the folder (or --out): report.md, report.csv and PNG plots:
  speedup.png                 speed-up against workers (ranks x devices), with the ideal line
  error_vs_iteration.png      logreg: gradient norm per iteration, log scale, one line per layout
  step_time_vs_iteration.png  logreg: seconds per iteration, one line per layout
and prints the table and the average per-step speed-up ignoring setup (the first iteration).

Definitions (W = ranks x devices per rank; the baseline is the run with the fewest workers,
normally 1 rank x 1 device):
  strong scaling (same data for every run): speed-up S = t_base / t, efficiency E = S / (W / W_base)
  weak scaling (data grows with the ranks):  efficiency E = t_base / t, scaled speed-up S = E * W / W_base
where t is the time of one step:
  logreg    mean seconds of the iterations after the first (the first also pays for warm-up);
            solve_seconds / iterations when there is no history
  eval      seconds / steps
  ensemble  batch_size / images_per_second (images per second per member; one step is one
            batch for every member)
"Identical" compares each run's results with a reference run that computed the same thing:
the baseline for strong-scaling eval and logreg (counts; iterations, objective and gradient norm
of every iteration), and for the ensemble the run with the same number of members (parameter
digest, accuracies). Weak-scaling runs see different data, so there it is "n/a".
Needs only the Debian packages python3-numpy and python3-matplotlib.
"""
import argparse
import csv
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only; no display on cluster nodes
import matplotlib.pyplot as plt  # noqa: E402  (after the backend choice)
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402


def fail(message):
    print(f"scaling_report: error: {message}", file=sys.stderr)
    sys.exit(1)


def detect_workload(j):
    if "history" in j and "iterations" in j:
        return "logreg"
    if "epochs" in j and isinstance(j["epochs"], list) and "images_per_second" in j:
        return "ensemble"
    if "correct" in j and "steps" in j:
        return "eval"
    return None


def step_seconds_logreg(j):
    """Seconds per iteration ignoring the first, and the per-iteration times themselves."""
    times = [float(h["seconds"]) for h in j.get("history", [])]
    solve = float(j.get("solve_seconds", 0.0))
    # The history holds each iteration's own time; if a producer ever wrote elapsed time
    # instead, the sum would exceed the solve time by far: take differences then.
    if len(times) > 1 and sum(times) > 1.1 * solve + 1e-3 and all(b >= a for a, b in zip(times, times[1:])):
        times = [times[0]] + [b - a for a, b in zip(times, times[1:])]
    if len(times) >= 2:
        return float(np.mean(times[1:])), times
    iterations = int(j.get("iterations", 0))
    return (solve / iterations if iterations > 0 else None), times


class Run:
    """One run's summary, reduced to what the report compares."""

    def __init__(self, path, j):
        self.path = path
        self.file = os.path.basename(path)
        self.workload = detect_workload(j)
        self.ranks = int(j["ranks"])
        self.devices = int(j.get("devices_per_rank", 1))
        self.workers = self.ranks * self.devices
        self.setup_seconds = None
        self.step_times = []  # per iteration (logreg only)
        self.errors = []  # per iteration (logreg only)
        if self.workload == "logreg":
            self.setup_seconds = j.get("setup_seconds")
            self.seconds_per_step, self.step_times = step_seconds_logreg(j)
            self.steps = int(j["iterations"])
            self.errors = [float(h["error"]) for h in j.get("history", [])]
            self.result_name, self.result = "objective", float(j["value"])
            self.signature = (j.get("status"), self.steps, j["value"], j.get("error"),
                              tuple((h.get("value"), h.get("error")) for h in j.get("history", [])))
            self.same_computation = "all"
        elif self.workload == "eval":
            steps = int(j["steps"])
            self.seconds_per_step = float(j["seconds"]) / steps if steps > 0 else None
            self.steps = steps
            self.result_name, self.result = "accuracy", float(j["accuracy"])
            self.signature = (j["correct"], j["total"])
            self.same_computation = "all"
        elif self.workload == "ensemble":
            epochs = j["epochs"]
            batch = int(j.get("batch_size", 32))
            ips = float(j["images_per_second"])
            self.seconds_per_step = batch / ips if ips > 0 else None
            self.steps = len(epochs)
            self.result_name = "test accuracy"
            self.result = float(epochs[-1]["test_accuracy"]) if epochs else float("nan")
            self.signature = (j.get("params_digest"),
                              tuple((e.get("test_accuracy"), tuple(e.get("member_test_accuracy", []))) for e in epochs))
            # Members = ranks x devices: only runs with as many members computed the same thing.
            self.same_computation = int(j.get("members", self.workers))
        else:
            raise ValueError("not an eval, logreg or ensemble summary")
        self.label = f"{self.ranks} rank{'s' if self.ranks != 1 else ''} x {self.devices} dev"
        self.speedup = self.efficiency = None
        self.identical = "n/a"
        self.rel_diff = None


def load_runs(folder):
    runs, skipped = [], []
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not name.endswith(".json") or name == "study.json" or not os.path.isfile(path):
            continue
        try:
            with open(path) as f:
                j = json.load(f)
            if not isinstance(j, dict) or "ranks" not in j or detect_workload(j) is None:
                skipped.append(f"{name} (not an eval/logreg/ensemble summary)")
                continue
            runs.append(Run(path, j))
        except (OSError, ValueError, KeyError, TypeError) as e:
            skipped.append(f"{name} ({e})")
    return runs, skipped


def analyse(runs, mode):
    """Fills speed-up, efficiency and identity; returns the baseline."""
    base = min(runs, key=lambda r: (r.workers, r.ranks))
    for r in runs:
        scale = r.workers / base.workers
        if r.seconds_per_step and base.seconds_per_step:
            ratio = base.seconds_per_step / r.seconds_per_step
            if mode == "strong":
                r.speedup, r.efficiency = ratio, ratio / scale
            else:
                r.speedup, r.efficiency = ratio * scale, ratio
        if mode == "weak" and r.workload != "ensemble":
            continue  # different data in every run: nothing to compare
        peers = [p for p in runs if p.same_computation == r.same_computation]
        ref = min(peers, key=lambda p: (p.ranks, p.workers))
        if ref is r:
            r.identical = "reference"
        else:
            r.identical = "yes" if r.signature == ref.signature else "no"
        if math.isfinite(r.result) and math.isfinite(ref.result):
            r.rel_diff = abs(r.result - ref.result) / max(abs(ref.result), 1e-300)
    return base


def per_step_speedups(runs, base):
    """The JAXopt example's figure: mean over iterations (the first skipped) of t_base[i] / t[i]."""
    out = []
    for r in runs:
        if r is base:
            continue
        if r.workload == "logreg" and len(r.step_times) > 1 and len(base.step_times) > 1:
            n = min(len(r.step_times), len(base.step_times))
            ratios = [b / t for b, t in zip(base.step_times[1:n], r.step_times[1:n]) if t > 0]
            if ratios:
                out.append((r, float(np.mean(ratios))))
                continue
        if r.seconds_per_step and base.seconds_per_step:
            out.append((r, base.seconds_per_step / r.seconds_per_step))
    return out


def fmt(value, spec):
    return "n/a" if value is None else format(value, spec)


COLUMNS = ["ranks", "devices_per_rank", "workers", "setup_seconds", "seconds_per_step", "steps", "speedup", "efficiency",
           "result_name", "result", "identical", "rel_diff", "file"]


def write_csv(path, runs, workload, mode):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["workload", "mode"] + COLUMNS)
        for r in runs:
            w.writerow([workload, mode, r.ranks, r.devices, r.workers, fmt(r.setup_seconds, ".6g"),
                        fmt(r.seconds_per_step, ".6g"), r.steps, fmt(r.speedup, ".4f"), fmt(r.efficiency, ".4f"),
                        r.result_name, fmt(r.result, ".9g"), r.identical, fmt(r.rel_diff, ".3g"), r.file])


def table_lines(runs, mode):
    speed = "speed-up" if mode == "strong" else "scaled speed-up"
    head = ["ranks", "devices/rank", "workers", "setup (s)", "s/step", "steps", speed, "efficiency",
            runs[0].result_name, "identical", "rel. diff"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * (len(head) - 2) + ":---|---:|"]
    for r in runs:
        lines.append("| " + " | ".join([
            str(r.ranks), str(r.devices), str(r.workers), fmt(r.setup_seconds, ".4f"), fmt(r.seconds_per_step, ".4g"),
            str(r.steps), fmt(r.speedup, ".2f"), fmt(r.efficiency, ".2f"), fmt(r.result, ".6g"), r.identical,
            fmt(r.rel_diff, ".1e")]) + " |")
    return lines


def plot_speedup(path, runs, base, mode, title):
    fig, ax = plt.subplots(figsize=(7, 4.8))
    workers = sorted({r.workers for r in runs})
    ax.plot(workers, [w / base.workers for w in workers], "k--", label="ideal")
    for devices in sorted({r.devices for r in runs}):
        pts = sorted((r.workers, r.speedup) for r in runs if r.devices == devices and r.speedup is not None)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"{devices} device(s) per rank")
            for x, y in pts:
                ax.annotate(f"{y:.2f}", (x, y), textcoords="offset points", xytext=(6, -12), fontsize=9)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(workers, [str(w) for w in workers])
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("workers (ranks x devices per rank)")
    ax.set_ylabel("speed-up" if mode == "strong" else "scaled speed-up (weak)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_iterations(path, runs, values, ylabel, log, title):
    fig, ax = plt.subplots(figsize=(8, 4.9))
    for r in sorted(runs, key=lambda r: (r.workers, r.ranks)):
        ys = values(r)
        if ys:
            ax.plot(range(1, len(ys) + 1), ys, marker=".", label=r.label)
    if log == "auto":  # linear as in the JAXopt example, unless one layout's times dwarf the others'
        positive = [y for r in runs for y in values(r) if y > 0]
        log = bool(positive) and max(positive) / min(positive) > 50
        if log:
            ylabel += " (log scale)"
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", help="folder with one spmd --json summary per run")
    parser.add_argument("--mode", choices=["strong", "weak"],
                        help="strong: same data in every run; weak: data grows with the ranks "
                             "(default: from study.json in the folder, else strong)")
    parser.add_argument("--out", help="where the report goes (default: the folder)")
    args = parser.parse_args()

    if not os.path.isdir(args.folder):
        fail(f"{args.folder} is not a folder")
    study = {}
    study_path = os.path.join(args.folder, "study.json")
    if os.path.isfile(study_path):
        with open(study_path) as f:
            study = json.load(f)
    mode = args.mode or study.get("mode", "strong")
    out = args.out or args.folder
    os.makedirs(out, exist_ok=True)

    runs, skipped = load_runs(args.folder)
    for s in skipped:
        print(f"scaling_report: skipped {s}", file=sys.stderr)
    if not runs:
        fail(f"no eval/logreg/ensemble JSON summaries in {args.folder}")
    workloads = {r.workload for r in runs}
    if len(workloads) != 1:
        fail(f"{args.folder} mixes workloads ({', '.join(sorted(workloads))}); one report per workload")
    workload = workloads.pop()
    runs.sort(key=lambda r: (r.devices, r.ranks))
    base = analyse(runs, mode)
    title = f"spmd {workload}, {mode} scaling"

    write_csv(os.path.join(out, "report.csv"), runs, workload, mode)
    plots = ["speedup.png"]
    plot_speedup(os.path.join(out, "speedup.png"), runs, base, mode, title)
    if workload == "logreg":
        plot_iterations(os.path.join(out, "error_vs_iteration.png"), runs, lambda r: r.errors,
                        "gradient norm (error)", True, title)
        plot_iterations(os.path.join(out, "step_time_vs_iteration.png"), runs, lambda r: r.step_times,
                        "step time (s)", "auto", title)
        plots += ["error_vs_iteration.png", "step_time_vs_iteration.png"]

    speedups = per_step_speedups(runs, base)
    if mode == "strong":
        summary = [f"Average per-step speed-up over {base.label} ignoring setup (first iteration):"]
    else:  # the same ratio t_base / t is the weak-scaling efficiency: 1 is perfect
        summary = [f"Average per-step weak-scaling efficiency (t_base / t) against {base.label} ignoring setup "
                   "(first iteration):"]
    unit = "x" if mode == "strong" else ""
    summary += [f"  {r.label}: {s:.2f}{unit}" for r, s in speedups] or ["  (only one run)"]

    md = [f"# Scaling report: {title}", ""]
    if study:
        md += ["Study: " + ", ".join(f"{k} = {v}" for k, v in study.items()), ""]
        if study.get("oversubscribed"):
            md += ["**Note: more workers than cores on this machine; the timings share cores and say "
                   "little about scaling.**", ""]
    md += [f"Runs: {len(runs)} from `{args.folder}`; baseline {base.label} ({base.file}). "
           f"Workers = ranks x devices per rank.",
           "Strong scaling: speed-up = t_base / t, efficiency = speed-up / (workers / base workers)."
           if mode == "strong" else
           "Weak scaling: efficiency = t_base / t, scaled speed-up = efficiency x workers / base workers.",
           "t = seconds per step (logreg: mean over iterations after the first; eval: seconds / steps; "
           "ensemble: batch / images per second per member).", ""]
    md += table_lines(runs, mode)
    md += ["", "```"] + summary + ["```", ""]
    md += [f"![{p}]({p})" for p in plots]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")

    print("\n".join(table_lines(runs, mode)))
    print("\n".join(summary))
    print(f"scaling_report: wrote {os.path.join(out, 'report.md')}, report.csv and {', '.join(plots)}")


if __name__ == "__main__":
    main()
