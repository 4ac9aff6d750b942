"""Plumbing of the fake pynvml: calls that count, fail on demand and need nvmlInit, and opaque handles.

Handles are ctypes pointers of the real pynvml handle types, made from
addresses the fake chooses and never dereferenced, so code that stores,
compares or passes them on behaves as with real NVML.
"""

from __future__ import annotations

import ctypes
import functools
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import pynvml as real

F = TypeVar("F", bound=Callable[..., Any])


def error(code: int) -> real.NVMLError:
    """The real pynvml exception for an NVML return code (``NVMLError_NotSupported`` for 3, ...)."""
    return real.NVMLError(code)


def nvml_function(func: F) -> F:
    """Mark a method as an NVML function: counted, failing when ``fail_next`` says so, needing nvmlInit."""

    @functools.wraps(func)
    def wrapper(self: FakeBase, *args: Any, **kwargs: Any) -> Any:
        name = func.__name__
        self.calls[name] += 1
        queued = self.failures.get(name)
        if queued:
            raise queued.pop(0)
        if not self.initialised and name not in ("nvmlInit", "nvmlInitWithFlags"):
            raise error(real.NVML_ERROR_UNINITIALIZED)
        return func(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def make_handle(ctype: Any, address: int) -> Any:
    return ctypes.cast(ctypes.c_void_p(address), ctype)


def address_of(handle: Any) -> int | None:
    try:
        value = ctypes.cast(handle, ctypes.c_void_p).value
    except (TypeError, ctypes.ArgumentError):
        return None
    return int(value) if value is not None else None


def target(reference: Any) -> Any:
    """The object behind ``ctypes.byref(x)`` or ``ctypes.pointer(x)``, or the object itself."""
    if hasattr(reference, "_obj"):
        return reference._obj
    if isinstance(reference, ctypes._Pointer):
        return reference.contents
    return reference


class FakeBase:
    """What every part of the fake shares: call counts, queued failures, the init state."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.failures: dict[str, list[Exception]] = {}
        self.initialised = False

    def fail_next(self, function_name: str, exc: Exception) -> None:
        """Make the next call of ``function_name`` raise ``exc`` (queue several for several calls)."""
        self.failures.setdefault(function_name, []).append(exc)

    def __getattr__(self, name: str) -> Any:
        """Constants, structures and error classes come from the real pynvml; its functions do not."""
        value = getattr(real, name)
        if callable(value) and not isinstance(value, type):
            raise AttributeError(f"the fake pynvml does not implement {name}")
        return value
