"""Offline tests of the Helm chart (helm/attest) and the image's runtime contract (deploy/).

The chart is rendered with helm-python-sdk (Helm's Go SDK through ctypes: no `helm` binary, no cluster), each
object is validated against the Kubernetes schemas with kubernetes-validate, and the rendered commands are checked
against the real `attest` binary (`$ATTEST_BIN`, default the debug build in ~/.cache/attest-target).
Run through scripts/chart-test.sh, which makes the pinned virtual environment.
"""

from __future__ import annotations

import copy
import functools
import os
import re
import shlex
import subprocess
from pathlib import Path

import helm_python
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "attest"
RELEASE = "demo"
NAMESPACE = "search"

# Key material for value sets: well-formed placeholders, never real secrets.
ADMIN_KEY = "admin-key-for-chart-tests-0001"
CLUSTER_KEY = "cluster-key-for-chart-tests-01"
PEM = "-----BEGIN CERTIFICATE-----\nMIIBchart-test\n-----END CERTIFICATE-----\n"


def merge(base: dict, extra: dict) -> dict:
    """Deep merge of values dictionaries (extra wins)."""
    out = copy.deepcopy(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


SECURE = {
    "auth": {"adminKey": ADMIN_KEY, "clusterKey": CLUSTER_KEY},
    "tls": {"enabled": True, "cert": PEM, "key": PEM, "ca": PEM},
}

# The value sets every structural test runs on.
VALUE_SETS: dict[str, dict] = {
    "insecure-1-voter": {"insecure": True, "meta": {"replicas": 1, "initialVoters": 1}},
    "insecure-3-voters": {"insecure": True},
    "insecure-5-voters": {"insecure": True, "meta": {"replicas": 5, "initialVoters": 5}},
    "scale-up-3-to-5": {"insecure": True, "meta": {"replicas": 5, "initialVoters": 3}},
    "meta-bootstrap-static": {"insecure": True, "meta": {"bootstrap": "static"}},
    "scale-up-3-to-5-static": {"insecure": True, "meta": {"replicas": 5, "initialVoters": 3, "bootstrap": "static"}},
    "tls-inline-secrets": SECURE,
    "tls-existing-secrets": {
        "auth": {"existingSecret": "attest-keys"},
        "tls": {"enabled": True, "existingSecret": "attest-tls"},
        "metricsToken": {"existingSecret": "attest-metrics"},
    },
    "tls-no-mutual-cluster-key": merge(SECURE, {"tls": {"mutual": False, "ca": ""}}),
    "gpu-embedder": merge(SECURE, {"embedder": {"enabled": True, "gpu": {"enabled": True}}}),
    "embedder-cpu-insecure": {"insecure": True, "embedder": {"enabled": True}},
    "external-embedder": {"insecure": True, "embedder": {"url": "http://tei.gpu.svc:8080/embed"}},
    "hpa-off": {
        "insecure": True,
        "router": {"autoscaling": {"enabled": False}, "replicas": 3},
        "answer": {"autoscaling": {"enabled": False}, "replicas": 1},
        "embedder": {"enabled": True, "autoscaling": {"enabled": False}, "replicas": 1},
    },
    "monitoring-and-config": merge(
        SECURE,
        {
            "metrics": {
                "serviceMonitor": {"enabled": True},
                "dashboard": {"enabled": True},
                "prometheusRule": {"enabled": True, "recallTarget": 0.97},
            },
            "config": {"router": {"rrf_k": 30}, "answer": {"min_confidence": 0.5}},
            "shard": {"zone": "zone-a", "drain": {"enabled": False}},
        },
    ),
    "snapshots-s3-tls": merge(
        SECURE,
        {
            "snapshots": {
                "enabled": True,
                "destination": "s3://attest-backups/nightly",
                "collections": ["docs", "faq"],
                "timeZone": "Europe/Paris",
                "activeDeadlineSeconds": 7200,
                "s3": {"existingSecret": "attest-s3", "endpoint": "https://minio.storage.svc:9000", "region": "eu-west-1"},
            }
        },
    ),
    "snapshots-volume-insecure": {
        "insecure": True,
        "router": {"autoscaling": {"enabled": False}},
        "snapshots": {
            "enabled": True,
            "destination": "/var/backups/attest/nightly",
            "keep": 3,
            "volume": {"claimName": "attest-backups"},
            "s3": {"endpoint": "http://minio.storage.svc:9000", "allowHttp": True},
        },
    },
    "no-answer-affinity-none": {
        "insecure": True,
        "answer": {"enabled": False},
        "router": {"antiAffinity": "none", "topologySpread": {"enabled": False}},
    },
}

@functools.lru_cache(maxsize=1)
def chart() -> helm_python.Chart:
    return helm_python.Chart.load(str(CHART))


def render(values: dict) -> dict[str, str]:
    """Template path → rendered text, as `helm template demo helm/attest -n search` gives it."""
    return chart().render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)


