#!/usr/bin/env python3
"""The GPU record, gpu-results.json: written only by the device scripts and the programs they run.

tools/device/run.sh calls this after each step, so that a call cut short still leaves a
record of what ran. Standard library only: it runs under whichever python3 the machine has.

  record.py start FILE                      create FILE if absent; print the call's start (epoch s)
  record.py step FILE NAME STATUS SECONDS RC [NOTE]
  record.py put FILE KEY[.KEY...] JSON      set a value (JSON text) at a dotted path
  record.py take FILE KEY[.KEY...] SRC FIELD  copy SRC's FIELD (a JSON file a program wrote)
  record.py gtest FILE PREFIX GTEST_JSON    PREFIX_passed/_failed/_skipped from --gtest_output=json
  record.py sanitizer FILE TOOL LOG         sanitizer_errors.TOOL from "ERROR SUMMARY: N errors"
  record.py bench FILE BENCH_JSON           logreg_* figures from bench_gpu_logreg --json
  record.py merge_into FILE SRC_JSON        SRC's keys into the record (jax_peers.py --out)
  record.py merge OUT_DIR RECORD...         several calls' records as one, named
                                            gpu-<device>-<date>.json in OUT_DIR (tools/bench/results)
  record.py summary FILE                    one line per step, then the figures
"""
import datetime
import json
import os
import re
import sys
import time

STATUSES = ("ok", "fail", "timeout", "skip", "deadline")


def load(path):
    with open(path) as f:
        return json.load(f)


def save(path, record):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def update(path, change):
    """Applies change(record) to the record at path, creating it when absent."""
    record = load(path) if os.path.exists(path) else new_record()
    change(record)
    save(path, record)


def new_record():
    return {"schema": 1, "call_started": time.time(), "steps": {}, "step_order": []}


def set_path(record, dotted, value):
    keys = dotted.split(".")
    node = record
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = value


def cmd_start(path):
    if not os.path.exists(path):
        save(path, new_record())
    print(int(load(path)["call_started"]))


def cmd_step(path, name, status, seconds, rc, note=""):
    if status not in STATUSES:
        sys.exit(f"record.py: step status must be one of {', '.join(STATUSES)} (got '{status}')")

    def change(r):
        r["steps"][name] = {"status": status, "seconds": round(float(seconds), 3), "rc": int(rc)}
        if note:
            r["steps"][name]["note"] = note
        if name not in r["step_order"]:
            r["step_order"].append(name)
    update(path, change)


def cmd_put(path, dotted, value):
    update(path, lambda r: set_path(r, dotted, json.loads(value)))


def cmd_take(path, dotted, source, field):
    value = load(source)
    for k in field.split("."):  # a list's entries by index: epochs.-1 is the last epoch
        value = value[int(k)] if isinstance(value, list) else value[k]
    update(path, lambda r: set_path(r, dotted, value))


def cmd_gtest(path, prefix, gtest_json):
    g = load(gtest_json)
    cases = [t for suite in g.get("testsuites", []) for t in suite.get("testsuite", [])]
    skipped = sum(1 for t in cases if t.get("result") == "SKIPPED")
    failed = sum(1 for t in cases if "failures" in t)
    passed = len(cases) - skipped - failed

    def change(r):
        r[prefix + "_passed"], r[prefix + "_failed"], r[prefix + "_skipped"] = passed, failed, skipped
        if failed:
            r[prefix + "_failures"] = [t["classname"] + "." + t["name"] for t in cases if "failures" in t]
    update(path, change)
    print(f"{prefix}: {passed} passed, {failed} failed, {skipped} skipped")


def cmd_sanitizer(path, tool, log):
    """Records the error count; exits 1 unless the log says 0 errors (no summary is a failure).
    racecheck ends with its own line, "RACECHECK SUMMARY: N hazards displayed (E errors, W
    warnings)": its errors and warnings both count."""
    with open(log, errors="replace") as f:
        text = f.read()
    found = [int(n) for n in re.findall(r"ERROR SUMMARY: (\d+) error", text)]
    found += [int(e) + int(w) for e, w in re.findall(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)", text)]
    errors = found[-1] if found else None
    update(path, lambda r: set_path(r, "sanitizer_errors." + tool, errors))
    print(f"{tool}: " + ("no ERROR SUMMARY (or RACECHECK SUMMARY) line" if errors is None else f"{errors} errors"))
    sys.exit(0 if errors == 0 else 1)


def cmd_bench(path, bench_json):
    b = load(bench_json)

    def change(r):
        if "skipped" in b:
            r["logreg_bench_skipped"] = b["skipped"]
            return
        r["copy_bandwidth_gb_s"] = b["copy_bandwidth_gb_s"]
        for s in b["sizes"]:
            size = f"{s['rows']}x{s['features']}x{s['classes']}"
            set_path(r, "logreg_ms_per_eval." + size, s["ms_per_eval"])
            set_path(r, "logreg_floor_ms." + size, s["floor_ms"])
            set_path(r, "logreg_ratio_to_floor." + size, s["ratio_to_floor"])
            set_path(r, "logreg_pcie_mb_per_eval." + size, s["pcie_mb_per_eval"])
    update(path, change)


def cmd_merge_into(path, source):
    """A program's own JSON (jax_peers.py --out) into the record, key by key."""
    extra = load(source)
    update(path, lambda r: r.update(extra))


def merged(records):
    """Later records win key by key; steps keep every call's, in call order."""
    out = {"schema": 1, "calls": [], "steps": {}, "step_order": []}
    for rec in sorted(records, key=lambda r: r.get("call_started", 0)):
        out["calls"].append({k: rec.get(k) for k in ("call_started", "device", "driver", "parts")})
        for k, v in rec.items():
            if k in ("steps", "step_order", "call_started", "parts"):
                continue
            if isinstance(v, dict) and isinstance(out.get(k), dict):
                out[k].update(v)
            else:
                out[k] = v
        for name in rec.get("step_order", []):
            out["steps"][name] = rec["steps"][name]
            if name not in out["step_order"]:
                out["step_order"].append(name)
    return out


def cmd_merge(out_dir, *paths):
    rec = merged([load(p) for p in paths])
    device = re.sub(r"[^A-Za-z0-9]+", "-", str(rec.get("device") or "unknown")).strip("-").lower()
    day = datetime.date.fromtimestamp(rec["calls"][0]["call_started"] or 0).isoformat()
    target = os.path.join(out_dir, f"gpu-{device}-{day}.json")
    save(target, rec)
    print(target)


def cmd_summary(path):
    r = load(path)
    for name in r["step_order"]:
        s = r["steps"][name]
        print(f"  {s['status']:8s} {s['seconds']:8.1f} s  {name}" + (f"  ({s['note']})" if s.get("note") else ""))
    figures = {k: v for k, v in r.items() if k not in ("steps", "step_order", "schema")}
    print(json.dumps(figures, sort_keys=True))


COMMANDS = {"start": cmd_start, "step": cmd_step, "put": cmd_put, "take": cmd_take, "gtest": cmd_gtest,
            "sanitizer": cmd_sanitizer, "bench": cmd_bench, "merge_into": cmd_merge_into, "merge": cmd_merge, "summary": cmd_summary}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]](*sys.argv[2:])
