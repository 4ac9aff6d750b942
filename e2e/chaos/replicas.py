"""The controller replicas of the soak, and the clock of time the control plane could not make progress.

Each replica is ``optsched run`` (:class:`e2e.optsched_helpers.ControllerProcess`)
with the proxy's kubeconfig, leader election on the run's Lease, and its own
webhook port behind the relay. Replicas are named ``r1``, ``r2``, ... in start
order; a restarted replica keeps its name. Every log is kept in the run's
folder. :class:`Blackout` sums the seconds during which no replica ran or the
API server was down, which the stuck rule does not count.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from e2e.chaos.relay import Relay
from e2e.optsched_helpers import ControllerProcess, free_port

FAST = ("--interval", "2", "--debounce", "0.5", "--time-limit", "5", "--workers", "1")


@dataclass
class Blackout:
    """Seconds during which at least one reason to pause (``no-controller``, ``apiserver``) held."""

    now: Callable[[], float] = time.monotonic
    _since: float | None = None
    _reasons: set[str] = field(default_factory=set)
    _total: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def set(self, reason: str, on: bool) -> None:
        with self._lock:
            before = bool(self._reasons)
            if on:
                self._reasons.add(reason)
            else:
                self._reasons.discard(reason)
            if not before and self._reasons:
                self._since = self.now()
            elif before and not self._reasons and self._since is not None:
                self._total += self.now() - self._since
                self._since = None

    def total(self) -> float:
        with self._lock:
            running = self.now() - self._since if self._since is not None else 0.0
            return self._total + running


@dataclass
class Replica:
    identity: str
    port: int
    process: ControllerProcess
    logs: list[Path] = field(default_factory=list)


class Replicas:
    def __init__(
        self, kubeconfig: Path, args: list[str], log_dir: Path, relay: Relay, blackout: Blackout
    ) -> None:
        self.kubeconfig = kubeconfig
        self.args = [*args, *FAST]
        self.log_dir = log_dir
        self.relay = relay
        self.blackout = blackout
        self.replicas: dict[str, Replica] = {}
        self.exits: list[str] = []
        """Replicas that exited on their own: ``name: exit code``."""
        self._lock = threading.RLock()
        self._count = 0

    def start(self, identity: str | None = None) -> str:
        with self._lock:
            if identity is None:
                self._count += 1
                identity = f"r{self._count}"
            old = self.replicas.get(identity)
            port = old.port if old else free_port()
            process = ControllerProcess(
                self.kubeconfig,
                *self.args,
                "--identity",
                identity,
                "--webhook-port",
                str(port),
                log_dir=self.log_dir,
            ).start()
            replica = Replica(identity, port, process, [*(old.logs if old else []), process.log_path])
            self.replicas[identity] = replica
            self._update()
            return identity

    def kill(self, identity: str) -> None:
        with self._lock:
            replica = self.replicas.get(identity)
            if replica is not None:
                replica.process.kill()
            self._update()

    def alive(self) -> list[str]:
        with self._lock:
            return sorted(name for name, r in self.replicas.items() if r.process.running())

    def poll(self) -> list[tuple[str, int]]:
        """Replicas found exited on their own since the last look (SIGKILLed ones aside), with exit codes."""
        with self._lock:
            found = []
            for name, replica in self.replicas.items():
                proc = replica.process.proc
                if proc is not None and proc.poll() is not None and proc.returncode != -9:
                    found.append((name, int(proc.returncode)))
                    replica.process.proc = None
            self.exits += [f"{name} (exit code {code})" for name, code in found]
            self._update()
            return found

    def stop_all(self) -> None:
        with self._lock:
            for replica in self.replicas.values():
                replica.process.stop()
            self._update()

    def log_paths(self) -> dict[str, list[str]]:
        with self._lock:
            return {name: [str(p) for p in r.logs] for name, r in self.replicas.items()}

    def _update(self) -> None:
        alive = [r for r in self.replicas.values() if r.process.running()]
        self.relay.backends = [r.port for r in alive]
        self.blackout.set("no-controller", not alive)
