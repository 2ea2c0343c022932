#!/usr/bin/python3
"""Scaling report for a folder of `spmd ... --json` summaries (one file per run).

    /usr/bin/python3 tools/scaling_report.py RUNS_FOLDER [--mode strong|weak] [--out DIR]

Writes into the folder (or --out): report.md, report.csv and PNG plots:
  speedup.png                 speed-up against workers (ranks x devices), with the ideal line
  breakdown.png               per run, the mean seconds per rank in compute, communication, I/O,
                              host<->device copies and other, stacked, with the ideal total
  error_vs_iteration.png      logreg: gradient norm per iteration, log scale, one line per layout
  objective_vs_time.png       logreg: objective against elapsed seconds (set-up included)
  step_time_vs_iteration.png  logreg: seconds per iteration, one line per layout
and prints the table, a sentence per run saying where its efficiency went (from the runs'
time_breakdown; see tools/scaling_breakdown.py) and the average per-step speed-up ignoring
setup (the first iteration). Plot titles name the problem and the machine; a curve that
coincides with another (identical results) is drawn dashed and says so in the legend.

Repeats (tools/scaling_study.sh --repeats R: several runs per layout, see
tools/scaling_repeats.py): t is the median over the layout's runs, speed-ups come from the
medians with their min..max ranges (error bars in speedup.png), a speed-up whose range holds 1.0
is "within the noise", and the report states the host's noise (the baseline runs' spread).
For logreg in strong scaling, with the host's read bandwidth in study.json, a line bounds the
2-rank speed-up by memory bandwidth (tools/scaling_bandwidth.py).

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

import scaling_breakdown  # noqa: E402  (tools/, next to this script)
import scaling_bandwidth  # noqa: E402
import scaling_repeats  # noqa: E402


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


def describe_problem(j):
    """The problem's size in a few words, from what the summary says about its data."""
    workload = detect_workload(j)
    data = os.path.basename(str(j.get("data", ""))) if j.get("data") else ""
    if workload == "logreg" and "rows" in j:
        return f"{int(j['rows'])} rows x {int(j.get('features', 0))} features, {int(j.get('classes', 0))} classes"
    if workload == "eval" and "total" in j:
        model = str(j.get("model", "")).split(" ")[0]
        return f"{int(j['total'])} examples" + (f" of {data}" if data else "") + (f", model {model}" if model else "")
    if workload == "ensemble" and isinstance(j.get("train"), dict):
        m = j.get("model", {})
        shape = f" {m['height']}x{m['width']}x{m['channels']}" if {"height", "width", "channels"} <= set(m) else ""
        return (f"{int(j['train'].get('examples', 0))} training and {int(j.get('test', {}).get('examples', 0))} test "
                f"images{shape}, {int(j.get('members', 0))} members")
    return ""


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
        self.values = []  # per iteration (logreg only)
        self.breakdown = j.get("time_breakdown") if isinstance(j.get("time_breakdown"), dict) else None
        self.hosts = sorted({str(row.get("host")) for row in j.get("rank_table", []) if row.get("host")})
        self.device_names = sorted({str(row.get("devices")) for row in j.get("rank_table", []) if row.get("devices")})
        self.problem = describe_problem(j)
        if self.workload == "logreg":
            self.setup_seconds = j.get("setup_seconds")
            self.seconds_per_step, self.step_times = step_seconds_logreg(j)
            self.sizes = {k: j.get(k) for k in ("rows", "features", "evaluations", "iterations")}  # bandwidth model
            self.steps = int(j["iterations"])
            self.errors = [float(h["error"]) for h in j.get("history", [])]
            self.values = [float(h["value"]) for h in j.get("history", [])]
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
        # Every repeat of the layout, the reference's own included, must give the reference's result.
        same = all(p.signature == ref.signature for p in getattr(r, "repeats", [r]))
        if ref is r:
            r.identical = "reference" if same else "reference (its repeats differ)"
        else:
            r.identical = "yes" if same else "no"
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


