"""What the GPU scripts (scripts/gpu_study.sh, scripts/gpu_profile.sh) hand back and print:
the results folder packed for $OUT, the estimate held against its limit, the preflight's
findings and the short summary printed last. Standard library only (the headline lines come
from reports.headline, which needs pandas).

The GPU machine sends back only the files written under $OUT: at most 8, each at most
16 MiB, no deeper than two folders. `pack` writes one archive of results/ there (split into
parts when it would be larger), leaving out bulky build artifacts (the folders stay, so that
Snakemake finds every output present), and checks those limits.

    python scripts/gpu_out.py pack RESULTS OUT NAME [--other N]
    python scripts/gpu_out.py estimate RESULTS LIMIT [--rehearse]
    python scripts/gpu_out.py preflight RESULTS
    python scripts/gpu_out.py summary RESULTS OUT NAME --elapsed S --steps a=1,b=2 --rc N [--console LOG]
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import json
import os
import re
import sys
import tarfile
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

MAX_FILES = 8
MAX_BYTES = 16 * 2**20
PART_BYTES = 15 * 2**20  # each part, with room to spare under MAX_BYTES
# Compiler outputs kept beside each build record: large, and the record holds what the
# reports read from them (resources, occupancy, the SASS instruction mix).
BULKY = ("*.cubin", "*.ptx", "*.sass", "*.ttir", "*.ttgir", "*.llir", "*.amdgcn", "*.hsaco", "*.tmp")
# When even the split archive needs more files than $OUT allows: every file under a build
# job's artifacts folder, and the executed copies of the reports kept as logs.
TRIMMED = ("build/*/*/*", "logs/reports/*.ipynb")
# The estimate of the profiling when results/budget.json carries none (profile_s): two
# Nsight Compute runs (start-up, compile, replay, export) and the trimmed gpu tests.
PROFILE_ESTIMATE_S = float(os.environ.get("GPU_PROFILE_ESTIMATE_SECONDS", 300))


# --- packing ---------------------------------------------------------------------------------


def _left_out(relative: str, patterns: tuple[str, ...]) -> bool:
    name = relative.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(relative, p) for p in patterns)


def archive(results: Path, patterns: tuple[str, ...]) -> tuple[bytes, int, int]:
    """results/ as a tar.gz (paths start with the folder's name): every folder, every file
    but those matching ``patterns``; with the count of files kept and left out."""
    buffer = io.BytesIO()
    kept = dropped = 0
    base = results.name
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        tar.add(results, arcname=base, recursive=False)
        for folder, dirs, files in os.walk(results):
            dirs.sort()
            for name in sorted(dirs):
                path = Path(folder, name)
                tar.add(path, arcname=f"{base}/{path.relative_to(results).as_posix()}", recursive=False)
            for name in sorted(files):
                path = Path(folder, name)
                relative = path.relative_to(results).as_posix()
                if path.is_symlink() or _left_out(relative, patterns):
                    dropped += 1
                    continue
                tar.add(path, arcname=f"{base}/{relative}", recursive=False)
                kept += 1
    return buffer.getvalue(), kept, dropped


def pack(results: Path, out: Path, name: str, other_files: int) -> list[str]:
    """Write NAME-results.tar.gz (or its parts .part0, .part1, ...) under OUT, within what
    OUT may hold beside ``other_files`` other files. Returns what it says about it."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(f"{name}-results.tar.gz*"):
        old.unlink()
    if not results.is_dir():
        return [f"pack: no {results}/ to pack"]
    allowed = MAX_FILES - other_files
    said = []
    for patterns in (BULKY, BULKY + TRIMMED):
        data, kept, dropped = archive(results, patterns)
        parts = max(1, -(-len(data) // PART_BYTES))
        if parts <= allowed:
            break
        said.append(f"pack: {len(data) / 2**20:.1f} MiB needs {parts} parts, more than {allowed}: trimming")
    else:
        said.append(f"pack: error: {len(data) / 2**20:.1f} MiB does not fit in {allowed} files of 15 MiB")
        return said
    target = out / f"{name}-results.tar.gz"
    if parts == 1:
        target.write_bytes(data)
        written = [target]
    else:
        written = []
        for i in range(parts):
            part = out / f"{target.name}.part{i}"
            part.write_bytes(data[i * PART_BYTES : (i + 1) * PART_BYTES])
            written.append(part)
    names = ", ".join(f"{p.name} ({p.stat().st_size / 2**20:.1f} MiB)" for p in written)
    said.append(f"pack: {kept} files of {results}/ ({dropped} build artifacts left out) -> {names}")
    return said


def check_out(out: Path) -> list[str]:
    """What the GPU machine would refuse to send back from OUT."""
    files = [p for p in out.rglob("*") if p.is_file() or p.is_symlink()]
    problems = []
    if len(files) > MAX_FILES:
        problems.append(f"{len(files)} files under {out}, more than {MAX_FILES}")
    for path in files:
        relative = path.relative_to(out)
        if path.is_symlink():
            problems.append(f"{relative} is a link")
        elif path.stat().st_size > MAX_BYTES:
            problems.append(f"{relative} is {path.stat().st_size / 2**20:.1f} MiB, more than 16 MiB")
        if len(relative.parts) > 3:
            problems.append(f"{relative} is deeper than two folders")
    return problems


# --- the estimate, the preflight ------------------------------------------------------------


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def study_estimate(results: Path) -> float | None:
    budget = _json(results / "budget.json")
    return None if budget is None or budget.get("total_s") is None else float(budget["total_s"])


def profile_estimate(results: Path) -> tuple[float, str]:
    budget = _json(results / "budget.json") or {}
    if budget.get("profile_s") is not None:
        return float(budget["profile_s"]), f"{results}/budget.json profile_s"
    return (
        PROFILE_ESTIMATE_S,
        "GPU_PROFILE_ESTIMATE_SECONDS: two Nsight Compute runs and the trimmed gpu tests",
    )


def estimate(results: Path, limit: float, rehearse: bool) -> int:
    """Print the study's estimate; exit status 3 when it exceeds the limit (a rehearsal only
    says so: its figures are this machine's). Without one the study goes on: the command's
    deadline stops it in time to pack what it made."""
    total = study_estimate(results)
    if total is None:
        print(f"no estimate: {results}/budget.json is missing or unreadable; going on")
        return 0
    budget = _json(results / "budget.json")
    points = budget.get("points", "?")
    print(f"estimated {total:.0f} s for {points} points (limit {limit:.0f} s; {results}/budget.json)")
    if total <= limit:
        return 0
    if rehearse:
        print("above the limit: the GPU run would stop here (rehearsal: the figures are this machine's)")
        return 0
    print(f"estimated {total:.0f} s > {limit:.0f} s: shrink config/presets/gpu_study.yaml")
    print("(or raise GPU_STUDY_SECONDS, where the command's 10 minutes still hold the study)")
    return 3


def preflight(results: Path) -> None:
    """The preflight's findings: its log (the launches that cannot run, by name) and counts."""
    log = results / "logs" / "preflight.log"
    if log.exists():
        lines = log.read_text(errors="replace").splitlines()
        for line in lines[-40:]:
            print(f"  {line}")
        if len(lines) > 40:
            print(f"  ... ({len(lines) - 40} earlier lines in {log})")
    found = _json(results / "preflight.json")
    if found and isinstance(found.get("counts"), dict):
        print(f"preflight counts: {found['counts']} ({results}/preflight.json)")


# --- the summary ------------------------------------------------------------------------------


def point_counts(results: Path) -> tuple[Counter, Counter]:
    """Records under results/points by status, and the commonest reasons of those not ok."""
    status, reasons = Counter(), Counter()
    for path in sorted((results / "points").rglob("*.json")):
        record = _json(path)
        if record is None:
            status["unreadable"] += 1
            continue
        status[record.get("status", "?")] += 1
        if record.get("status") != "ok" and record.get("reason"):
            reasons[f"{record['status']}: {str(record['reason'])[:120]}"] += 1
    return status, reasons


def junit(path: Path) -> str:
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError) as err:
        return f"gpu tests: no outcome ({path}: {err})"
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return f"gpu tests: no test suite in {path}"
    counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    failed = [
        c.get("name")
        for c in suite.iter("testcase")
        if c.find("failure") is not None or c.find("error") is not None
    ]
    text = (
        f"gpu tests: {passed} passed, {counts['failures']} failed, {counts['errors']} errors, "
        f"{counts['skipped']} skipped ({path})"
    )
    return text + (f"; failed: {', '.join(failed)}" if failed else "")


def failed_jobs(console: Path | None) -> list[str]:
    if console is None or not console.exists():
        return []
    text = console.read_text(errors="replace")
    return sorted(set(re.findall(r"^Error in rule (\S+):", text, flags=re.MULTILINE)))


def gpu_name(results: Path) -> str:
    ceilings = _json(results / "ceilings.json") or {}
    return ceilings.get("device_name") or "no GPU named (results/ceilings.json is missing)"


def headline(results: Path) -> list[str]:
    try:
        from reports.headline import lines
    except ImportError as err:
        return [f"no headline: {err}"]
    try:
        return lines(results)
    except Exception as err:  # the summary is printed whatever the results hold
        return [f"no headline: {type(err).__name__}: {err}"]


def summary(
    results: Path,
    name: str,
    elapsed: float,
    steps: dict[str, float],
    rc: int,
    console: Path | None,
    rehearse: bool,
) -> str:
    lines = [f"attnio GPU {name}{' (rehearsal: no GPU work)' if rehearse else ''} on {gpu_name(results)}"]
    status, reasons = point_counts(results)
    counted = ", ".join(f"{status[s]} {s}" for s in ("ok", "skipped", "failed", "unreadable") if status[s])
    lines.append(f"points: {sum(status.values())} records: {counted or 'none'} ({results}/points)")
    lines += [f"  {n} x {reason}" for reason, n in reasons.most_common(4)]
    jobs = failed_jobs(console)
    if rc == 0:
        lines.append("snakemake: every job done")
    elif rc == 124:
        lines.append("snakemake: stopped at the command's deadline: run the same command again to go on")
    else:
        named = ", ".join(jobs) or "none named"
        lines.append(f"snakemake: exit {rc}; failed rules: {named} (logs under {results}/logs)")
    if name == "profile":
        for impl in ("triton_naive", "triton_flash"):
            found = _json(results / "profile" / "ncu" / f"{impl}.json")
            log = results / "logs" / "profile" / f"ncu_{impl}.log"
            if found is None:
                lines.append(f"ncu {impl}: no record; see {log}")
            else:
                launch = found.get("launch")
                timed = f", launch {launch[0]},{launch[1]}" if launch else ""
                lines.append(
                    f"ncu {impl}: {found.get('dram_reason') or 'DRAM bytes parsed'}{timed} "
                    f"({results}/profile/ncu/{impl}.json)"
                )
        lines.append(junit(results / "profile" / "gpu_tests.xml"))
    lines.append("headline:")
    lines += [f"  {line}" for line in headline(results)]
    if name == "study":
        estimated = study_estimate(results)
        basis = f"{results}/budget.json total_s"
    else:
        estimated, basis = profile_estimate(results)
    per_step = ", ".join(f"{step} {seconds:.0f} s" for step, seconds in steps.items())
    against = f"an estimate of {estimated:.0f} s ({basis})" if estimated is not None else "no estimate"
    lines.append(f"took {elapsed:.0f} s ({per_step}) against {against}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/gpu_out.py")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack")
    p.add_argument("results", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("name")
    p.add_argument("--other", type=int, default=2, help="other files OUT holds beside the archive")
    e = sub.add_parser("estimate")
    e.add_argument("results", type=Path)
    e.add_argument("limit", type=float)
    e.add_argument("--rehearse", action="store_true")
    f = sub.add_parser("preflight")
    f.add_argument("results", type=Path)
    s = sub.add_parser("summary")
    s.add_argument("results", type=Path)
    s.add_argument("out", type=Path, nargs="?")
    s.add_argument("name", choices=("study", "profile"))
    s.add_argument("--elapsed", type=float, required=True)
    s.add_argument("--steps", default="")
    s.add_argument("--rc", type=int, default=0)
    s.add_argument("--console", type=Path)
    s.add_argument("--rehearse", action="store_true")
    c = sub.add_parser("check-out")
    c.add_argument("out", type=Path)
    args = parser.parse_args(argv)

    if args.command == "pack":
        for line in pack(args.results, args.out, args.name, args.other):
            print(line)
        return 0
    if args.command == "estimate":
        return estimate(args.results, args.limit, args.rehearse)
    if args.command == "preflight":
        preflight(args.results)
        return 0
    if args.command == "check-out":
        problems = check_out(args.out)
        for problem in problems:
            print(f"$OUT: {problem}")
        return 1 if problems else 0
    steps = dict((k, float(v)) for k, _, v in (s.partition("=") for s in args.steps.split(",") if s))
    text = summary(args.results, args.name, args.elapsed, steps, args.rc, args.console, args.rehearse)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{args.name}-summary.txt").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
