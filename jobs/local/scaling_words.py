#!/usr/bin/python3
"""The demo's sentence on a 1-rank against 2-rank scaling study (tools/scaling_study.sh
--ranks "1 2"), from its report.csv: the median step times with their min..max over the
repeated runs, the speed-up (strong) or efficiency (weak) from the medians with its range,
whether that is within the noise, and the host's noise (the 1-rank runs' spread). Every
sentence about speed in the demo comes from here, so two sections cannot disagree.

    /usr/bin/python3 jobs/local/scaling_words.py STUDY_MODE_FOLDER   # e.g. runs/demo/scaling-logreg/strong
"""
import csv
import os
import sys

STEP = {"logreg": "an iteration (the first ignored)", "ensemble": "a training step (one batch per member)", "eval": "a batch"}


def rows(folder):
    """report.csv's rows for 1 and 2 ranks (one device each), by rank count."""
    with open(os.path.join(folder, "report.csv")) as f:
        found = {int(r["ranks"]): r for r in csv.DictReader(f) if r["devices_per_rank"] == "1"}
    if 1 not in found or 2 not in found:
        sys.exit(f"scaling_words: error: {folder}/report.csv lacks the 1-rank or the 2-rank row")
    return found[1], found[2]


def ms(row, column):
    return f"{1e3 * float(row[column]):.3g}"


def timed(row, who):
    """'11.2 ms on 1 rank (10.9..11.8 ms over 3 runs)'; no range for a single run."""
    spread = (f" ({ms(row, 'seconds_per_step_min')}..{ms(row, 'seconds_per_step_max')} ms over {row['repeats']} runs)"
              if row["seconds_per_step_min"] != "n/a" else "")
    return f"{ms(row, 'seconds_per_step')} ms {who}{spread}"


def sentence(folder):
    one, two = rows(folder)
    workload, mode = one["workload"], one["mode"]
    if mode == "strong":
        figure, column, unit = "speed-up", "speedup", "x"
        who = ("on 1 rank", "on 2")
    else:
        figure, column, unit = "weak-scaling efficiency (1 is perfect)", "efficiency", ""
        who = ("with 1 member on 1 rank", "per member with 2 on 2 ranks")
    words = (f"{STEP.get(workload, 'a step')} takes {timed(one, who[0])} and {timed(two, who[1])}: "
             f"{figure} {float(two[column]):.2f}{unit}")
    if two[f"{column}_min"] == "n/a":
        return words + " (one run each: no range, the host's noise unknown)"
    words += f" (range {float(two[column + '_min']):.2f}..{float(two[column + '_max']):.2f}{unit}"
    words += ", within the noise)" if two["within_noise"] == "yes" else ", beyond the noise)"
    noise = (float(one["seconds_per_step_max"]) - float(one["seconds_per_step_min"])) / float(one["seconds_per_step"])
    return words + f"; the host's noise, the spread of the 1-rank runs, is {100 * noise:.0f}%"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    print(sentence(sys.argv[1]))
