"""Self-made webhook certificates: kept in a Secret, renewed before expiry, trusted during the overlap."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import ssl

import httpx

from optsched.controller.certs import (
    RENEW_BEFORE,
    TlsMaterial,
    ca_bundle_patch,
    expires,
    generate,
    needs_renewal,
    renewed,
    service_dns_names,
)
from optsched.controller.options import WebhookOptions
from optsched.controller.serving_certs import Rotation, ServingCertificates, first_certificate
from optsched.kube.client import Client
from tests.kube.fake import FakeTransport, status

T0 = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
DNS = service_dns_names("optsched-webhook", "optsched-system")


def test_secret_round_trip_keeps_the_previous_ca_and_the_patch_touches_only_stale_bundles():
    old = generate(DNS)
    material = renewed(old, DNS)
    assert material.previous_ca_pem == old.ca_pem and material.ca_bundle == material.ca_pem + old.ca_pem
    assert TlsMaterial.from_secret({"data": material.secret_data()}) == material
    assert TlsMaterial.from_secret({"data": old.secret_data()}).previous_ca_pem == b""
    bundle = base64.b64encode(material.ca_bundle).decode()
    config = {
        "webhooks": [{"name": "a", "clientConfig": {"caBundle": bundle}}, {"name": "b", "clientConfig": {}}]
    }
    assert ca_bundle_patch(config, material.ca_bundle) == [
        {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": bundle}
    ]


def test_a_leaf_is_renewed_within_the_window_before_it_expires():
    material = generate(DNS, now=T0)
    end = expires(material)
    assert end is not None and end > T0
    assert not needs_renewal(material, T0)
    assert not needs_renewal(material, end - RENEW_BEFORE - dt.timedelta(seconds=1))
    assert needs_renewal(material, end - RENEW_BEFORE)
    assert needs_renewal(material, end + dt.timedelta(days=1))
    assert needs_renewal(TlsMaterial(b"x", b"not a certificate", b"k"), T0)


def test_clients_trusting_the_bundle_verify_the_old_and_the_new_chain(tmp_path):
    old = generate(["localhost"])
    new = renewed(old, ["localhost"])
    trust = ssl.create_default_context(cadata=new.ca_bundle.decode())
    for served in (old, new):
        server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        cert, key = served.write(str(tmp_path))
        server_side.load_cert_chain(cert, key)
        assert handshake(server_side, trust)
    only_new = ssl.create_default_context(cadata=new.ca_pem.decode())
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(*old.write(str(tmp_path)))
    assert not handshake(server_side, only_new), "without the previous CA the old chain does not verify"


def handshake(server_side, client_side):
    """Whether a TLS handshake between the two contexts succeeds, in memory."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_side.wrap_bio(c_in, c_out, server_hostname="localhost")
    server = server_side.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for name, side, out, peer_in in (("client", client, c_out, s_in), ("server", server, s_out, c_in)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLError:
                    return False
            peer_in.write(out.read())
        if all(done.values()):
            return True
    return False


class FakeApi:
    """The Secret and the MutatingWebhookConfiguration, as the API server keeps them."""

    def __init__(self, secret=None, bundle_fails=False):
        self.secret = secret
        self.version = 1
        self.config = {"webhooks": [{"name": "a", "clientConfig": {}}, {"name": "b", "clientConfig": {}}]}
        self.bundle_fails = bundle_fails
        self.log = []

    def store(self, material):
        self.version += 1
        self.secret = {"metadata": {"name": "s", "resourceVersion": str(self.version)}}
        self.secret["data"] = material.secret_data()

    def __call__(self, request):
        path, method = request.url.path, request.method
        self.log.append((method, path.rsplit("/", 1)[-1]))
        if "mutatingwebhookconfigurations" in path:
            return self.webhook_config(request)
        if method == "GET":
            return httpx.Response(200, json=self.secret) if self.secret else status(404, "not found")
        body = json.loads(request.content)
        if method == "POST":
            if self.secret:
                return status(409, "already exists")
        elif body["metadata"].get("resourceVersion") != self.secret["metadata"]["resourceVersion"]:
            return status(409, "the object has been modified")
        self.version += 1
        self.secret = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
        return httpx.Response(200, json=self.secret)

    def webhook_config(self, request):
        if request.method == "GET":
            return httpx.Response(200, json=self.config)
        if self.bundle_fails:
            return status(403, "forbidden")
        for op in json.loads(request.content):
            number = int(op["path"].split("/")[2])
            self.config["webhooks"][number]["clientConfig"]["caBundle"] = op["value"]
        return httpx.Response(200, json=self.config)

    def trusted(self):
        return {base64.b64decode(w["clientConfig"].get("caBundle", "")) for w in self.config["webhooks"]}

    def stored(self):
        return TlsMaterial.from_secret(self.secret)


def certificates(api, tmp_path, now, name="r"):
    return ServingCertificates(
        WebhookOptions(port=1, secret="s", config="optsched-pod-gate", namespace="optsched-system"),
        Client(FakeTransport(api)),
        rotation=Rotation(check_every_s=1),
        clock=lambda: now[0],
        directory=str(tmp_path / name),
    )


def served_pem(tmp_path, name="r"):
    return (tmp_path / name / "tls.crt").read_bytes()


def test_the_first_replica_stores_a_certificate_trusts_it_and_serves_it(tmp_path):
    api, now = FakeApi(), [T0]
    (tmp_path / "r").mkdir()
    asyncio.run(certificates(api, tmp_path, now).start())
    assert api.trusted() == {api.stored().ca_pem}
    assert served_pem(tmp_path) == api.stored().cert_pem


def test_a_stored_certificate_near_expiry_is_renewed_and_both_cas_trusted(tmp_path):
    old = generate(DNS, now=T0)
    api, now = FakeApi(), [T0]
    api.store(old)
    (tmp_path / "r").mkdir()
    replica = certificates(api, tmp_path, now)
    asyncio.run(replica.start())
    assert served_pem(tmp_path) == old.cert_pem and api.trusted() == {old.ca_pem}
    now[0] = expires(old) - RENEW_BEFORE + dt.timedelta(hours=1)
    asyncio.run(replica.sync())
    fresh = api.stored()
    assert fresh.cert_pem != old.cert_pem and fresh.previous_ca_pem == old.ca_pem
    assert api.trusted() == {fresh.ca_pem + old.ca_pem}
    assert served_pem(tmp_path) == fresh.cert_pem
    assert not needs_renewal(fresh, now[0])


def test_a_replica_adopts_what_another_renewed_trusting_it_before_serving_it(tmp_path):
    old = generate(DNS, now=T0)
    api, now = FakeApi(), [T0]
    api.store(old)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    a, b = certificates(api, tmp_path, now, "a"), certificates(api, tmp_path, now, "b")
    asyncio.run(a.start())
    asyncio.run(b.start())
    now[0] = expires(old) - dt.timedelta(days=1)
    asyncio.run(a.sync())
    api.log.clear()
    asyncio.run(b.sync())
    assert served_pem(tmp_path, "b") == api.stored().cert_pem == served_pem(tmp_path, "a")
    assert ("PATCH", "optsched-pod-gate") not in api.log, "a's bundle already trusts the new CA"
    assert ("PUT", "s") not in api.log, "b does not renew again"


def test_two_replicas_renewing_at_once_settle_on_one_certificate(tmp_path):
    old = generate(DNS, now=T0)
    api, now = FakeApi(), [expires(old) - dt.timedelta(days=1)]
    api.store(old)
    (tmp_path / "r").mkdir()
    replica = certificates(api, tmp_path, now)
    other = renewed(old, DNS, now=now[0])
    real_get = api.__call__

    def racing(request):
        answer = real_get(request)
        if request.method == "GET" and "secrets" in request.url.path and api.stored() == old:
            api.store(other)  # the other replica renews between our read and our update
        return answer

    replica.client = Client(FakeTransport(racing))
    asyncio.run(replica.sync())
    assert api.stored() == other and served_pem(tmp_path) == other.cert_pem


def test_a_bundle_that_cannot_be_written_keeps_the_old_certificate_served(tmp_path):
    old = generate(DNS, now=T0)
    api, now = FakeApi(), [T0]
    api.store(old)
    (tmp_path / "r").mkdir()
    replica = certificates(api, tmp_path, now)
    asyncio.run(replica.start())
    api.bundle_fails = True
    now[0] = expires(old) - dt.timedelta(days=1)
    asyncio.run(replica.sync())
    assert served_pem(tmp_path) == old.cert_pem, "the API server may not trust the new CA yet"
    api.bundle_fails = False
    asyncio.run(replica.sync())
    assert served_pem(tmp_path) == api.stored().cert_pem


def test_a_deleted_secret_is_recreated_still_trusting_the_ca_being_served(tmp_path):
    api, now = FakeApi(), [T0]
    (tmp_path / "r").mkdir()
    replica = certificates(api, tmp_path, now)
    asyncio.run(replica.start())
    first = api.stored()
    api.secret = None
    asyncio.run(replica.sync())
    second = api.stored()
    assert second.ca_pem != first.ca_pem and second.previous_ca_pem == first.ca_pem
    assert api.trusted() == {second.ca_pem + first.ca_pem}


def test_the_first_certificate_of_a_bundle():
    one, two = generate(DNS), generate(DNS)
    assert first_certificate(base64.b64encode(one.ca_pem + two.ca_pem).decode()) == one.ca_pem
    assert first_certificate("not base64!") == b"" and first_certificate("") == b""
