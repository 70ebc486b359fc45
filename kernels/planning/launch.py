"""Whether a point's kernels built for a target, read from the build stage's results: the
measure stage skips a point on it, and predictions leave a target out on it; and which of
the fused kernel's launch candidates a GPU run times."""

from __future__ import annotations


def build_failure(
    name: str, builds: list[dict] | None, required_targets: list[str] | None = None
) -> str | None:
    """A variant the point ``name`` launches failed to build for one of ``required_targets``
    (default: all) in ``builds`` (results of ``kernels.build.compile.build``), and no launch
    candidate stands in for it there (one that builds without spilling: a GPU run times the
    point with those)."""
    for result in builds or []:
        if name not in result["points"]:
            raise ValueError(f"point {name} is not in these build results: rebuild them for this sweep")
        missing = set(required_targets or []) - set(result["targets"])
        if missing:
            raise ValueError(
                f"no build for {', '.join(sorted(missing))} (built: "
                f"{', '.join(result['targets'])}): rebuild for the required targets"
            )
        needed = set(result["points"][name])
        for record in result["variants"]:
            if (
                record["variant"] in needed
                and record["status"] != "ok"
                and record["target"] in (required_targets or result["targets"])
                and not launch_candidates(name, [result], record["target"])
            ):
                return (
                    f"{record['kernel']} ({record['variant']}) does not build for "
                    f"{record['target']}: {record['reason']}"
                )
    return None


def launch_candidates(name: str, builds: list[dict] | None, target: str) -> list[tuple[int, int]]:
    """The (num_warps, num_stages) launch candidates of point ``name`` that built for
    ``target`` without spilling, in the order the build lists them."""
    found = []
    for result in builds or []:
        built = {r["variant"]: r for r in result["variants"] if r["target"] == target}
        for variant in result.get("candidates", {}).get(name, []):
            record = built.get(variant)
            if record and record["status"] == "ok" and not record.get("spill_store_bytes"):
                found.append((record["num_warps"], record["num_stages"]))
    return list(dict.fromkeys(found))
