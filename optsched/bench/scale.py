"""``optsched bench scale``: how the planner's policies compare on a large cluster under contention.

The default instance (:mod:`optsched.bench.scale_cluster`) is a live-looking
cluster whose pending queue asks 1.2-1.5x its free GPUs, so policies must
choose; ``--queue classic`` keeps the earlier mostly idle cluster
(:mod:`optsched.bench.scale_classic`). Each policy plans the same snapshot; the
table shows what each admits, how well it keeps pods inside NVLink islands and
gangs inside racks, and what it costs in time and memory ("solve s" is the
policy's own time as its plan reports it -- for the optimizer the greedy hint,
model building, CP-SAT search and GPU index assignment; "wall s" adds plan
assembly: summary, deferral reasons; peak MiB is the process's peak resident
memory so far). Everything is seeded, so a run can be repeated exactly.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

from optsched import planning
from optsched.bench.options import register_scale
from optsched.bench.scale_classic import synthetic_cluster
from optsched.bench.scale_cluster import contended_cluster
from optsched.model.plan import Plan
from optsched.settings import Settings
from optsched.validate import check_plan

__all__ = ["contended_cluster", "main", "run_scale", "synthetic_cluster"]


def _peak_mib() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def _row(name: str, plan: Plan, seconds: float, violations: int) -> dict[str, str]:
    s = plan.summary
    hit = f"{s.multi_gpu_pods_in_one_island / s.multi_gpu_pods:.1%}" if s.multi_gpu_pods else "-"
    return {
        "policy": name,
        "gpus admitted": f"{s.gpus_admitted:g}",
        "workloads": f"{s.workloads_admitted}",
        "nvlink hit": hit,
        "racks/gang": f"{s.racks_per_gang:.2f}",
        "frag after": f"{s.fragmentation_after:.1f}",
        "solve s": f"{plan.solve_seconds:.2f}",
        "wall s": f"{seconds:.2f}",
        "peak MiB": f"{_peak_mib():.0f}",
        "status": plan.status.value,
        "gap": f"{plan.gap:.2%}" if plan.gap is not None else "-",
        "invalid": str(violations),
    }


def run_scale(args: argparse.Namespace) -> int:
    """Build the cluster, plan it with each policy, print the comparison table."""
    started = time.perf_counter()
    generate = synthetic_cluster if args.queue == "classic" else contended_cluster
    snapshot = generate(args.nodes, args.workloads, args.seed)
    print(
        f"cluster: {len(snapshot.nodes)} nodes, {snapshot.total_gpus} GPUs, "
        f"{len(snapshot.workloads)} pending workloads (seed {args.seed}; "
        f"generated in {time.perf_counter() - started:.2f}s)"
    )
    settings = Settings(time_limit_s=args.time_limit, workers=args.workers)
    rows = []
    admitted: dict[str, float] = {}
    for name in [p.strip() for p in args.policies.split(",") if p.strip()]:
        t0 = time.perf_counter()
        plan = planning.plan(snapshot, settings, name, check=False)
        seconds = time.perf_counter() - t0
        violations = check_plan(snapshot, plan)
        rows.append(_row(name, plan, seconds, len(violations)))
        admitted[name] = plan.summary.gpus_admitted
        if name == "optimizer":
            for line in [*plan.solver_log, *plan.warnings]:
                print(f"  {line}")
        for violation in violations[:5]:
            print(f"  INVALID {name}: {violation}")
    headers = list(rows[0]) if rows else []
    widths = {h: max(len(h), *(len(r[h]) for r in rows)) for h in headers}
    print("  ".join(h.ljust(widths[h]) for h in headers))
    for row in rows:
        print("  ".join(row[h].ljust(widths[h]) for h in headers))
    if "optimizer" in admitted:
        for base in ("bestfit", "fgd"):
            if admitted.get(base):
                print(f"optimizer / {base} GPUs admitted: {admitted['optimizer'] / admitted[base]:.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m optsched.bench.scale``: the same run as ``optsched bench scale``."""
    parser = argparse.ArgumentParser(prog="optsched bench scale", description=__doc__.splitlines()[0])
    register_scale(parser)
    return run_scale(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
