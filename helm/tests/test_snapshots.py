"""Scheduled backups (values `snapshots`): the CronJob running `attest snapshot create` against the router, and the
S3 environment and shared volume of the pods that move the files (shard nodes and router)."""

from __future__ import annotations

import shutil
import subprocess
from urllib.parse import urlsplit

import helm_python
import kubernetes_validate
import pytest

from conftest import (
    ADMIN_KEY,
    CHART,
    NAMESPACE,
    RELEASE,
    VALUE_SETS,
    attest_argv,
    attest_bin,
    by_kind,
    flag_name,
    known_flags,
    merge,
    objects,
    render,
    subcommands,
    workloads,
)

S3 = VALUE_SETS["snapshots-s3-tls"]
VOLUME = VALUE_SETS["snapshots-volume-insecure"]
EXISTING = merge(
    VALUE_SETS["tls-existing-secrets"],
    {"snapshots": {"enabled": True, "destination": "s3://b", "s3": {"existingSecret": "attest-s3"}}},
)
CRONJOB = f"{RELEASE}-attest-snapshot"
MOVERS = {"shard", "router"}  # the roles that write and read snapshot files


def cronjob(values: dict) -> dict:
    return by_kind(objects(values), "CronJob")[CRONJOB]


def job_pod(values: dict) -> dict:
    return cronjob(values)["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def job_container(values: dict) -> dict:
    (c,) = job_pod(values)["containers"]
    return c


def flags(argv: list[str]) -> dict[str, str]:
    out = {}
    for a in argv:
        name, _, value = a.partition("=")
        assert name not in out, f"{name} given twice"
        out[name] = value
    return out


def role_containers(objs: list[dict]) -> dict[str, dict]:
    return {
        w["metadata"]["labels"]["app.kubernetes.io/component"]: w["spec"]["template"]["spec"]["containers"][0]
        for w in workloads(objs)
    }


def test_disabled_by_default():
    for values in ({"insecure": True}, VALUE_SETS["tls-inline-secrets"]):
        objs = objects(values)
        assert "CronJob" not in {o["kind"] for o in objs}
        for role, c in role_containers(objs).items():
            assert not any(e["name"].startswith("AWS_") for e in c["env"]), role
            assert not any(m["name"] == "snapshots" for m in c["volumeMounts"]), role
        assert "Backups" not in render(values)["attest/templates/NOTES.txt"]


@pytest.mark.parametrize("kube", ["1.27.0", kubernetes_validate.latest_version()])
@pytest.mark.parametrize("values", [S3, VOLUME, EXISTING], ids=["s3-tls", "volume-insecure", "existing-secrets"])
def test_cronjob_validates_strictly(values, kube):
    kubernetes_validate.validate(cronjob(values), kube, strict=True)


def test_cronjob_settings():
    spec = cronjob(S3)["spec"]
    assert spec["schedule"] == "0 3 * * *" and spec["timeZone"] == "Europe/Paris"
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["startingDeadlineSeconds"] == 600
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 3)
    job = spec["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 2 and job["activeDeadlineSeconds"] == 7200
    assert job["template"]["spec"]["restartPolicy"] == "Never"
    assert "timeZone" not in cronjob(VOLUME)["spec"]
    assert "activeDeadlineSeconds" not in cronjob(VOLUME)["spec"]["jobTemplate"]["spec"]
    notes = render(S3)["attest/templates/NOTES.txt"]
    assert f"CronJob {CRONJOB}" in notes and "attest snapshot restore --from s3://attest-backups/nightly" in notes


@pytest.mark.parametrize("values", [S3, VOLUME, EXISTING], ids=["s3-tls", "volume-insecure", "existing-secrets"])
def test_cronjob_pod_runs_non_root_with_read_only_root(values):
    pod = job_pod(values)
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["automountServiceAccountToken"] is False
    c = job_container(values)
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert any(m["mountPath"] == "/tmp" for m in c["volumeMounts"])
    # The same image as the serving pods.
    assert c["image"] == role_containers(objects(values))["router"]["image"]


def test_the_volume_is_the_one_snapshot_root_of_the_pods_that_move_files():
    """A node admits a directory destination only under `snapshots.allowed_roots` (issue 69): with a volume, its
    mount path; without one, none."""
    for role, c in role_containers(objects(VOLUME)).items():
        env = {e["name"]: e.get("value") for e in c["env"]}
        if role in MOVERS:
            assert env["ATTEST__SNAPSHOTS__ALLOWED_ROOTS"] == '["/var/backups/attest"]', role
        else:
            assert "ATTEST__SNAPSHOTS__ALLOWED_ROOTS" not in env, role
    for c in role_containers(objects(S3)).values():
        assert "ATTEST__SNAPSHOTS__ALLOWED_ROOTS" not in {e["name"] for e in c["env"]}


def test_command_is_snapshot_create_with_the_values():
    argv, script = attest_argv(job_container(S3))
    assert not script and argv[:2] == ["snapshot", "create"]
    f = flags(argv[2:])
    assert f["--to"] == "s3://attest-backups/nightly"
    assert f["--keep"] == "7"
    assert f["--collections"] == "docs,faq"
    assert "--json" in f
    f = flags(attest_argv(job_container(VOLUME))[0][2:])
    assert f["--to"] == "/var/backups/attest/nightly" and f["--keep"] == "3"
    assert "--collections" not in f, "no list: every collection"


@pytest.mark.parametrize("values", [S3, VOLUME], ids=["s3-tls", "volume-insecure"])
def test_every_flag_is_one_the_binary_accepts(values):
    assert "create" in subcommands("snapshot")
    known = known_flags("snapshot", "create")
    assert {"--to", "--keep", "--server"} <= known, "could not read `attest snapshot create --help`"
    argv, _ = attest_argv(job_container(values))
    given = {flag_name(a) for a in argv[2:]}
    assert all(a.startswith("--") for a in argv[2:])
    assert given <= known, f"attest snapshot create does not accept {sorted(given - known)}"


def test_the_binary_parses_the_rendered_command():
    """Not only the flag names: the whole argument vector gets past the binary's parser (a usage error exits 2) and
    fails only where it calls the router, here a closed loopback port."""
    argv, _ = attest_argv(job_container(S3))
    argv = [a if not a.startswith("--server=") else "--server=http://127.0.0.1:9" for a in argv]
    out = subprocess.run(
        [str(attest_bin()), *argv], capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"}
    )
    assert out.returncode not in (0, 2), out.stderr
    assert "cannot reach the router" in out.stderr, out.stderr


@pytest.mark.parametrize("values,scheme", [(S3, "https"), (VOLUME, "http")], ids=["tls", "insecure"])
def test_server_is_the_router_service_http_port(values, scheme):
    objs = objects(values)
    f = flags(attest_argv(job_container(values))[0][2:])
    url = urlsplit(f["--server"])
    assert url.scheme == scheme
    service = f"{RELEASE}-attest-router"
    assert url.hostname == f"{service}.{NAMESPACE}.svc.cluster.local"
    (http,) = [p for p in by_kind(objs, "Service")[service]["spec"]["ports"] if p["name"] == "http"]
    assert url.port == http["port"]
    # The port the Service sends to is the router's HTTP listener.
    router = role_containers(objs)["router"]
    (target,) = [p["containerPort"] for p in router["ports"] if p["name"] == http["targetPort"]]
    assert f"--http=0.0.0.0:{target}" in router["args"]


@pytest.mark.parametrize(
    "values,secret", [(S3, f"{RELEASE}-attest-auth"), (EXISTING, "attest-keys")], ids=["inline", "existing"]
)
def test_api_key_comes_from_the_auth_secret(values, secret):
    c = job_container(values)
    env = {e["name"]: e for e in c["env"]}
    ref = env["ATTEST_API_KEY"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": secret, "key": "admin-key"}
    # The same Secret and key the router's own admin key comes from.
    router = {e["name"]: e for e in role_containers(objects(values))["router"]["env"]}
    assert router["ATTEST_ADMIN_KEY"]["valueFrom"]["secretKeyRef"] == ref
    assert ADMIN_KEY not in " ".join(c["args"])
    # insecure: no Secret exists and none is needed.
    assert "ATTEST_API_KEY" not in {e["name"] for e in job_container(VOLUME)["env"]}


def test_ca_cert_from_the_tls_secret_when_tls_is_on():
    pod = job_pod(S3)
    c = job_container(S3)
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["ATTEST_CA_CERT"] == "/etc/attest/tls/ca.crt"
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "tls"]
    assert mount["mountPath"] == "/etc/attest/tls" and mount["readOnly"] is True
    (vol,) = [v for v in pod["volumes"] if v["name"] == "tls"]
    assert vol["secret"]["secretName"] == f"{RELEASE}-attest-tls"
    assert vol["secret"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}], "the CA only, never the private key"
    (vol,) = [v for v in job_pod(EXISTING)["volumes"] if v["name"] == "tls"]
    assert vol["secret"]["secretName"] == "attest-tls"
    insecure = job_container(VOLUME)
    assert "ATTEST_CA_CERT" not in {e["name"] for e in insecure["env"]}
    assert not any(m["name"] == "tls" for m in insecure["volumeMounts"])


