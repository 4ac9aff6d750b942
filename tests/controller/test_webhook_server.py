"""The webhook's HTTPS server: stalled clients delay nobody, limits hold, rotated certificates are served."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from contextlib import contextmanager

import pytest

from optsched.controller.cert_reload import ReloadingContext
from optsched.controller.certs import generate
from optsched.controller.webhook import MUTATE_PATH
from optsched.controller.webhook_server import ServerLimits, WebhookServer
from optsched.kueue.managed_queues import ManagedQueues
from optsched.model.names import PLAN_ID_LABEL

REVIEW = {
    "request": {
        "uid": "1",
        "operation": "CREATE",
        "namespace": "ns",
        "kind": {"kind": "Pod"},
        "object": {"metadata": {"labels": {PLAN_ID_LABEL: "p"}}, "spec": {}},
    }
}


@pytest.fixture
def material():
    return generate(["localhost"])


@contextmanager
def serving(tmp_path, material, **limits):
    cert, key = material.write(str(tmp_path))
    contexts = ReloadingContext(cert, key, check_every_s=0)
    server = WebhookServer("127.0.0.1", 0, contexts, ManagedQueues, ServerLimits(**limits))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def trusting(tmp_path, material, name="ca.crt"):
    ca = tmp_path / name
    ca.write_bytes(material.ca_pem)
    return ssl.create_default_context(cafile=str(ca))


def post(port, context, body, headers=None):
    """One request on a fresh connection; (status, decoded JSON body)."""
    conn = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
    try:
        conn.request("POST", MUTATE_PATH, body=body, headers=headers or {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


def raw_connection(port):
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def closed_by_server(sock):
    """Whether the server closed the connection (read returns EOF or the connection was reset)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_the_webhook_answers_over_tls_with_the_generated_certificate(tmp_path, material):
    with serving(tmp_path, material) as server:
        status, body = post(server.port, trusting(tmp_path, material), json.dumps(REVIEW))
    assert status == 200
    assert body["response"]["allowed"] and body["response"]["patchType"] == "JSONPatch"


def test_an_idle_connection_and_an_unfinished_handshake_delay_no_other_client(tmp_path, material):
    with serving(tmp_path, material, handshake_timeout_s=120) as server:
        idle = raw_connection(server.port)
        half = raw_connection(server.port)
        half.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # the start of a ClientHello, no more
        status, body = post(server.port, trusting(tmp_path, material), json.dumps(REVIEW))
        assert status == 200 and body["response"]["allowed"]
        idle.setblocking(False)
        with pytest.raises(BlockingIOError):
            idle.recv(1)  # still open: the answer did not wait for the stalled clients to time out
        idle.close()
        half.close()


def test_a_handshake_that_never_finishes_is_closed_after_the_timeout(tmp_path, material):
    with serving(tmp_path, material, handshake_timeout_s=0.2) as server:
        idle = raw_connection(server.port)
        assert closed_by_server(idle)
        idle.close()


def test_a_request_that_stops_halfway_is_closed_after_the_read_timeout(tmp_path, material):
    with serving(tmp_path, material, read_timeout_s=0.2) as server:
        context = trusting(tmp_path, material)
        with context.wrap_socket(raw_connection(server.port), server_hostname="localhost") as tls:
            tls.sendall(f"POST {MUTATE_PATH} HTTP/1.1\r\nHost: localhost\r\n".encode())
            assert tls.recv(1024) == b""


def test_a_body_over_the_limit_is_refused_unread_and_one_without_length_too(tmp_path, material):
    with serving(tmp_path, material, max_body_bytes=1000) as server:
        context = trusting(tmp_path, material)
        status, body = post(server.port, context, b"x" * 1001)
        assert status == 413 and "1001 bytes is over the limit of 1000" in body["error"]
        status, _ = post(server.port, context, json.dumps(REVIEW))
        assert status == 200, "a body within the limit is served"
        with context.wrap_socket(raw_connection(server.port), server_hostname="localhost") as tls:
            tls.sendall(f"POST {MUTATE_PATH} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
            assert tls.recv(1024).startswith(b"HTTP/1.1 411")


def test_connections_past_the_limit_are_closed_at_once_and_served_again_when_workers_free(tmp_path, material):
    with serving(tmp_path, material, max_connections=2, handshake_timeout_s=120) as server:
        held = [raw_connection(server.port), raw_connection(server.port)]
        extra = raw_connection(server.port)
        assert closed_by_server(extra)
        extra.close()
        for sock in held:
            sock.close()
        context = trusting(tmp_path, material)
        for _ in range(200):  # the workers notice the closed connections, then free their slots
            try:
                status, _ = post(server.port, context, json.dumps(REVIEW))
                break
            except (ConnectionError, ssl.SSLError, OSError):
                continue
        assert status == 200
        assert server.httpd.refused >= 1


def served_certificate(port):
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with context.wrap_socket(raw_connection(port), server_hostname="localhost") as tls:
        return ssl.DER_cert_to_PEM_cert(tls.getpeercert(binary_form=True)).encode()


def same_cert(pem_a, pem_b):
    return ssl.PEM_cert_to_DER_cert(pem_a.decode()) == ssl.PEM_cert_to_DER_cert(pem_b.decode())


def test_renewed_certificate_files_are_served_to_new_connections(tmp_path, material):
    renewed = generate(["localhost"])
    with serving(tmp_path, material) as server:
        assert same_cert(served_certificate(server.port), material.cert_pem)
        renewed.write(str(tmp_path))
        assert same_cert(served_certificate(server.port), renewed.cert_pem)
        status, _ = post(server.port, trusting(tmp_path, renewed, "new-ca.crt"), json.dumps(REVIEW))
        assert status == 200


def test_a_half_written_pair_keeps_the_old_certificate_until_it_is_whole(tmp_path, material):
    renewed = generate(["localhost"])
    with serving(tmp_path, material) as server:
        (tmp_path / "tls.crt").write_bytes(renewed.cert_pem)  # the new certificate, the old key
        assert same_cert(served_certificate(server.port), material.cert_pem)
        (tmp_path / "tls.key").write_bytes(renewed.key_pem)
        assert same_cert(served_certificate(server.port), renewed.cert_pem)


def test_the_files_are_checked_at_most_every_interval(tmp_path, material):
    now = [0.0]
    cert, key = material.write(str(tmp_path))
    contexts = ReloadingContext(cert, key, check_every_s=5, clock=lambda: now[0])
    first = contexts.current()
    generate(["localhost"]).write(str(tmp_path))
    now[0] = 4.0
    assert contexts.current() is first and contexts.reloads == 0
    now[0] = 5.0
    second = contexts.current()
    assert second is not first and contexts.reloads == 1
    (tmp_path / "tls.crt").touch()  # a new modification time, the same content
    now[0] = 11.0
    assert contexts.current() is second and contexts.reloads == 1
