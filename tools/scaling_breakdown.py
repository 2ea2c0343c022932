"""Where the time of a scaling study went: the per-rank time breakdown of each run
(`time_breakdown` in an spmd --json summary) set against the baseline's, for
tools/scaling_report.py.

A run's categories (compute, communication, io, host_device, other) add up to its total on
every rank; the report uses their means over ranks. The loss of a run is its mean total minus
the ideal total: the baseline's divided by the worker ratio (strong scaling: the same work
spread over more workers) or the baseline's itself (weak scaling: the same work per worker).
Each category's share of the loss is its mean minus the baseline's mean scaled the same way,
so the shares add up to the loss exactly. Waiting for a slower rank is spent inside MPI calls
and so counted as communication; mean(compute) to max(compute) bounds how much of it the
compute imbalance explains. This is the mpiP / IPM view (time in MPI against time outside,
per rank), reduced to one sentence per run.
"""
import matplotlib.pyplot as plt

CATEGORIES = ["compute", "communication", "io", "host_device", "other"]
NAMES = {"compute": "compute", "communication": "communication", "io": "I/O", "host_device": "host<->device copies",
         "other": "other"}
COLOURS = {"compute": "#4c72b0", "communication": "#dd8452", "io": "#55a868", "host_device": "#8172b3",
           "other": "#b0b0b0"}


def cause(category, mode, oversubscribed):
    """Why a category grows beyond its ideal, in the words of a user tuning the run."""
    if category == "communication":
        return "time inside MPI calls, waiting for slower ranks included"
    if category == "compute":
        if oversubscribed:
            return "more workers than cores: ranks share cores, so compute cannot shrink"
        return ("compute per rank shrank less than the work per rank: cores, caches or memory bandwidth are shared"
                if mode == "strong" else
                "the same work per rank took longer: cores, caches or memory bandwidth are shared")
    if category == "io":
        return ("reading did not shrink with the rows per rank: per-rank opens and metadata, collective reads "
                "exchanging data between ranks, the shared file system"
                if mode == "strong" else "reading took longer with more ranks on the same file system")
    if category == "host_device":
        return "host<->device copies do not shrink with the ranks"
    return "set-up and bookkeeping outside the workload's main phases"


def mean(breakdown, category):
    return float(breakdown[category]["mean"])


def ideal_scale(run, base, mode):
    """What the baseline's times are multiplied by to give this run's ideal."""
    return base.workers / run.workers if mode == "strong" else 1.0


def loss_parts(run, base, mode):
    """(total, ideal, {category: excess seconds}) of the run, from the means over ranks."""
    k = ideal_scale(run, base, mode)
    b, t = base.breakdown, run.breakdown
    ideal = mean(b, "total") * k
    parts = {c: mean(t, c) - mean(b, c) * k for c in CATEGORIES if c in t and c in b}
    return mean(t, "total"), ideal, parts


def seconds(value):
    return f"{value:.3g} s" if abs(value) >= 1e-3 else f"{value * 1e3:.3g} ms"