def test_s3_environment_on_shard_and_router():
    for role, c in role_containers(objects(S3)).items():
        env = {e["name"]: e for e in c["env"]}
        aws = {k for k in env if k.startswith("AWS_")}
        if role not in MOVERS:
            assert not aws, role
            continue
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            ref = env[key]["valueFrom"]["secretKeyRef"]
            assert ref["name"] == "attest-s3" and ref["key"] == key, role
        assert env["AWS_SESSION_TOKEN"]["valueFrom"]["secretKeyRef"]["optional"] is True
        assert env["AWS_ENDPOINT_URL"]["value"] == "https://minio.storage.svc:9000"
        assert env["AWS_REGION"]["value"] == "eu-west-1"
        assert "AWS_ALLOW_HTTP" not in env
    # The CronJob's pod only calls the router: no storage credentials there.
    assert not any(e["name"].startswith("AWS_") for e in job_container(S3)["env"])
    # Without a Secret (e.g. IRSA), only the endpoint settings.
    for role in MOVERS:
        env = {e["name"]: e.get("value") for e in role_containers(objects(VOLUME))[role]["env"]}
        assert env["AWS_ENDPOINT_URL"] == "http://minio.storage.svc:9000" and env["AWS_ALLOW_HTTP"] == "true"
        assert "AWS_ACCESS_KEY_ID" not in env and "AWS_REGION" not in env


