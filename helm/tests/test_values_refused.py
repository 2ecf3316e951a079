"""Bad values are refused at render time, with a message that names the value and says what to do."""

from __future__ import annotations

import helm_python
import pytest

from conftest import SECURE, merge, render

INSECURE = {"insecure": True}

# (values, words the error must contain)
SCHEMA_FAILURES = [
    ({"meta": {"replicas": 2}}, ["/meta/replicas", "1, 3, 5"]),
    ({"meta": {"replicas": 4}}, ["/meta/replicas", "1, 3, 5"]),
    ({"meta": {"replicas": 7}}, ["/meta/replicas", "1, 3, 5"]),
    ({"meta": {"replicas": 0}}, ["/meta/replicas"]),
    ({"meta": {"initialVoters": 2}}, ["/meta/initialVoters", "1, 3, 5"]),
    ({"meta": {"replicas": "3"}}, ["/meta/replicas"]),
    ({"meta": {"bootstrap": "always"}}, ["/meta/bootstrap"]),
    ({"shard": {"replicas": 0}}, ["/shard/replicas"]),
    ({"shard": {"persistence": {"size": "lots"}}}, ["/shard/persistence/size"]),
    ({"router": {"antiAffinity": "sometimes"}}, ["/router/antiAffinity"]),
    ({"router": {"autoscaling": {"targetCPUUtilizationPercentage": 150}}}, ["targetCPUUtilizationPercentage"]),
    ({"router": {"extraArgs": ["insecure"]}}, ["/router/extraArgs"]),
    ({"embedder": {"url": "tei:8080"}}, ["/embedder/url"]),
    ({"auth": {"adminKey": "short"}}, ["/auth/adminKey"]),
    ({"image": {"pullPolicy": "Sometimes"}}, ["/image/pullPolicy"]),
    ({"config": {"routr": {"rrf_k": 30}}}, ["/config", "routr"]),
    ({"replicas": 3}, ["replicas", "not allowed"]),
]

# Well-formed values that cannot work together: refused by the templates' `fail`.
TEMPLATE_FAILURES = [
    ({}, ["refuses to run without TLS", "insecure=true"]),
    ({"tls": {"enabled": True, "existingSecret": "t"}}, ["admin key", "never generates"]),
    ({"tls": {"enabled": True, "existingSecret": "t", "mutual": False}, "auth": {"adminKey": "a" * 20}},
     ["cluster credential"]),
    ({"tls": {"enabled": True}, "auth": {"existingSecret": "k"}}, ["tls.existingSecret"]),
    ({"tls": {"enabled": True, "cert": "c", "key": "k"}, "auth": {"existingSecret": "k"}}, ["tls.mutual needs the cluster CA"]),
    (merge(INSECURE, {"meta": {"replicas": 1}}), ["meta.replicas (1) is below meta.initialVoters (3)", "attest meta remove"]),
    (merge(INSECURE, {"meta": {"replicas": 3, "initialVoters": 5}}), ["never implicit"]),
    (merge(INSECURE, {"embedder": {"enabled": True, "url": "http://tei:8080/embed"}}), ["exclusive"]),
    (merge(INSECURE, {"embedder": {"gpu": {"enabled": True}}}), ["embedder.gpu.enabled needs embedder.enabled"]),
    (merge(INSECURE, {"answer": {"autoscaling": {"minReplicas": 5, "maxReplicas": 2}}}), ["answer.autoscaling.minReplicas (5)"]),
]


@pytest.mark.parametrize("values,words", SCHEMA_FAILURES, ids=[str(v) for v, _ in SCHEMA_FAILURES])
def test_schema_refuses(values, words):
    with pytest.raises(helm_python.HelmValuesError) as err:
        render(merge(INSECURE, values))
    for w in words:
        assert w in str(err.value), str(err.value)


@pytest.mark.parametrize("values,words", TEMPLATE_FAILURES, ids=[str(v) for v, _ in TEMPLATE_FAILURES])
def test_templates_refuse_inconsistent_settings(values, words):
    with pytest.raises(helm_python.HelmRenderError) as err:
        render(values)
    for w in words:
        assert w in str(err.value), str(err.value)


def test_scale_down_is_allowed_only_when_acknowledged():
    render(merge(INSECURE, {"meta": {"replicas": 3, "initialVoters": 5, "allowScaleDown": True}}))
    render(SECURE)