def summary_lines(runs, base, mode):
    """The speed-ups (strong) or efficiencies (weak) against the baseline, then the host's noise.
    With repeats: from the medians, with ranges and what is within the noise; a single run per
    layout: the JAXopt example's average of per-step ratios."""
    what = "speed-up" if mode == "strong" else "weak-scaling efficiency (t_base / t)"
    if any(scaling_repeats.has_range(r) for r in runs):
        lines = [f"Per-step {what} against {base.label} ignoring setup (first iteration), from the median step "
                 "times of interleaved runs, with the range the runs allow:"]
        lines += [scaling_repeats.summary_line(r, base, mode) for r in runs if r is not base and r.speedup is not None]
        lines += [f"  {w}" for w in scaling_repeats.noise_words(runs, base)]
    else:  # for weak scaling the same ratio t_base / t is the efficiency: 1 is perfect
        lines = [f"Average per-step {what} against {base.label} ignoring setup (first iteration):"]
        unit = "x" if mode == "strong" else ""
        lines += [f"  {r.label}: {s:.2f}{unit}" for r, s in per_step_speedups(runs, base)] or ["  (only one run)"]
    return lines + [scaling_repeats.noise_line(base)]


def fmt(value, spec):
    return "n/a" if value is None else format(value, spec)


COLUMNS = ["ranks", "devices_per_rank", "workers", "setup_seconds", "seconds_per_step", "steps", "speedup", "efficiency",
           "result_name", "result", "identical", "rel_diff", "file"] + [
           f"{c}_mean_seconds" for c in scaling_breakdown.CATEGORIES + ["total"]] + ["load_imbalance", "slowest_rank"] + [
           "repeats", "seconds_per_step_min", "seconds_per_step_max", "speedup_min", "speedup_max", "efficiency_min",
           "efficiency_max", "within_noise"]


def breakdown_cells(r):
    """The run's mean seconds per category, load imbalance and slowest rank ('n/a' without a breakdown)."""
    b = r.breakdown or {}
    cells = [fmt(float(b[c]["mean"]) if c in b else None, ".6g") for c in scaling_breakdown.CATEGORIES + ["total"]]
    return cells + [fmt(b.get("load_imbalance"), ".4f"), str(b.get("slowest_rank", "n/a"))]


def communication_share(r):
    b = r.breakdown
    if not b or "communication" not in b or float(b["total"]["mean"]) <= 0:
        return None
    return 100.0 * float(b["communication"]["mean"]) / float(b["total"]["mean"])


def write_csv(path, runs, workload, mode):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["workload", "mode"] + COLUMNS)
        for r in runs:
            w.writerow([workload, mode, r.ranks, r.devices, r.workers, fmt(r.setup_seconds, ".6g"),
                        fmt(r.seconds_per_step, ".6g"), r.steps, fmt(r.speedup, ".4f"), fmt(r.efficiency, ".4f"),
                        r.result_name, fmt(r.result, ".9g"), r.identical, fmt(r.rel_diff, ".3g"), r.file]
                       + breakdown_cells(r) + repeat_cells(r))


def repeat_cells(r):
    """Runs of the layout; ranges only where there were repeats (R = 1: n/a)."""
    ranged = scaling_repeats.has_range(r)
    return [len(r.repeats), fmt(r.step_min if ranged else None, ".6g"), fmt(r.step_max if ranged else None, ".6g"),
            fmt(r.speedup_min, ".4f"), fmt(r.speedup_max, ".4f"), fmt(r.efficiency_min, ".4f"),
            fmt(r.efficiency_max, ".4f"), r.within_noise]


