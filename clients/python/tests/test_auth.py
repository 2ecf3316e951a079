"""API keys against `attest dev --admin-key`, and the custom CA setting."""

from __future__ import annotations

import shutil
import ssl
import subprocess

import pytest

import attest
from conftest import ADMIN_KEY, wait_until


def test_no_key_is_refused(dev_auth):
    with attest.Client(dev_auth.url, api_key="") as anonymous:
        with pytest.raises(attest.AuthenticationError) as e:
            anonymous.list_collections()
    assert (e.value.status, e.value.code) == (401, "UNAUTHENTICATED")


def test_a_wrong_key_is_refused(dev_auth):
    with attest.Client(dev_auth.url, api_key="attest_nope_0123456789") as c:
        with pytest.raises(attest.AuthenticationError):
            c.list_collections()


def test_the_key_from_the_environment(dev_auth, monkeypatch):
    monkeypatch.setenv("ATTEST_API_KEY", ADMIN_KEY)
    with attest.Client(dev_auth.url) as c:
        assert isinstance(c.list_collections(), list)


def test_minted_keys_are_scoped_and_revocable(dev_auth):
    with attest.Client(dev_auth.url, api_key=ADMIN_KEY) as admin:
        admin.create_collection("auth-docs", shards=1)
        admin.upload_documents("auth-docs", [{"id": "a", "text": "Keys carry scopes and tenants."}],
                               progress=False)
        minted = admin.create_key(["read"], ["*"], collections=["auth-docs"])
        assert minted.key and minted.scopes == ["read"] and not minted.revoked
        assert minted.id in [k.id for k in admin.list_keys()]

        with attest.Client(dev_auth.url, api_key=minted.key) as reader:
            assert [h.doc_id for h in reader.search("auth-docs", "scopes").hits] == ["a"]
            with pytest.raises(attest.PermissionDeniedError) as denied:
                reader.create_collection("auth-other")
            assert (denied.value.status, denied.value.code) == (403, "PERMISSION_DENIED")

            assert admin.revoke_key(minted.id).revoked

            def refused() -> bool:
                try:
                    reader.search("auth-docs", "scopes")
                except attest.AuthenticationError:
                    return True
                return False

            wait_until(refused, 10, "the revoked key to be refused")


def test_ca_cert_is_trusted_besides_the_system_store(tmp_path, monkeypatch):
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a CA")
    ca = tmp_path / "ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=attest-pyclient-test-ca", "-keyout", str(tmp_path / "ca.key"), "-out", str(ca)],
                   check=True, capture_output=True)
    with attest.Client("https://127.0.0.1:1", ca_cert=ca) as c:
        context = c.settings.verify()
    assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_REQUIRED
    subjects = [dict(x[0] for x in cert["subject"]) for cert in context.get_ca_certs()]
    assert {"commonName": "attest-pyclient-test-ca"} in subjects

    monkeypatch.setenv("ATTEST_CA_CERT", str(ca))
    with attest.Client("https://127.0.0.1:1") as from_env:
        assert from_env.settings.ca_cert == str(ca)
    with pytest.raises(FileNotFoundError):
        attest.Client("https://127.0.0.1:1", ca_cert=tmp_path / "missing.pem")