class StrictLoader(yaml.SafeLoader):
    """A YAML loader that refuses a key given twice in one mapping (PyYAML keeps the last silently; two documents
    run together by a missing `---` look exactly like that)."""


def _no_duplicates(loader, node, deep=False):
    keys = [loader.construct_object(k, deep=deep) for k, _ in node.value]
    dups = {k for k in keys if keys.count(k) > 1}
    if dups:
        raise yaml.constructor.ConstructorError(None, None, f"duplicate keys {sorted(dups)}", node.start_mark)
    return loader.construct_mapping(node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def objects(values: dict) -> list[dict]:
    """Every rendered Kubernetes object (NOTES.txt excluded)."""
    out = []
    for path, text in sorted(render(values).items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.load_all(text, Loader=StrictLoader):
            if doc:
                out.append(doc)
    return out


def by_kind(objs: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


def workloads(objs: list[dict]) -> list[dict]:
    return [o for o in objs if o["kind"] in ("StatefulSet", "Deployment")]


def attest_argv(container: dict) -> tuple[list[str], str]:
    """The `attest ...` argument vector of a container and the shell script around it, if any.

    The image's entrypoint is tini, so the chart sets only `args`: either `attest serve ...`, or
    `/bin/sh -c SCRIPT attest serve ...` where SCRIPT execs attest with "$@" plus flags it computes.
    """
    args = container.get("args") or []
    assert "command" not in container, "command would replace tini as PID 1"
    if args[:2] == ["/bin/sh", "-c"]:
        script, zero, rest = args[2], args[3], args[4:]
        assert zero == "attest"
        assert re.search(r'exec attest "\$@"', script), script
        return rest, script
    assert args[0] == "attest", args
    return args[1:], ""


def flag_name(arg: str) -> str:
    return arg.split("=", 1)[0]


def script_flags(script: str) -> list[str]:
    """Flags a wrapper script adds (`--meta-id=...`, `--join=...`)."""
    return re.findall(r"(--[a-z][a-z0-9-]*)=", script)


@functools.lru_cache(maxsize=1)
def attest_bin() -> Path:
    path = Path(
        os.environ.get("ATTEST_BIN")
        or Path(os.environ.get("CARGO_TARGET_DIR", Path.home() / ".cache" / "attest-target")) / "debug" / "attest"
    )
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"no attest binary at {path}: build it (make build) or set ATTEST_BIN")
    return path


@functools.lru_cache(maxsize=None)
def help_text(*subcommand: str) -> str:
    out = subprocess.run(
        [str(attest_bin()), *subcommand, "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    if out.returncode != 0:
        return ""
    return out.stdout


def known_flags(*subcommand: str) -> set[str]:
    """Long flags `attest SUBCOMMAND --help` lists."""
    return set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)", help_text(*subcommand), re.M))


def subcommands(*parent: str) -> set[str]:
    text = help_text(*parent)
    block = text.split("Commands:", 1)[1].split("\n\n", 1)[0] if "Commands:" in text else ""
    return {line.split()[0] for line in block.splitlines() if line.strip()}


def argv_of_shell(command: list[str]) -> list[str]:
    """`attest ...` words of an exec hook (`/bin/sh -c "exec attest ..."`)."""
    if command[:2] == ["/bin/sh", "-c"]:
        words = shlex.split(command[2])
        if words and words[0] == "exec":
            words = words[1:]
        return words
    return command


@pytest.fixture(params=sorted(VALUE_SETS), ids=sorted(VALUE_SETS))
def value_set(request) -> tuple[str, dict]:
    return request.param, VALUE_SETS[request.param]