def explain(run, base, mode, cores=None):
    """One sentence (a few clauses) saying why this run's efficiency is what it is. cores: of
    the machine when all ranks share one (an oversubscribed run is said to be one)."""
    if run is base:
        return f"{run.label}: the baseline."
    if not run.breakdown or not base.breakdown:
        missing = run.file if not run.breakdown else base.file
        return f"{run.label}: no time_breakdown in {missing} (made by an spmd older than the breakdown)."
    total, ideal, parts = loss_parts(run, base, mode)
    lost = total - ideal
    efficiency = ideal / total if total > 0 else float("nan")
    ideal_how = (f"the baseline's {seconds(mean(base.breakdown, 'total'))} / {run.workers / base.workers:g}"
                 if mode == "strong" else "the baseline's, the work per worker being the same")
    head = (f"{run.label}: the whole run took {seconds(total)} per rank against an ideal {seconds(ideal)} "
            f"({ideal_how}): run efficiency {efficiency:.2f}.")
    if lost <= 0.02 * ideal:
        faster = sorted((v for v in parts.values() if v < 0))
        return head + (" No loss to explain" + (": compute shrank more than the work per rank (caches)."
                                                if faster and parts.get("compute", 0) < 0 else "."))
    # Shares are of what grew: where another category shrank (an offset), the grown parts add
    # up to more than the loss.
    growth = sum(v for v in parts.values() if v > 0)
    grown = sorted(((v, c) for c, v in parts.items() if v > 0.05 * growth), reverse=True)
    clauses = []
    oversubscribed = cores is not None and run.workers > cores
    if oversubscribed:  # every category then holds time spent waiting for a core
        head += (f" With {run.workers} workers on {cores} cores every category below includes waiting for a core, "
                 "so this run says little about scaling.")
    for v, c in grown:
        clause = f"{NAMES[c]} +{seconds(v)} ({100 * v / growth:.0f}%) — {cause(c, mode, oversubscribed)}"
        if c == "communication":
            compute = run.breakdown["compute"]
            wait = max(0.0, float(compute["max"]) - float(compute["mean"]))
            slowest = run.breakdown.get("slowest_rank")
            host = run.breakdown.get("slowest_host")
            imbalance = run.breakdown.get("load_imbalance")
            if wait > 0.05 * v and slowest is not None:
                clause += (f", up to {seconds(min(wait, v))} of it explained by the compute imbalance "
                           f"(max/mean {imbalance:.2f}, rank {slowest}{' on ' + host if host else ''} the slowest)")
            else:
                clause += ": compute is balanced, so it is the messages themselves (latency and bandwidth)"
        clauses.append(clause)
    shrunk = [(v, c) for c, v in parts.items() if v < -0.05 * growth]
    tail = ""
    if shrunk:
        tail = "; offset by " + ", ".join(f"{NAMES[c]} {seconds(v)}" for v, c in sorted(shrunk))
    lead = NAMES[grown[0][1]] if grown else "no single category"
    if len(grown) > 1 and grown[1][0] > 0.8 * grown[0][0]:  # about as large: name both
        lead += " and " + NAMES[grown[1][1]]
    lost_text = f"of the {seconds(lost)} lost"
    if shrunk:
        lost_text += f" ({seconds(growth)} grew, {seconds(growth - lost)} shrank; shares of what grew)"
    return head + f" Mostly {lead}: {lost_text}, " + "; ".join(clauses) + tail + "."


def plot(path, runs, base, mode, title):
    """Stacked bars: each run's mean seconds per category, with the ideal total marked."""
    shown = [r for r in runs if r.breakdown]
    if not shown:
        return False
    fig, ax = plt.subplots(figsize=(max(8.5, 1.2 * len(shown) + 5), 5.2))
    xs = list(range(len(shown)))
    bottoms = [0.0] * len(shown)
    for c in CATEGORIES:
        heights = [mean(r.breakdown, c) if c in r.breakdown else 0.0 for r in shown]
        if not any(h > 0 for h in heights):
            continue
        ax.bar(xs, heights, bottom=bottoms, color=COLOURS[c], label=NAMES[c], width=0.6)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    if base.breakdown:  # the baseline's own ideal is its top: not marked
        marked = [(x, mean(base.breakdown, "total") * ideal_scale(r, base, mode)) for x, r in zip(xs, shown) if r is not base]
        if marked:
            ax.hlines([m[1] for m in marked], [m[0] - 0.33 for m in marked], [m[0] + 0.33 for m in marked],
                      colors="black", linewidths=2.5, linestyles="dashed", zorder=3,
                      label="ideal total\n(baseline / workers)" if mode == "strong" else "ideal total\n(= baseline)")
    for x, r, top in zip(xs, shown, bottoms):
        share = mean(r.breakdown, "communication") / max(mean(r.breakdown, "total"), 1e-12)
        ax.annotate(f"comm {100 * share:.0f}%", (x, top), textcoords="offset points", xytext=(0, 4),
                    ha="center", fontsize=9)
    ax.set_xticks(xs, [r.label for r in shown], rotation=15 if len(shown) > 4 else 0)
    ax.set_ylabel("seconds per rank (mean over ranks)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_ylim(0, max(bottoms) * 1.18)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
