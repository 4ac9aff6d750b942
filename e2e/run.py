"""CI entry point: build (from cache), start a fresh cluster, run the e2e suite, always stop it.

    python -m e2e.run [--profile small] [-- PYTEST_ARGS...]

Exit code: pytest's, or the harness's if the build or the cluster failed.  The
cluster is stopped in every case, including Ctrl-C, so CI never leaks processes.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from e2e import build, cluster


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.run", description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default=os.environ.get("OPTSCHED_E2E_PROFILE", "small"))
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = ap.parse_args(argv)
    # SIGTERM (CI timeout, `kill`) unwinds like Ctrl-C, so started components are stopped.
    signal.signal(signal.SIGTERM, _terminate)

    t0 = time.monotonic()
    rc = build.main([])
    if rc != 0:
        return 2 if rc == 2 else 1
    t_build = time.monotonic() - t0
    try:
        rc = cluster.main(["up", "--fresh", "--profile", args.profile])
        if rc != 0:
            return rc
        t_up = time.monotonic() - t0 - t_build
        t1 = time.monotonic()
        env = {**os.environ, "OPTSCHED_E2E_PROFILE": args.profile}
        env.pop("OPTSCHED_E2E_EXTERNAL", None)
        # Test paths in the extra arguments replace the default "e2e" (the whole suite).
        picks_tests = any(Path(a.split("::")[0]).exists() for a in args.pytest_args if not a.startswith("-"))
        targets = [] if picks_tests else ["e2e"]
        rc = subprocess.call([sys.executable, "-m", "pytest", *targets, *args.pytest_args], env=env)
        print(
            f"[e2e.run] build/cache {t_build:.0f}s, cluster up {t_up:.0f}s, "
            f"suite {time.monotonic() - t1:.0f}s, exit {rc}",
            file=sys.stderr,
        )
        return rc
    finally:
        cluster.main(["down"])


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    sys.exit(main())
