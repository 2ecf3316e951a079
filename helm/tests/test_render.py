"""Every value set renders to objects Kubernetes accepts, with the properties operators rely on."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest
import yaml

from conftest import (
    ADMIN_KEY,
    CHART,
    REPO,
    SECURE,
    VALUE_SETS,
    by_kind,
    merge,
    objects,
    render,
    workloads,
)

# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion: native gRPC probes) and the newest schemas.
KUBE_VERSIONS = ["1.27.0", kubernetes_validate.latest_version()]
# Custom resources have no schema in kubernetes-validate; their shape is checked in test_service_monitors_and_dashboard
# and test_the_recall_alert_watches_the_metric_the_shards_export.
CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule"}


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_objects_validate_strictly(name, kube):
    values = VALUE_SETS[name]
    objs = objects(values)
    assert objs
    for obj in objs:
        if obj["kind"] in CUSTOM_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, kube, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} on {kube}: {e.message} at {list(e.path)}")


def test_rendering_is_deterministic(value_set):
    """Nothing is generated at render time: GitOps tools re-render and must see no change."""
    _, values = value_set
    assert render(values) == render(values)


def test_templates_never_generate_or_look_up_secrets():
    for path in (CHART / "templates").iterdir():
        text = path.read_text()
        for banned in ("lookup", "randAlphaNum", "randAlpha", "randAscii", "randNumeric", "genPrivateKey", "genCA",
                       "genSelfSignedCert", "genSignedCert", "uuidv4", "now"):
            assert f"{banned} " not in text and f"({banned}" not in text, f"{path.name} uses {banned}"


def test_every_object_is_namespaced_and_labelled(value_set):
    _, values = value_set
    for obj in objects(values):
        meta = obj["metadata"]
        assert meta.get("namespace") == "search", f"{obj['kind']}/{meta['name']}"
        assert meta["labels"]["app.kubernetes.io/instance"] == "demo"
        assert len(meta["name"]) <= 63


def test_pods_run_non_root_with_read_only_root(value_set):
    _, values = value_set
    for w in workloads(objects(values)):
        pod = w["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        assert pod["automountServiceAccountToken"] is False
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True, w["metadata"]["name"]
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert any(m["mountPath"] == "/tmp" for m in c["volumeMounts"]), "a writable /tmp"


def test_statefulsets_have_volumes_and_headless_services(value_set):
    _, values = value_set
    objs = objects(values)
    sts = by_kind(objs, "StatefulSet")
    services = by_kind(objs, "Service")
    assert set(sts) == {"demo-attest-meta", "demo-attest-shard"}
    for name, s in sts.items():
        assert s["spec"]["podManagementPolicy"] == "Parallel"
        (claim,) = s["spec"]["volumeClaimTemplates"]
        mounts = s["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
        assert any(m["name"] == claim["metadata"]["name"] for m in mounts)
        headless = services[s["spec"]["serviceName"]]
        assert headless["spec"]["clusterIP"] == "None"
        assert headless["spec"]["publishNotReadyAddresses"] is True
        assert s["spec"]["persistentVolumeClaimRetentionPolicy"]["whenScaled"] == "Retain"


def test_shard_grace_period_covers_a_seal():
    shard = by_kind(objects(VALUE_SETS["insecure-3-voters"]), "StatefulSet")["demo-attest-shard"]
    assert shard["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 120


def test_config_checksum_restarts_pods_on_change():
    def checksums(values):
        return {
            w["metadata"]["name"]: w["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
            for w in workloads(objects(values))
        }

    base = {"insecure": True}
    changed = {"insecure": True, "config": {"router": {"rrf_k": 30}}}
    a, b = checksums(base), checksums(changed)
    assert a.keys() == b.keys()
    assert all(a[k] != b[k] for k in a)
    cm = by_kind(objects(changed), "ConfigMap")["demo-attest-config"]
    assert yaml.safe_load(cm["data"]["config.yaml"]) == {"router": {"rrf_k": 30}}


def test_secret_from_values_and_existing_secret():
    inline = objects(VALUE_SETS["tls-inline-secrets"])
    secrets = by_kind(inline, "Secret")
    assert set(secrets) == {"demo-attest-auth", "demo-attest-tls"}
    import base64

    assert base64.b64decode(secrets["demo-attest-auth"]["data"]["admin-key"]).decode() == ADMIN_KEY

    existing = objects(VALUE_SETS["tls-existing-secrets"])
    assert by_kind(existing, "Secret") == {}, "no Secret is made when existing ones are named"
    for w in workloads(existing):
        pod = w["spec"]["template"]["spec"]
        refs = {
            e["valueFrom"]["secretKeyRef"]["name"]
            for c in pod["containers"]
            for e in c["env"]
            if "secretKeyRef" in e.get("valueFrom", {})
        }
        assert refs <= {"attest-keys", "attest-metrics"} and "attest-keys" in refs
        tls = [v for v in pod["volumes"] if v["name"] == "tls"]
        assert tls and tls[0]["secret"]["secretName"] == "attest-tls"


def test_keys_travel_in_env_not_flags(value_set):
    _, values = value_set
    for w in workloads(objects(values)):
        for c in w["spec"]["template"]["spec"]["containers"]:
            joined = " ".join(c.get("args", []))
            assert "--admin-key" not in joined and "--cluster-key" not in joined
            assert ADMIN_KEY not in joined


def test_admin_key_only_where_callers_come_in():
    objs = objects(VALUE_SETS["gpu-embedder"])
    for w in workloads(objs):
        role = w["metadata"]["labels"]["app.kubernetes.io/component"]
        env = {e["name"] for e in w["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert ("ATTEST_ADMIN_KEY" in env) == (role in ("router", "answer")), role
        assert "ATTEST_CLUSTER_KEY" in env


def test_hpa_owns_replicas_when_on():
    on = objects({"insecure": True, "embedder": {"enabled": True}})
    hpas = by_kind(on, "HorizontalPodAutoscaler")
    deps = by_kind(on, "Deployment")
    assert set(hpas) == set(deps) == {"demo-attest-router", "demo-attest-answer", "demo-attest-embedder"}
    for name, d in deps.items():
        assert "replicas" not in d["spec"], f"{name}: helm upgrade would reset the HPA's count"
        assert hpas[name]["spec"]["scaleTargetRef"]["name"] == name

    off = objects(VALUE_SETS["hpa-off"])
    assert by_kind(off, "HorizontalPodAutoscaler") == {}
    deps = by_kind(off, "Deployment")
    assert deps["demo-attest-router"]["spec"]["replicas"] == 3
    assert deps["demo-attest-answer"]["spec"]["replicas"] == 1
    pdbs = by_kind(off, "PodDisruptionBudget")
    # A single replica gets no PDB: it would block every node drain.
    assert "demo-attest-router" in pdbs and "demo-attest-answer" not in pdbs


def test_custom_hpa_metrics_are_appended():
    metric = {"type": "Pods", "pods": {"metric": {"name": "attest_inflight"}, "target": {"type": "AverageValue", "averageValue": "10"}}}
    objs = objects({"insecure": True, "router": {"autoscaling": {"metrics": [metric]}}})
    hpa = by_kind(objs, "HorizontalPodAutoscaler")["demo-attest-router"]
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    assert hpa["spec"]["metrics"][1] == metric


def test_gpu_embedder_lands_on_gpu_nodes():
    objs = objects(VALUE_SETS["gpu-embedder"])
    emb = by_kind(objs, "Deployment")["demo-attest-embedder"]
    pod = emb["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    # Only the embedder.
    for name, d in by_kind(objs, "Deployment").items():
        if name != "demo-attest-embedder":
            assert "nvidia.com/gpu" not in json.dumps(d)


def test_anti_affinity_presets_and_zone_spread():
    objs = objects(VALUE_SETS["no-answer-affinity-none"])
    router = by_kind(objs, "Deployment")["demo-attest-router"]["spec"]["template"]["spec"]
    assert "affinity" not in router and "topologySpreadConstraints" not in router
    objs = objects(VALUE_SETS["insecure-3-voters"])
    meta = by_kind(objs, "StatefulSet")["demo-attest-meta"]["spec"]["template"]["spec"]
    term = meta["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == "meta"
    assert meta["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    router = by_kind(objs, "Deployment")["demo-attest-router"]["spec"]["template"]["spec"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" in router["affinity"]["podAntiAffinity"]


def test_shard_zone_from_the_pod_topology_label_or_a_value():
    def zone_env(values):
        sts = by_kind(objects(values), "StatefulSet")["demo-attest-shard"]
        (c,) = sts["spec"]["template"]["spec"]["containers"]
        assert "--zone=$(ATTEST_ZONE)" in c["args"]
        return next(e for e in c["env"] if e["name"] == "ATTEST_ZONE")

    assert zone_env({"insecure": True})["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['topology.kubernetes.io/zone']"
    )
    assert zone_env(VALUE_SETS["monitoring-and-config"])["value"] == "zone-a"


def test_service_monitors_and_dashboard():
    objs = objects(VALUE_SETS["monitoring-and-config"])
    monitors = by_kind(objs, "ServiceMonitor")
    assert set(monitors) == {f"demo-attest-{r}" for r in ("meta", "shard", "router", "answer")}
    services = [s for s in by_kind(objs, "Service").values()]
    for m in monitors.values():
        assert m["apiVersion"] == "monitoring.coreos.com/v1"
        selector = m["spec"]["selector"]["matchLabels"]
        matched = [s for s in services if selector.items() <= s["metadata"]["labels"].items()]
        assert len(matched) == 1, f"{m['metadata']['name']} selects {[s['metadata']['name'] for s in matched]}"
        ports = {p["name"] for p in matched[0]["spec"]["ports"]}
        for ep in m["spec"]["endpoints"]:
            assert ep["port"] in ports and ep["path"] == "/metrics" and ep["scheme"] == "https"
    dash = by_kind(objs, "ConfigMap")["demo-attest-dashboard"]
    assert dash["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads((REPO / "deploy" / "grafana" / "attest.json").read_text())
    assert json.loads(dash["data"]["attest.json"]) == shipped
    assert "ServiceMonitor" not in {o["kind"] for o in objects({"insecure": True})}


def test_the_recall_alert_watches_the_metric_the_shards_export():
    """The PrometheusRule (issue 73) fires on `attest_search_recall_estimate` below the configured target: the
    name must be the one the shards export (crates/attest-telemetry/src/metrics.rs)."""
    rules = by_kind(objects(VALUE_SETS["monitoring-and-config"]), "PrometheusRule")
    assert set(rules) == {"demo-attest"}
    (group,) = rules["demo-attest"]["spec"]["groups"]
    (rule,) = group["rules"]
    assert rule["alert"] == "AttestRecallBelowTarget" and rule["for"] == "30m"
    assert rule["expr"].startswith("min by (collection, shard) (attest_search_recall_estimate{")
    assert rule["expr"].endswith(") < 0.97")
    assert "{{ $labels.collection }}" in rule["annotations"]["summary"]
    exported = (REPO / "crates" / "attest-telemetry" / "src" / "metrics.rs").read_text()
    assert 'SEARCH_RECALL_ESTIMATE: &str = "attest_search_recall_estimate"' in exported
    assert "PrometheusRule" not in {o["kind"] for o in objects({"insecure": True})}


def test_notes_render():
    notes = render(VALUE_SETS["gpu-embedder"])["attest/templates/NOTES.txt"]
    assert "attest status" in notes and "on GPU nodes" in notes
    assert "WARNING" in render({"insecure": True})["attest/templates/NOTES.txt"]


@pytest.mark.parametrize("kube", ["v1.27.0", None])
def test_helm_lint_strict_is_clean(kube):
    import helm_python

    report = helm_python.lint(str(CHART), VALUE_SETS["tls-existing-secrets"], strict=True, kube_version=kube)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []
