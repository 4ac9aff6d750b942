"""Command line of the soak: ``python -m e2e.chaos --minutes M --seed S [--report PATH]``.

Runs against the local e2e cluster (``make e2e-up``), or with
``OPTSCHED_E2E_EXTERNAL=1`` against the cluster ``KUBECONFIG`` names (there
the API server restart is skipped: the soak cannot restart it). The last line
printed is exactly ``chaos: W workloads, F faults, O over-committed, L lost, S
stuck, E escapes``. Exit status: 0 when O, L, S and E are all 0; 1 when any is
not; 2 for bad usage or no cluster; 3 when the soak itself could not run
(its error is printed before the last line).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import traceback
from pathlib import Path

from e2e.chaos.report import Report, final_line
from e2e.chaos.soak import Options, run


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m e2e.chaos", description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=_positive, required=True, help="how long the stream and the faults run")
    ap.add_argument("--seed", type=int, required=True, help="seeds the stream, the tenant and the faults")
    ap.add_argument("--report", type=Path, help="write the JSON report of every fault and violation here")
    ap.add_argument(
        "--logs", type=Path, help="folder for controller logs (default: under the cluster's logs)"
    )
    ap.add_argument(
        "--stuck-after",
        type=_positive,
        default=120.0,
        metavar="SECONDS",
        help="how long a workload may wait while it could progress (default: %(default)s)",
    )
    ap.add_argument(
        "--drain",
        type=_positive,
        default=150.0,
        metavar="SECONDS",
        help="at most this long after the faults stop for what waits to settle (default: %(default)s)",
    )
    ap.add_argument(
        "--arrival",
        type=_positive,
        default=5.0,
        metavar="SECONDS",
        help="mean seconds between workloads of the stream (default: %(default)s)",
    )
    return ap


def _cluster(args: argparse.Namespace) -> tuple[Path, Path, bool] | str:
    """(kubeconfig, default logs folder, local harness) or why there is no cluster."""
    if os.environ.get("OPTSCHED_E2E_EXTERNAL") == "1":
        kubeconfig = os.environ.get("KUBECONFIG")
        if not kubeconfig:
            return "OPTSCHED_E2E_EXTERNAL=1 needs KUBECONFIG to name the cluster"
        return Path(kubeconfig), Path.cwd() / "chaos-logs", False
    from e2e import cluster  # deferred: imports the harness (and its optsched pieces) only for a local run

    info = cluster.running()
    if info is None:
        return f"no running e2e cluster in {cluster.state_dir()}: start one with `make e2e-up`"
    return Path(info.kubeconfig), Path(info.logs_dir), True


def _cluster_problem() -> str | None:
    from e2e import cluster  # deferred: see _cluster
    from e2e.components import ProcessSet  # deferred: see _cluster

    if cluster.running() is not None:
        return None
    alive = ProcessSet.load(cluster.state_dir()).alive()
    down = sorted(name for name, up in alive.items() if not up)
    return f"components not running: {down}" if down else "the API server or Kueue's webhook does not answer"


def _restart_apiserver(down: float) -> float:
    from e2e import cluster  # deferred: see _cluster

    return cluster.restart_component("kube-apiserver", down_seconds=down)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    found = _cluster(args)
    if isinstance(found, str):
        print(f"chaos: {found}", file=sys.stderr)
        return 2
    kubeconfig, logs, local = found
    run_dir = args.logs or logs / f"chaos-{args.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    run_dir.mkdir(parents=True, exist_ok=True)
    opts = Options(
        kubeconfig=kubeconfig,
        minutes=args.minutes,
        seed=args.seed,
        run_dir=run_dir,
        report=args.report,
        bound=args.stuck_after,
        drain=args.drain,
        mean_gap=args.arrival,
        restart_apiserver=_restart_apiserver if local else None,
        cluster_problem=_cluster_problem if local else None,
    )
    report = Report(seed=args.seed, minutes=args.minutes, path=args.report)
    signal.signal(signal.SIGTERM, _terminate)
    status = 0
    try:
        totals = run(opts, report)
        status = 0 if totals.clean else 1
    except (Exception, KeyboardInterrupt, SystemExit) as exc:
        report.notes["error"] = f"{type(exc).__name__}: {exc}"
        report.say(f"soak aborted: {type(exc).__name__}: {exc}")
        traceback.print_exc(file=sys.stderr)
        status = 3
    finally:
        report.write()
    if args.report:
        report.say(f"report written to {args.report}")
    print(final_line(report.totals()), flush=True)
    return status


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)
