"""Repeated runs of a scaling study (tools/scaling_study.sh --repeats R), for
tools/scaling_report.py: the runs of each layout (ranks x devices per rank) reduced to the
median step time with its min..max range, and speed-ups with their ranges.

A shared or virtual host moves its cores between placements: one run per layout can give
1.08x one minute and 2.15x the next. With R runs per layout, interleaved so that a slow
spell hits every layout alike:
  t          median of the layout's step times; min..max their range
  ratio      t_base / t (the strong speed-up, the weak efficiency), from the medians
  its range  min(t_base) / max(t) .. max(t_base) / min(t): the extremes the runs allow
A ratio whose range holds 1.0 is within the noise: the runs cannot tell the layout from the
baseline. Two layouts whose ranges overlap are within the noise of each other. The host's
noise is the baseline's spread, (max - min) / median of its runs. A folder with one run per
layout has no ranges (n/a), as before repeats existed.
"""
import statistics


def group(runs):
    """One run per layout, the one with the median step time (the lower of the two middle ones
    for an even count), standing for the layout: its seconds_per_step becomes the layout's
    median, and it carries repeats (all the layout's runs), step_min and step_max."""
    layouts = {}
    for r in runs:
        layouts.setdefault((r.ranks, r.devices), []).append(r)
    chosen = []
    for members in layouts.values():
        timed = sorted((r for r in members if r.seconds_per_step), key=lambda r: r.seconds_per_step)
        times = [r.seconds_per_step for r in timed]
        rep = timed[(len(timed) - 1) // 2] if timed else members[0]
        rep.repeats = sorted(members, key=lambda r: r.file)
        rep.timed = len(times)
        rep.step_min = min(times) if times else None
        rep.step_max = max(times) if times else None
        rep.seconds_per_step = statistics.median(times) if times else None
        chosen.append(rep)
    return chosen


def has_range(run):
    return getattr(run, "timed", 1) > 1


def fill_ranges(runs, base, mode):
    """Sets speedup_min/max, efficiency_min/max and within_noise ('yes', 'no' or 'n/a': the
    baseline itself, or no repeats on either side) of every run against the baseline."""
    for r in runs:
        r.speedup_min = r.speedup_max = r.efficiency_min = r.efficiency_max = None
        r.within_noise = "n/a"
        if r is base or not (has_range(r) or has_range(base)) or not (r.step_min and base.step_min):
            continue
        low, high = base.step_min / r.step_max, base.step_max / r.step_min
        scale = r.workers / base.workers
        if mode == "strong":
            r.speedup_min, r.speedup_max, r.efficiency_min, r.efficiency_max = low, high, low / scale, high / scale
        else:
            r.speedup_min, r.speedup_max, r.efficiency_min, r.efficiency_max = low * scale, high * scale, low, high
        r.within_noise = "yes" if low <= 1.0 <= high else "no"


def overlapping(runs, base):
    """Pairs of layouts (not the baseline) whose speed-up ranges overlap."""
    ranged = [r for r in runs if r is not base and r.speedup_min is not None]
    return [(a, b) for i, a in enumerate(ranged) for b in ranged[i + 1:]
            if a.speedup_min <= b.speedup_max and b.speedup_min <= a.speedup_max]


def spread(value, low, high, spec):
    """'value' or 'value (low..high)' when there is a range."""
    if value is None:
        return "n/a"
    return format(value, spec) + (f" ({format(low, spec)}..{format(high, spec)})" if low is not None else "")


def milliseconds(seconds):
    return f"{seconds * 1e3:.3g} ms"


def noise_line(base):
    """The host's noise as this study saw it: the spread of the baseline's runs."""
    if not has_range(base):
        return (f"Host noise: not measured (one run of {base.label}; tools/scaling_study.sh --repeats R "
                "runs each layout R times and measures it).")
    width = (base.step_max - base.step_min) / base.seconds_per_step
    return (f"Host noise: the {base.timed} runs of {base.label} took {milliseconds(base.step_min)}.."
            f"{milliseconds(base.step_max)} per step (median {milliseconds(base.seconds_per_step)}): "
            f"a spread of {100 * width:.0f}% ((max - min) / median).")


def summary_line(r, base, mode):
    """One layout's ratio against the baseline, from the medians, with its range and verdict."""
    unit = "x" if mode == "strong" else ""
    value, low, high = ((r.speedup, r.speedup_min, r.speedup_max) if mode == "strong"
                        else (r.efficiency, r.efficiency_min, r.efficiency_max))
    verdict = (f"; within the noise: the range holds 1.0, no measurable difference from {base.label}"
               if r.within_noise == "yes" else "")
    return (f"  {r.label}: {value:.2f}{unit} (range {low:.2f}..{high:.2f}{unit}; median of {r.timed} runs"
            f"{verdict})")


def noise_words(runs, base):
    """Sentences for the layouts within the noise of each other."""
    return [f"{a.label} and {b.label}: within the noise of each other (their speed-up ranges overlap)"
            for a, b in overlapping(runs, base)]