def test_s3_settings_apply_without_the_schedule():
    """For `attest snapshot create|restore` by hand: the pods get the storage settings with enabled=false too."""
    values = {"insecure": True, "snapshots": {"s3": {"region": "us-east-1"}, "volume": {"claimName": "attest-backups"}}}
    objs = objects(values)
    assert "CronJob" not in {o["kind"] for o in objs}
    for role in MOVERS:
        c = role_containers(objs)[role]
        assert {"name": "AWS_REGION", "value": "us-east-1"} in c["env"]
        assert {"name": "snapshots", "mountPath": "/var/backups/attest"} in c["volumeMounts"]


def test_volume_mounted_on_shard_and_router_at_the_same_path():
    objs = objects(VOLUME)
    paths = set()
    for w in workloads(objs):
        role = w["metadata"]["labels"]["app.kubernetes.io/component"]
        pod = w["spec"]["template"]["spec"]
        mounts = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "snapshots"]
        vols = [v for v in pod["volumes"] if v["name"] == "snapshots"]
        if role not in MOVERS:
            assert not mounts and not vols, role
            continue
        assert vols == [{"name": "snapshots", "persistentVolumeClaim": {"claimName": "attest-backups"}}], role
        (m,) = mounts
        assert not m.get("readOnly"), "snapshots are written there"
        paths.add(m["mountPath"])
    assert paths == {"/var/backups/attest"}
    destination = flags(attest_argv(job_container(VOLUME))[0][2:])["--to"]
    assert destination.startswith("/var/backups/attest/")


