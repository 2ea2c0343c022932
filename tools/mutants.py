#!/usr/bin/env python3
"""Mutation testing for SPMD Kit (tools/mutants.sh runs this; see tests/README.md).

Each mutant in the list (tools/mutants.txt) names a file, an exact snippet of its code, the
replacement, and the ctest regex of the tests that should catch it. Mutants are found by
their code, never by line numbers, so the list survives edits around them; a snippet that is
not in the file (or is there twice) is reported as an error: the list is stale.

The mutants run one at a time in a scratch copy of the working tree (tracked and untracked,
not ignored, files: local edits included) with its own build folder, configured once and
rebuilt incrementally (ccache when present). Before the mutants, the named tests run once on
the unmutated copy: a test that already fails there would "kill" every mutant.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
}


@dataclass
class Mutant:
    name: str
    where: int  # line of the list where it starts, for messages
    file: str = ""
    tests: str = ""
    before: list = field(default_factory=list)
    after: list = field(default_factory=list)


def parse_list(path):
    """The list's format: blocks that open with '=== NAME', then 'file: PATH', 'tests: REGEX',
    a '--- before' line followed by the original lines, a '+++ after' line followed by the
    replacement. Lines that start with '# ' (or are '#') are comments anywhere, so a snippet
    cannot start a line that way ('#include' and the like are code); trailing blank lines of
    a snippet are dropped."""
    mutants, current, target = [], None, None
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if line == "#" or line.startswith("# "):
                continue
            if line.startswith("=== "):
                current = Mutant(name=line[4:].strip(), where=number)
                mutants.append(current)
                target = None
            elif current is None or (target is None and (not line.strip() or line.startswith("#"))):
                if line.strip() and not line.startswith("#"):
                    sys.exit(f"{path}:{number}: text outside a mutant block: {line!r}")
            elif line == "--- before":
                target = current.before
            elif line == "+++ after":
                target = current.after
            elif target is None and line.startswith("file:"):
                current.file = line[5:].strip()
            elif target is None and line.startswith("tests:"):
                current.tests = line[6:].strip()
            elif target is not None:
                target.append(line)
            else:
                sys.exit(f"{path}:{number}: expected file:, tests:, '--- before' or '+++ after', got {line!r}")
    for m in mutants:
        for lines in (m.before, m.after):
            while lines and not lines[-1].strip():
                lines.pop()
        missing = [k for k in ("file", "tests", "before") if not getattr(m, k)]
        if missing:
            sys.exit(f"{path}:{m.where}: mutant '{m.name}' lacks {', '.join(missing)}")
        if m.before == m.after:
            sys.exit(f"{path}:{m.where}: mutant '{m.name}' changes nothing")
    names = [m.name for m in mutants]
    dups = {n for n in names if names.count(n) > 1}
    if dups:
        sys.exit(f"{path}: mutant names used twice: {', '.join(sorted(dups))}")
    return mutants


def run(cmd, cwd, timeout=None, env=None):
    full_env = dict(os.environ, **TEST_ENV, **(env or {}))
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, env=full_env, errors="replace")
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return 124, out


def sync_tree(scratch):
    """Copies the working tree's files into scratch/src, keeping modification times so that
    ninja rebuilds only what changed since the last run."""
    files = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                           stdout=subprocess.PIPE).stdout.split(b"\0")
    src = os.path.join(scratch, "src")
    wanted = set()
    for rel in filter(None, (f.decode() for f in files)):
        a, b = os.path.join(ROOT, rel), os.path.join(src, rel)
        if not os.path.isfile(a) or os.path.islink(a):
            continue
        wanted.add(rel)
        if os.path.exists(b) and open(a, "rb").read() == open(b, "rb").read():
            continue
        os.makedirs(os.path.dirname(b), exist_ok=True)
        shutil.copy2(a, b)
    # Peers installed into the tree, ignored by git, that tests look for there: ONNX Runtime's
    # npm package (without it cli.onnx_opsets skips its node tests and lets their mutants live).
    for rel in ("tools/onnx/node_modules",):
        a, b = os.path.join(ROOT, rel), os.path.join(src, rel)
        if os.path.isdir(a) and not os.path.lexists(b):
            os.makedirs(os.path.dirname(b), exist_ok=True)
            os.symlink(a, b)
    for dirpath, dirnames, filenames in os.walk(src):
        if os.path.abspath(dirpath) == os.path.abspath(src):
            dirnames[:] = [d for d in dirnames if d != "build" and d != ".git"]
        for name in filenames:
            rel = os.path.relpath(os.path.join(dirpath, name), src)
            if rel not in wanted:
                os.remove(os.path.join(dirpath, name))
    return src


def configure(src, build):
    if os.path.exists(os.path.join(build, "build.ninja")):
        return
    args = ["cmake", "-S", src, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"]
    if shutil.which("ccache"):
        args += [f"-DCMAKE_{lang}_COMPILER_LAUNCHER=ccache" for lang in ("C", "CXX", "CUDA")]
    args += ["-DSPMD_MUTANT_TESTS=ON"] + os.environ.get("SPMD_CMAKE_ARGS", "").split()
    rc, out = run(args, cwd=src)
    if rc != 0:
        sys.exit(f"mutants: cmake failed in {build}:\n{out[-4000:]}")


# What the tests run: the CUDA module (nvcc, minutes) is left out; its mutants need a GPU.
# The stand-in GPU module (CPU threads) is in: cli.stand_in_gpu runs the GPU's host side.
TARGETS = ["spmd_unit_tests", "spmd_mpi_tests", "spmd_onnx_conformance", "spmd-cli", "spmd_stand_in_gpu"]


def build(build_dir, jobs):
    return run(["ninja", "-C", build_dir, f"-j{jobs}"] + TARGETS, cwd=build_dir)


def failed_tests(output):
    """Names ctest lists under 'The following tests FAILED:' (also timeouts), then the
    GoogleTest cases that failed inside them (one ctest entry of the MPI binary runs many)."""
    names, listing = [], False
    cases = list(dict.fromkeys(re.findall(r"(?:\[  FAILED  \]|\] FAILED) ([A-Za-z_][\w/.]*\.[\w/]+)", output)))
    for line in output.splitlines():
        if "The following tests FAILED" in line:
            listing = True
        elif listing:
            m = re.match(r"\s*\d+\s+-\s+(\S+)", line)
            if m:
                names.append(m.group(1) + (" (timeout)" if "Timeout" in line else ""))
    shown = [c for c in cases if not any(n.endswith(c) for n in names)][:3]
    if len(names) > 3:  # one row per mutant: the first few name the kill
        names = names[:3] + [f"(+{len(names) - 3} more)"]
    return names + ([f"[{', '.join(shown)}]"] if shown else [])


def run_tests(build_dir, regex, limit):
    """(status, detail): 'pass', 'fail' with the failing tests, or 'none' when no test matches."""
    rc, out = run(["ctest", "-R", regex, "-FA", ".*", "--timeout", str(limit), "--output-on-failure"],
                  cwd=build_dir, timeout=limit + 30)
    if "No tests were found" in out:
        return "none", ""
    if rc == 0:
        return "pass", ""
    names = failed_tests(out)
    if rc == 124 and not names:
        names = [f"(ctest past {limit + 30} s)"]
    return "fail", ", ".join(names) or f"ctest exit {rc}"


def apply(src, m):
    path = os.path.join(src, m.file)
    if not os.path.isfile(path):
        return None, f"file {m.file} not found"
    text = open(path, encoding="utf-8").read()
    before, after = "\n".join(m.before), "\n".join(m.after)
    count = text.count(before)
    if count != 1:
        return None, f"snippet found {count} times in {m.file} (the list is stale)"
    return (path, text), text.replace(before, after)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", default=os.path.join(ROOT, "tools", "mutants.txt"), help="the mutant list")
    ap.add_argument("--only", default="", help="run only the mutants whose name matches this regex")
    ap.add_argument("--scratch", default=os.path.join(ROOT, "build-mutants"),
                    help="scratch folder, kept between runs for incremental builds (default: build-mutants/)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per mutant's tests (default 120)")
    ap.add_argument("--jobs", type=int, default=2, help="ninja -j (default 2)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the run of the tests on the unmutated tree")
    ap.add_argument("--check", action="store_true", help="only check that every snippet is found, build nothing")
    a = ap.parse_args()

    mutants = [m for m in parse_list(a.list) if re.search(a.only, m.name)]
    if not mutants:
        sys.exit("mutants: no mutant selected")
    if a.check:
        bad = [(m, apply(ROOT, m)[1]) for m in mutants if apply(ROOT, m)[0] is None]
        for m, why in bad:
            print(f"ERROR {m.name}: {why}")
        print(f"{len(mutants) - len(bad)} of {len(mutants)} snippets found")
        return 1 if bad else 0

    scratch = os.path.abspath(a.scratch)
    os.makedirs(scratch, exist_ok=True)
    src = sync_tree(scratch)
    # build/ inside the copy, as in the tree itself: the compiler sees the same relative
    # paths, so ccache (with base_dir above both) serves the objects the tree's build made.
    build_dir = os.path.join(src, "build")
    print(f"# scratch copy {src}, build {build_dir}", flush=True)
    configure(src, build_dir)
    t0 = time.time()
    rc, out = build(build_dir, a.jobs)
    if rc != 0:
        sys.exit(f"mutants: the unmutated tree does not build:\n{out[-4000:]}")
    print(f"# unmutated build: {time.time() - t0:.0f} s", flush=True)
    rc, out = run(["ctest", "-R", "^data\\.prepare$"], cwd=build_dir, timeout=600)
    if rc != 0:
        sys.exit(f"mutants: the test data fixture failed:\n{out[-4000:]}")

    baseline = {}
    if not a.no_baseline:
        for regex in dict.fromkeys(m.tests for m in mutants):
            t0 = time.time()
            baseline[regex] = run_tests(build_dir, regex, a.timeout)
            print(f"# baseline {regex}: {baseline[regex][0]} {baseline[regex][1]} ({time.time() - t0:.0f} s)", flush=True)

    rows = []
    header = f"{'mutant':<66} {'result':<9} {'s':>5}  killed by / why"
    print(header + "\n" + "-" * len(header), flush=True)
    for m in mutants:
        t0 = time.time()
        original, mutated = apply(src, m)
        if original is None:
            status, detail = "ERROR", mutated
        elif baseline.get(m.tests, ("pass",))[0] == "fail":
            status, detail = "ERROR", "its tests fail without the mutant: " + baseline[m.tests][1]
        elif baseline.get(m.tests, ("pass",))[0] == "none":
            status, detail = "NO-TESTS", f"no test matches {m.tests}"
        else:
            path, text = original
            try:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(mutated)
                rc, out = build(build_dir, a.jobs)
                if rc != 0:
                    status, detail = "ERROR", "does not compile: " + next(
                        (l for l in out.splitlines() if "error" in l), "see the build")[:150]
                else:
                    result, detail = run_tests(build_dir, m.tests, a.timeout)
                    status = {"pass": "SURVIVED", "fail": "killed", "none": "NO-TESTS"}[result]
                    if result == "none":
                        detail = f"no test matches {m.tests}"
            finally:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
        seconds = time.time() - t0
        rows.append((m, status, detail, seconds))
        print(f"{m.name:<66} {status:<9} {seconds:5.0f}  {detail}", flush=True)
    rebuild_rc, _ = build(build_dir, a.jobs)  # leaves the scratch build unmutated for the next run

    killed = sum(1 for r in rows if r[1] == "killed")
    scored = sum(1 for r in rows if r[1] in ("killed", "SURVIVED"))
    others = len(rows) - scored
    print("-" * len(header))
    print(f"score: {killed}/{scored} killed" + (f" ({others} not scored: errors or no tests)" if others else ""))
    for m, status, _, _ in rows:
        if status == "SURVIVED":
            print(f"survivor: {m.name} ({m.file}; tests {m.tests})")
    return 0 if killed == len(rows) and rebuild_rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
