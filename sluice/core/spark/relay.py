"""A byte relay between a Unix socket and a TCP port, so a sandboxed Connect job child
reaches its Spark server without any network of its own.

The job child runs a pull request's Python (a Python model's function), so it has its own
network namespace holding only its own loopback. The service listens on a Unix socket in
the job's home (which the child's sandbox shows) and relays each connection to the
server's loopback port (:func:`unix_to_tcp`); the child listens on a port of its own
loopback and relays each connection to that socket (:func:`tcp_to_unix`), and its Spark
Connect client connects there with the server's token. Nothing else is reachable.

Example::

    >>> import socket, tempfile, os
    >>> server = socket.create_server(("127.0.0.1", 0))
    >>> path = os.path.join(tempfile.mkdtemp(), "s.sock")
    >>> outer = unix_to_tcp(path, ("127.0.0.1", server.getsockname()[1]))
    >>> inner = tcp_to_unix(path)
    >>> client = socket.create_connection(("127.0.0.1", inner.port))
    >>> peer, _ = server.accept()
    >>> client.sendall(b"ping"); peer.recv(4)
    b'ping'
    >>> for s in (client, peer, server): s.close()
    >>> inner.close(); outer.close()
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable

_CHUNK = 256 * 1024


class Relay:
    """A listening socket whose connections are each relayed to a new ``connect()``."""

    def __init__(self, listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
        self.listener = listener
        self._connect = connect
        self._closed = threading.Event()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="sluice-relay", daemon=True).start()

    @property
    def port(self) -> int:
        """The TCP port listened on (a TCP listener only)."""
        return int(self.listener.getsockname()[1])

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                near, _ = self.listener.accept()
            except OSError:
                return
            try:
                far = self._connect()
            except OSError:
                near.close()
                continue
            with self._lock:
                self._open.update((near, far))
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(_CHUNK)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        """Stop listening and close every relayed connection."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self.listener.close()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.close()
            self._open.clear()


def unix_to_tcp(path: str, target: tuple[str, int]) -> Relay:
    """Listen on the Unix socket ``path`` (mode 0600) and relay each connection to
    ``target``."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(16)

    def connect() -> socket.socket:
        sock = socket.create_connection(target, timeout=10)
        sock.settimeout(None)  # a gRPC connection may stay idle for long
        return sock

    return Relay(listener, connect)


def tcp_to_unix(path: str) -> Relay:
    """Listen on a free port of 127.0.0.1 and relay each connection to ``path``."""
    listener = socket.create_server(("127.0.0.1", 0))

    def connect() -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        return sock

    return Relay(listener, connect)
