from __future__ import annotations

import base64
import json
import ssl
import urllib.request

from optsched.controller.certs import TlsMaterial, ca_bundle_patch, generate, service_dns_names
from optsched.controller.webhook import MUTATE_PATH, WebhookServer
from optsched.model.names import PLAN_ID_LABEL


def test_secret_round_trip_and_ca_bundle_patch_only_where_stale():
    material = generate(service_dns_names("optsched-webhook", "optsched-system"))
    assert TlsMaterial.from_secret({"data": material.secret_data()}) == material
    bundle = base64.b64encode(material.ca_pem).decode()
    config = {
        "webhooks": [{"name": "a", "clientConfig": {"caBundle": bundle}}, {"name": "b", "clientConfig": {}}]
    }
    assert ca_bundle_patch(config, material.ca_pem) == [
        {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": bundle}
    ]


def test_webhook_serves_over_tls_with_the_generated_certificate(tmp_path):
    material = generate(["localhost"])
    cert, key = material.write(str(tmp_path))
    server = WebhookServer("127.0.0.1", 0, cert, key)
    server.start()
    try:
        ca = tmp_path / "ca.crt"
        ca.write_bytes(material.ca_pem)
        context = ssl.create_default_context(cafile=str(ca))
        review = {
            "request": {
                "uid": "1",
                "operation": "CREATE",
                "kind": {"kind": "Pod"},
                "object": {"metadata": {"labels": {PLAN_ID_LABEL: "p"}}, "spec": {}},
            }
        }
        request = urllib.request.Request(
            f"https://localhost:{server.port}{MUTATE_PATH}",
            data=json.dumps(review).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, context=context, timeout=10) as resp:
            body = json.loads(resp.read())
        assert body["response"]["allowed"] and body["response"]["patchType"] == "JSONPatch"
    finally:
        server.stop()
