"""The commands the chart gives each container: peers that match the replica counts, probes on ports the process
serves, and only flags, subcommands and config keys the `attest` binary accepts."""

from __future__ import annotations

import re
import subprocess

import pytest

from conftest import (
    VALUE_SETS,
    argv_of_shell,
    attest_argv,
    attest_bin,
    by_kind,
    flag_name,
    known_flags,
    objects,
    script_flags,
    subcommands,
    workloads,
)

ALL_SETS = VALUE_SETS


def container(objs, kind, name):
    (c,) = by_kind(objs, kind)[name]["spec"]["template"]["spec"]["containers"]
    return c


def flags(argv: list[str]) -> dict[str, str]:
    """`--name=value` (or bare `--name`) arguments → {name: value}; each flag appears once."""
    out: dict[str, str] = {}
    for a in argv:
        if a.startswith("--"):
            name, _, value = a.partition("=")
            assert name not in out, f"{name} given twice"
            out[name] = value
    return out


@pytest.mark.parametrize(
    "name,voters",
    [("insecure-1-voter", 1), ("insecure-3-voters", 3), ("insecure-5-voters", 5), ("scale-up-3-to-5", 5)],
)
def test_meta_peers_match_replica_counts(name, voters):
    """The default bootstrap guard: no shell around attest, every pod lists every voter, the id from the pod name."""
    objs = objects(VALUE_SETS[name])
    meta = by_kind(objs, "StatefulSet")["demo-attest-meta"]
    assert meta["spec"]["replicas"] == voters
    argv, script = attest_argv(container(objs, "StatefulSet", "demo-attest-meta"))
    assert script == "", "the guard needs no wrapper script"
    f = flags(argv)
    assert "--bootstrap-if-empty" in f and "--meta-id-from-hostname" in f
    assert "--join" not in f and "--meta-id" not in f
    peers = [p.split("=", 1) for p in f["--meta-peers"].split(",")]
    assert [int(i) for i, _ in peers] == list(range(1, voters + 1))
    for i, (pid, addr) in enumerate(peers):
        assert addr == f"http://demo-attest-meta-{i}.demo-attest-meta-headless.search.svc.cluster.local:7601"
    assert f["--advertise"] == "http://$(POD_NAME).demo-attest-meta-headless.search.svc.cluster.local:7601"
    # Every client lists every voter.
    for w in workloads(objs):
        role = w["metadata"]["labels"]["app.kubernetes.io/component"]
        c = w["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert len(env["ATTEST_META"].split(",")) == voters
        if role in ("shard", "router", "answer"):
            addrs = flags(attest_argv(c)[0])["--meta"].split(",")
            assert addrs == [f"http://demo-attest-meta-{i}.demo-attest-meta-headless.search.svc.cluster.local:7601"
                             for i in range(voters)], role


def test_the_binary_takes_the_meta_id_from_the_pod_name(tmp_path):
    """`--meta-id-from-hostname` as a pod runs it: the id is the ordinal + 1 (a bad host name is refused)."""
    # A data directory that is a file: the process prints its id, then stops at opening the storage.
    not_a_dir = tmp_path / "data"
    not_a_dir.write_text("")
    for hostname, expect in [("demo-attest-meta-0", "id=1"), ("demo-attest-meta-4", "id=5"), ("no-ordinal", None)]:
        out = subprocess.run(
            [str(attest_bin()), "serve", "--insecure", "--role=meta", "--meta-id-from-hostname",
             "--grpc=127.0.0.1:0", f"--data-dir={not_a_dir}", "--log-level=error"],
            env={"HOSTNAME": hostname, "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=30,
        )
        if expect is None:
            assert out.returncode != 0 and "does not end in -ORDINAL" in out.stderr, out.stderr
        else:
            # It gets as far as printing its id, then cannot open the data directory.
            assert f" {expect} " in out.stdout, (out.stdout, out.stderr)


@pytest.mark.parametrize("name,voters,initial", [("meta-bootstrap-static", 3, 3), ("scale-up-3-to-5-static", 5, 3)])
def test_static_bootstrap_peers_and_wrapper(name, voters, initial):
    objs = objects(VALUE_SETS[name])
    argv, script = attest_argv(container(objs, "StatefulSet", "demo-attest-meta"))
    f = flags(argv)
    assert "--bootstrap-if-empty" not in f
    peers = [p.split("=", 1) for p in f["--meta-peers"].split(",")]
    assert [int(i) for i, _ in peers] == list(range(1, initial + 1))
    # The id is the ordinal + 1; ordinals from initialVoters on join instead of bootstrapping.
    assert '--meta-id="$((ordinal + 1))"' in script
    assert f'-ge {initial} ]' in script and "--join=http://demo-attest-meta.search.svc.cluster.local:7601" in script


def test_meta_script_computes_ids_from_ordinals():
    """Run the wrapper script as the pod would, with `attest` replaced by echo."""
    c = container(objects(VALUE_SETS["scale-up-3-to-5-static"]), "StatefulSet", "demo-attest-meta")
    script = c["args"][2].replace('exec attest "$@"', 'exec echo "$@"')
    for ordinal, expect_join in [(0, False), (2, False), (3, True), (4, True)]:
        out = subprocess.run(
            ["/bin/sh", "-c", script, "attest", "serve", "--role=meta"],
            env={"POD_NAME": f"demo-attest-meta-{ordinal}", "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, check=True,
        ).stdout.split()
        assert f"--meta-id={ordinal + 1}" in out
        assert any(a.startswith("--join=") for a in out) == expect_join, (ordinal, out)


def test_shard_identity_and_addresses():
    objs = objects(VALUE_SETS["tls-inline-secrets"])
    f = flags(attest_argv(container(objs, "StatefulSet", "demo-attest-shard"))[0])
    assert f["--node-name"] == "$(POD_NAME)"
    assert f["--advertise"] == "https://$(POD_NAME).demo-attest-shard-headless.search.svc.cluster.local:7801"
    assert all(a.startswith("https://") for a in f["--meta"].split(","))
    answer = flags(attest_argv(container(objs, "Deployment", "demo-attest-answer"))[0])
    assert answer["--router"] == "https://demo-attest-router.search.svc.cluster.local:7701"
    services = by_kind(objs, "Service")
    assert 7701 in {p["port"] for p in services["demo-attest-router"]["spec"]["ports"]}


def test_embedder_wiring():
    def embedder_url(values, name):
        return flags(attest_argv(container(objects(values), "Deployment", name))[0]).get("--embedder-url")

    assert embedder_url(VALUE_SETS["insecure-3-voters"], "demo-attest-router") is None
    assert embedder_url(VALUE_SETS["external-embedder"], "demo-attest-router") == "http://tei.gpu.svc:8080/embed"
    assert embedder_url(VALUE_SETS["external-embedder"], "demo-attest-answer") == "http://tei.gpu.svc:8080/embed"
    url = embedder_url(VALUE_SETS["gpu-embedder"], "demo-attest-router")
    assert url == "https://demo-attest-embedder.search.svc.cluster.local:7900/v1/embeddings"
    assert "demo-attest-embedder" in by_kind(objects(VALUE_SETS["gpu-embedder"]), "Service")


def listen_ports(argv: list[str]) -> dict[str, int]:
    """Ports the process binds: --grpc and --http listen addresses."""
    f = flags(argv)
    return {k[2:]: int(f[k].rsplit(":", 1)[1]) for k in ("--grpc", "--http") if k in f}


def test_every_probe_targets_a_served_port(value_set):
    name, values = value_set
    tls = bool(values.get("tls", {}).get("enabled"))
    for w in workloads(objects(values)):
        for c in w["spec"]["template"]["spec"]["containers"]:
            argv, _ = attest_argv(c)
            served = listen_ports(argv)
            declared = {p["containerPort"]: p["name"] for p in c["ports"]}
            assert set(declared) == set(served.values()), f"{c['name']}: containerPorts {declared} vs listeners {served}"
            assert {declared[port] for port in served.values()} == set(served), "port names match the listeners"
            for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                probe = c[kind]
                if "grpc" in probe:
                    assert not tls, "kubelet's gRPC probe cannot speak TLS"
                    assert probe["grpc"]["port"] == served["grpc"], (c["name"], kind)
                    # The overall status ("") is readiness; only the `liveness` service says the process is up,
                    # so a node still replaying its log is not restarted.
                    expected = "liveness" if kind == "livenessProbe" else None
                    assert probe["grpc"].get("service") == expected, (c["name"], kind)
                else:
                    # The embedder's port too: under mutual TLS it asks for a client certificate without requiring
                    # one, and only its API routes want it (tests/tls.rs probes it without one).
                    assert tls and probe["httpGet"]["scheme"] == "HTTPS"
                    assert probe["httpGet"]["port"] == served["http"], (c["name"], kind)
                    expected = "/healthz" if kind == "livenessProbe" else "/readyz"
                    assert probe["httpGet"]["path"] == expected


def test_every_flag_is_one_the_binary_accepts(value_set):
    name, values = value_set
    serve = known_flags("serve")
    assert "--role" in serve and "--meta-peers" in serve, "could not read `attest serve --help`"
    for w in workloads(objects(values)):
        for c in w["spec"]["template"]["spec"]["containers"]:
            argv, script = attest_argv(c)
            assert argv[0] == "serve"
            given = [flag_name(a) for a in argv[1:] if a.startswith("--")] + script_flags(script)
            unknown = sorted(set(given) - serve)
            assert not unknown, f"{name}/{c['name']}: attest serve does not accept {unknown}"
            assert all(a.startswith("--") for a in argv[1:]), "every argument is --flag or --flag=value"


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_lifecycle_hooks_run_commands_the_binary_has(name):
    """A preStop hook that names a subcommand or flag the binary lacks fails at every pod stop, silently. (The
    router's and answer tier's hooks are a plain `sleep`.)"""
    hooks = 0
    for w in workloads(objects(VALUE_SETS[name])):
        for c in w["spec"]["template"]["spec"]["containers"]:
            hook = c.get("lifecycle", {}).get("preStop", {}).get("exec")
            if not hook:
                continue
            words = argv_of_shell(hook["command"])
            if words[0] == "sleep":
                # The Deployments' hook: keep serving while the pod leaves the Service (`sleep` is in the image).
                assert len(words) == 2 and words[1].isdigit(), words
                continue
            hooks += 1
            assert words[0] == "attest", words
            command = tuple(w for w in words[1:3] if not w.startswith("-"))
            assert command[-1] in subcommands(*command[:-1]), command
            given = {flag_name(a) for a in words[3:] if a.startswith("--")}
            assert given <= known_flags(*command), sorted(given - known_flags(*command))
    drain = VALUE_SETS[name].get("shard", {}).get("drain", {}).get("enabled", True)
    assert hooks == (1 if drain else 0), f"{hooks} preStop hooks with shard.drain.enabled={drain}"


def test_operator_commands_in_notes_exist():
    assert "status" in subcommands()
    assert "rebalance" in subcommands("cluster")
    status = known_flags("status")
    assert {"--meta", "--cluster-key", "--tls-ca"} <= status


@pytest.mark.parametrize("name", sorted(ALL_SETS))
def test_rendered_config_is_valid_for_the_binary(name, tmp_path):
    cm = by_kind(objects(ALL_SETS[name]), "ConfigMap")["demo-attest-config"]
    path = tmp_path / "config.yaml"
    path.write_text(cm["data"]["config.yaml"])
    out = subprocess.run(
        [str(attest_bin()), "config", "check", "--config", str(path)],
        capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr


def test_a_bad_config_key_is_caught_by_the_binary(tmp_path):
    """The config is checked by the binary, not only by the schema's list of sections."""
    cm = by_kind(objects({"insecure": True, "config": {"router": {"no_such_key": 1}}}), "ConfigMap")
    path = tmp_path / "config.yaml"
    path.write_text(cm["demo-attest-config"]["data"]["config.yaml"])
    out = subprocess.run([str(attest_bin()), "config", "check", "--config", str(path)], capture_output=True, text=True)
    assert out.returncode != 0 and re.search(r"router\.no_such_key", out.stdout + out.stderr)


def test_the_flag_check_catches_an_unknown_flag():
    """The check above is not vacuous: a flag the binary lacks, given through extraArgs, is reported."""
    serve = known_flags("serve")
    objs = objects({"insecure": True, "router": {"extraArgs": ["--no-such-flag=1"]}})
    argv, _ = attest_argv(container(objs, "Deployment", "demo-attest-router"))
    assert "--no-such-flag" in {flag_name(a) for a in argv} - serve
