"""The TLS context for new webhook connections, rebuilt when the certificate files change.

cert-manager renews ``tls.crt``/``tls.key`` in the ``--webhook-cert-dir`` files
(a Secret volume, swapped atomically by the kubelet), and optsched's own
rotation rewrites the files it serves from. Each new connection asks for the
current context; at most every ``check_every_s`` that costs a ``stat`` of the
two files, and only a change of their modification time or size reads them.
A change whose content is the same keeps the context. A half-written pair
(a new certificate with the old key) fails to load: the old context keeps
serving and the next check tries again, so a rotation never takes the
webhook down.
"""

from __future__ import annotations

import hashlib
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("optsched.webhook")

Stamp = tuple[tuple[int, int], tuple[int, int]]


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A TLS 1.2+ server context for one certificate chain and key (``ssl.SSLError`` if they do not load)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


class ReloadingContext:
    """The server context for ``cert_file``/``key_file``, reloaded when they change on disk."""

    def __init__(
        self,
        cert_file: str,
        key_file: str,
        *,
        check_every_s: float = 2.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self.check_every_s = check_every_s
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._stamp = self._stat()
        self._digest = self._read_digest()
        self._context = server_context(cert_file, key_file)
        self._checked = self._clock()
        self.reloads = 0
        """How many times a changed pair was loaded (for logs and tests)."""

    def current(self) -> ssl.SSLContext:
        """The context to wrap the next connection with."""
        with self._lock:
            now = self._clock()
            if now - self._checked >= self.check_every_s:
                self._checked = now
                self._maybe_reload()
            return self._context

    def _maybe_reload(self) -> None:
        try:
            stamp = self._stat()
        except OSError as exc:
            log.warning("webhook certificate files unreadable, serving the loaded ones: %s", exc)
            return
        if stamp == self._stamp:
            return
        try:
            digest = self._read_digest()
            if digest != self._digest:
                self._context = server_context(self.cert_file, self.key_file)
                self._digest = digest
                self.reloads += 1
                log.info("webhook certificate reloaded from %s", self.cert_file)
        except (OSError, ssl.SSLError) as exc:
            log.warning("webhook certificate files changed but do not load yet, keeping the old: %s", exc)
            return
        self._stamp = stamp

    def _stat(self) -> Stamp:
        cert, key = os.stat(self.cert_file), os.stat(self.key_file)
        return (cert.st_mtime_ns, cert.st_size), (key.st_mtime_ns, key.st_size)

    def _read_digest(self) -> str:
        hashed = hashlib.sha256(Path(self.cert_file).read_bytes())
        hashed.update(Path(self.key_file).read_bytes())
        return hashed.hexdigest()