def table_lines(runs, mode):
    speed = "speed-up" if mode == "strong" else "scaled speed-up"
    head = ["ranks", "devices/rank", "workers", "setup (s)", "s/step", "steps", speed, "efficiency",
            runs[0].result_name, "identical", "rel. diff", "comm (% of run)", "imbalance", "runs"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * (len(head) - 5) + ":---|---:|---:|---:|---:|"]
    for r in runs:
        ranged = scaling_repeats.has_range(r)
        speedup = scaling_repeats.spread(r.speedup, r.speedup_min, r.speedup_max, ".2f")
        lines.append("| " + " | ".join([
            str(r.ranks), str(r.devices), str(r.workers), fmt(r.setup_seconds, ".4f"),
            scaling_repeats.spread(r.seconds_per_step, r.step_min if ranged else None, r.step_max, ".4g"),
            str(r.steps), speedup + (" within the noise" if r.within_noise == "yes" else ""),
            fmt(r.efficiency, ".2f"), fmt(r.result, ".6g"), r.identical,
            fmt(r.rel_diff, ".1e"), fmt(communication_share(r), ".0f"),
            fmt((r.breakdown or {}).get("load_imbalance"), ".2f"), str(len(r.repeats))]) + " |")
    return lines


def plot_speedup(path, runs, base, mode, title):
    fig, ax = plt.subplots(figsize=(7, 4.8))
    workers = sorted({r.workers for r in runs})
    ax.plot(workers, [w / base.workers for w in workers], "k--", label="ideal")
    for devices in sorted({r.devices for r in runs}):
        pts = sorted((r.workers, r.speedup, r.speedup_min, r.speedup_max, r.within_noise == "yes") for r in runs
                     if r.devices == devices and r.speedup is not None)
        if pts:
            # Error bars: the range the repeats allow (none for a single run or the baseline).
            below = [p[1] - p[2] if p[2] is not None else 0.0 for p in pts]
            above = [p[3] - p[1] if p[3] is not None else 0.0 for p in pts]
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[below, above], fmt="o-", capsize=4,
                        label=f"{devices} device(s) per rank" + (" (min..max of the repeats)" if any(above) else ""))
            for x, y, _, _, noise in pts:
                ax.annotate(f"{y:.2f}" + (" within the noise" if noise else ""), (x, y), textcoords="offset points",
                            xytext=(6, -12), fontsize=9)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(workers, [str(w) for w in workers])
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("workers (ranks x devices per rank)")
    ax.set_ylabel("speed-up" if mode == "strong" else "scaled speed-up (weak)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_curves(path, runs, points, xlabel, ylabel, log, title, x_from_zero=False):
    """One line per layout; points(run) gives (xs, ys). A curve equal to one drawn before it
    (identical runs) would hide under it: it is drawn dashed with hollow markers and its
    legend entry says which curve it coincides with. Returns those pairs."""
    fig, ax = plt.subplots(figsize=(8, 4.9))
    drawn, coincide = [], []
    for r in sorted(runs, key=lambda r: (r.workers, r.ranks)):
        xs, ys = points(r)
        if not ys:
            continue
        same = next((d for d, dxs, dys in drawn if dxs == xs and dys == ys), None)
        if same is None:
            ax.plot(xs, ys, marker=".", label=r.label)
        else:
            coincide.append((r, same))
            ax.plot(xs, ys, linestyle="--", marker="o", markerfacecolor="none", markersize=7,
                    label=f"{r.label} (coincides with {same.label})")
        drawn.append((r, xs, ys))
    if log == "auto":  # linear as in the JAXopt example, unless one layout's values dwarf the others'
        positive = [y for _, _, ys in drawn for y in ys if y > 0]
        log = bool(positive) and max(positive) / min(positive) > 50
        if log:
            ylabel += " (log scale)"
    if log:
        ax.set_yscale("log")
    if x_from_zero:
        ax.set_xlim(left=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return coincide


def per_iteration(values):
    return lambda r: (list(range(1, len(values(r)) + 1)), values(r))


def objective_over_time(r):
    """Objective after each iteration against seconds since the start of the run's set-up."""
    elapsed = float(r.setup_seconds or 0.0) + np.cumsum(r.step_times)
    return [float(t) for t in elapsed], r.values[:len(r.step_times)]


def machine_words(study, runs):
    """Where the study ran, for plot titles: host(s), CPU or GPU, cores, emulated nodes and link."""
    hosts = sorted({h for r in runs for h in r.hosts})
    devices = sorted({d.split("(", 1)[1].rstrip(")") for r in runs for d in r.device_names if "(" in d})
    what = ", ".join(devices)
    if study.get("nodes"):
        link = study.get("link_measured") or {}
        measured = (f": RTT {link['rtt_us_median']:.0f} us, {link['mbit_per_s']:.0f} Mbit/s"
                    if {"rtt_us_median", "mbit_per_s"} <= set(link) else "")
        return (f"{study['nodes']} emulated nodes on host {study.get('host', '?')}"
                f" ({study.get('interconnect', 'native')} link{measured}; {what}, {study.get('host_cores', '?')} cores)")
    where = study.get("host") or ", ".join(hosts) or "?"
    cores = f", {study['host_cores']} cores" if "host_cores" in study else ""
    return f"host {where}" + (f" ({what}{cores})" if what or cores else "")


def problem_words(runs, base, workload, mode):
    if workload == "ensemble":  # more ranks, more members on the same data: name the largest
        return max(runs, key=lambda r: r.workers).problem
    if mode == "weak" and base.problem:
        return f"{base.problem} per worker" if base.workers == 1 else f"{base.problem} per {base.workers} workers"
    return base.problem


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
    runs = scaling_repeats.group(runs)
    runs.sort(key=lambda r: (r.devices, r.ranks))
    base = analyse(runs, mode)
    scaling_repeats.fill_ranges(runs, base, mode)
    title = (f"spmd {workload}, {mode} scaling: {problem_words(runs, base, workload, mode) or 'problem size unknown'}\n"
             f"{machine_words(study, runs)}")

    write_csv(os.path.join(out, "report.csv"), runs, workload, mode)
    plots = ["speedup.png"]
    plot_speedup(os.path.join(out, "speedup.png"), runs, base, mode, title)
    if scaling_breakdown.plot(os.path.join(out, "breakdown.png"), runs, base, mode, title):
        plots.append("breakdown.png")
    coincide = []
    if workload == "logreg":
        coincide += [(a, b, "error_vs_iteration.png") for a, b in plot_curves(
            os.path.join(out, "error_vs_iteration.png"), runs, per_iteration(lambda r: r.errors), "iteration",
            "gradient norm (error)", True, title)]
        plot_curves(os.path.join(out, "objective_vs_time.png"), runs, objective_over_time,
                    "seconds since the start (set-up, then iterations)", "objective", False, title,
                    x_from_zero=True)
        plot_curves(os.path.join(out, "step_time_vs_iteration.png"), runs, per_iteration(lambda r: r.step_times),
                    "iteration", "step time (s)", "auto", title)
        plots += ["error_vs_iteration.png", "objective_vs_time.png", "step_time_vs_iteration.png"]
    # Ranks on this machine share its cores, emulated nodes (tools/cluster/) included; in a
    # Slurm job (srun) they are on nodes of their own.
    cores = study.get("host_cores") if study.get("launch") != "srun" else None
    explanations = ["Where the efficiency went (whole run, means over ranks; time_breakdown of each summary):"]
    explanations += ["  " + scaling_breakdown.explain(r, base, mode, cores) for r in runs if r is not base]
    if len(explanations) == 1:
        explanations.append("  (only one run)")
    if coincide:
        explanations += ["Curves that coincide (identical values, drawn dashed): "
                         + "; ".join(f"{a.label} = {b.label} in {p}" for a, b, p in coincide)]

    summary = summary_lines(runs, base, mode)
    bandwidth = scaling_bandwidth.model_line(runs, base, study) if mode == "strong" else None
    summary += [bandwidth] if bandwidth else []

    md = [f"# Scaling report: {title.replace(chr(10), '; ')}", ""]
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
    md += ["", "```"] + summary + ["```", ""] + [explanations[0], ""] + [f"- {e.strip()}" for e in explanations[1:]] + [""]
    md += [f"![{p}]({p})" for p in plots]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")

    print("\n".join(table_lines(runs, mode)))
    print("\n".join(summary))
    print("\n".join(explanations))
    print(f"scaling_report: wrote {os.path.join(out, 'report.md')}, report.csv and {', '.join(plots)}")


if __name__ == "__main__":
    main()