# (snapshots values, words the schema's error must contain)
SCHEMA_FAILURES = [
    ({"keep": 0}, ["/snapshots/keep"]),
    ({"keep": -1}, ["/snapshots/keep"]),
    ({"keep": "7"}, ["/snapshots/keep"]),
    ({"enabled": True}, ["/snapshots/destination"]),
    ({"enabled": True, "destination": ""}, ["/snapshots/destination"]),
    ({"schedule": 5}, ["/snapshots/schedule"]),
    ({"schedule": ["0 3 * * *"]}, ["/snapshots/schedule"]),
    ({"schedule": "daily"}, ["/snapshots/schedule"]),
    ({"schedule": "0 3 * *"}, ["/snapshots/schedule"]),
    ({"destination": "backups/nightly"}, ["/snapshots/destination"]),
    ({"destination": "s3://"}, ["/snapshots/destination"]),
    ({"collections": "docs"}, ["/snapshots/collections"]),
    ({"collections": ["docs,faq"]}, ["/snapshots/collections"]),
    ({"concurrencyPolicy": "Allow"}, ["/snapshots/concurrencyPolicy"]),
    ({"startingDeadlineSeconds": 5}, ["/snapshots/startingDeadlineSeconds"]),
    ({"s3": {"endpoint": "minio:9000"}}, ["/snapshots/s3/endpoint"]),
    ({"s3": {"bucket": "b"}}, ["/snapshots/s3", "bucket"]),
    ({"volume": {"mountPath": "backups"}}, ["/snapshots/volume/mountPath"]),
    ({"retention": 7}, ["/snapshots", "retention"]),
]


@pytest.mark.parametrize("snapshots,words", SCHEMA_FAILURES, ids=[str(v) for v, _ in SCHEMA_FAILURES])
def test_schema_refuses(snapshots, words):
    with pytest.raises(helm_python.HelmValuesError) as err:
        render({"insecure": True, "snapshots": snapshots})
    for w in words:
        assert w in str(err.value), str(err.value)


TEMPLATE_FAILURES = [
    ({"enabled": True, "destination": "/data/backups"}, ["is a directory", "snapshots.volume.claimName"]),
    ({"destination": "/data/backups", "volume": {"claimName": "c"}}, ["not under snapshots.volume.mountPath"]),
    ({"volume": {"claimName": "c", "mountPath": "/var/lib/attest/backups"}}, ["overlaps /var/lib/attest"]),
    ({"volume": {"claimName": "c", "mountPath": "/etc"}}, ["overlaps /etc/attest"]),
]


@pytest.mark.parametrize("snapshots,words", TEMPLATE_FAILURES, ids=[str(v) for v, _ in TEMPLATE_FAILURES])
def test_templates_refuse(snapshots, words):
    with pytest.raises(helm_python.HelmRenderError) as err:
        render({"insecure": True, "snapshots": snapshots})
    for w in words:
        assert w in str(err.value), str(err.value)


def test_template_refuses_no_destination_even_without_the_schema(tmp_path):
    """`helm install --skip-schema-validation` still stops on an enabled schedule with nowhere to write."""
    copy = tmp_path / "attest"
    shutil.copytree(CHART, copy, symlinks=False)
    (copy / "values.schema.json").unlink()
    chart = helm_python.Chart.load(str(copy))
    with pytest.raises(helm_python.HelmRenderError) as err:
        chart.render({"insecure": True, "snapshots": {"enabled": True}}, name=RELEASE, namespace=NAMESPACE,
                     is_install=True)
    assert "snapshots.enabled needs snapshots.destination" in str(err.value)
