"""Calling NVML through nvidia-ml-py: loading it, and NVML errors as BackendErrors that name the call.

The NVML backend never lets a ``pynvml.NVMLError`` escape: each call goes
through :meth:`NvmlCalls.call`, which turns a failure into a
:class:`~optsched.agent.backend.BackendError` naming the NVML function and
the GPU. Errors that only mean "this GPU has no such thing" (a link that does
not exist, a feature the GPU lacks) are named by the caller and come back as
:class:`Absent`, so each caller decides what absence means.

The module object is passed in (``pynvml`` itself, or the tests' fake built
from a hardware profile), so the same code runs against both.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from optsched.agent.backend import BackendError

NOT_SUPPORTED = ("NotSupported",)


class Absent(Exception):
    """An NVML call failed with one of the error kinds its caller reads as "not there"."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def load_nvml(nvml: Any = None) -> Any:
    """``nvml`` when given, else the ``pynvml`` module of nvidia-ml-py; initialised either way."""
    if nvml is None:
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError as exc:
            raise BackendError(
                "the NVML backend needs the nvidia-ml-py package (module pynvml), which is not installed"
            ) from exc
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise BackendError(_init_failure(nvml, exc)) from exc
    return nvml


def _init_failure(nvml: Any, exc: Exception) -> str:
    if isinstance(exc, nvml.NVMLError_LibraryNotFound):
        return (
            "NVML is not available: libnvidia-ml.so.1 was not found (no NVIDIA driver on this node, or the "
            "library is not mounted into the agent's container); nodes without GPUs use --simulate"
        )
    if isinstance(exc, nvml.NVMLError_DriverNotLoaded):
        return "NVML is not available: the NVIDIA kernel driver is not loaded on this node"
    if isinstance(exc, nvml.NVMLError_NoPermission):
        return "NVML is not available: no permission to open the GPU devices (/dev/nvidia*)"
    return f"nvmlInit failed: {describe_error(exc)}"


def describe_error(exc: Exception) -> str:
    """The NVML error's text and code, e.g. ``Not Supported (NVML error 3)``."""
    code = getattr(exc, "value", None)
    words = str(exc)
    if not words or words.startswith("NVML Error with code"):
        words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", type(exc).__name__.removeprefix("NVMLError_"))
    return f"{words} (NVML error {code})" if code is not None else words


class NvmlCalls:
    """NVML functions called by name, with errors turned into BackendError or :class:`Absent`."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml

    def call(self, name: str, *args: Any, gpu: int | None = None, absent: tuple[str, ...] = ()) -> Any:
        """``nvml.<name>(*args)``; an error of a kind in ``absent`` (``"NotSupported"``) raises Absent."""
        try:
            return getattr(self.nvml, name)(*args)
        except self.nvml.NVMLError as exc:
            for kind in absent:
                if isinstance(exc, getattr(self.nvml, f"NVMLError_{kind}")):
                    raise Absent(kind) from exc
            on = f" on GPU {gpu}" if gpu is not None else ""
            raise BackendError(f"{name} failed{on}: {describe_error(exc)}") from exc

    def constant(self, name: str) -> int:
        return int(getattr(self.nvml, name))


def text(value: object) -> str:
    """A string NVML returned: ``bytes`` from a ctypes field, or ``str`` from nvidia-ml-py's wrappers."""
    if isinstance(value, bytes):
        return value.split(b"\0", 1)[0].decode("utf-8", errors="replace")
    return str(value)
