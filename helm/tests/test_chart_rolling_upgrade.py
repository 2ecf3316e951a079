"""A rolling upgrade of the chart's cluster under load (issue 44, item 6).

The chart's commands run as local processes as in test_chart_cluster.py, with one addition: each ClusterIP Service
is a loopback proxy (kube-proxy's part) that sends every new connection to one of the Service's ready endpoints, so
a Deployment's pod can be replaced by a new one on other ports while clients keep the Service address. A client
thread searches through the router's Service back to back, another ingests one document at a time (a unique id and
word each) and records which were acknowledged. Meanwhile every pod is restarted onto the new binary, one at a
time, as Kubernetes rolls each workload: StatefulSet pods (meta, then shards) in reverse ordinal order, each
stopped (a shard's preStop drain first, then SIGTERM), started on the new binary and awaited (meta: the group
whole again; a shard: alive and no longer drained) before the next; Deployment pods (answer, router) surge: the
new pod starts and becomes ready, joins the Service, then the old one leaves the Service and stops. Afterwards
every search must have succeeded, none degraded, and every acknowledged document must be found.

`ATTEST_ROLLING_RECREATE=1` replaces the Deployments' pods the other way round (the old pod stops before the new
one starts, Kubernetes' `Recreate` strategy): that run must fail with failed searches, which shows the check is
live.

The new binary is a copy of the same build at another path (an image of the next tag); the version it reports is
the same (bumping it means a second build of the workspace, ~12 min on this machine).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from conftest import NAMESPACE, attest_bin, by_kind, objects
from test_chart_cluster import (LOGS, VALUES, Cluster, Pod, free_port, http, one_group, ready, run_pre_stop,
                                status, wait_for)


class ServiceProxy:
    """A Service's address: each accepted connection goes to the next ready endpoint (round robin), both ways."""

    def __init__(self, name: str):
        self.name = name
        self.endpoints: list[int] = []
        self._turn = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def set_endpoints(self, ports: list[int]) -> None:
        with self._lock:
            self.endpoints = list(ports)

    def _next(self) -> int | None:
        with self._lock:
            if not self.endpoints:
                return None
            self._turn += 1
            return self.endpoints[self._turn % len(self.endpoints)]

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        port = self._next()
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=5) if port else None
        except OSError:
            upstream = None
        if upstream is None:
            client.close()
            return
        upstream.settimeout(None)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._listener.close()


class RollingCluster(Cluster):
    """The chart's pods as processes, ClusterIP Services as [`ServiceProxy`]s."""

    def __init__(self, run_dir: Path):
        # (proxy, selector, target container port) per Service port; filled by `_addresses`, which the parent's
        # constructor calls before it builds each pod's command.
        self.services: list[tuple[ServiceProxy, dict, int]] = []
        super().__init__(run_dir)
        self.config = by_kind(objects(VALUES), "ConfigMap")["demo-attest-config"]["data"]
        self.refresh_endpoints()

    def _addresses(self, objs) -> dict[str, str]:
        out = super()._addresses(objs)
        for name, svc in by_kind(objs, "Service").items():
            if svc["spec"].get("clusterIP") == "None" or "selector" not in svc["spec"]:
                continue
            pods = [p for p in self.pods if self._selects(svc["spec"]["selector"], p)]
            if not pods:
                continue
            for sp in svc["spec"]["ports"]:
                target = sp.get("targetPort", sp["port"])
                if isinstance(target, str):
                    (target,) = [c["containerPort"] for c in pods[0].container["ports"] if c["name"] == target]
                proxy = ServiceProxy(f"{name}:{sp['port']}")
                self.services.append((proxy, svc["spec"]["selector"], target))
                out[f"{name}.{NAMESPACE}.svc.cluster.local:{sp['port']}"] = f"127.0.0.1:{proxy.port}"
        return out

    @staticmethod
    def _selects(selector: dict, pod: Pod) -> bool:
        labels = pod.workload["spec"]["template"]["metadata"]["labels"]
        return all(labels.get(k) == v for k, v in selector.items())

    def refresh_endpoints(self, leaving: Pod | None = None) -> None:
        """Every Service's endpoints: its pods that run, but `leaving` (Kubernetes takes a terminating pod out
        before its preStop hook runs)."""
        for proxy, selector, target in self.services:
            proxy.set_endpoints([p.ports[target] for p in self.pods
                                 if p is not leaving and self._selects(selector, p) and p.proc is not None
                                 and p.proc.poll() is None])

    def service_url(self, role: str, port_name: str) -> str:
        pod = self.role(role)[0]
        (cport,) = [c["containerPort"] for c in pod.container["ports"] if c["name"] == port_name]
        for proxy, selector, target in self.services:
            if target == cport and self._selects(selector, pod):
                return f"http://127.0.0.1:{proxy.port}"
        raise AssertionError(f"no Service for {role}:{port_name}")

    def surge(self, old: Pod, binary: Path) -> Pod:
        """A Deployment's new pod beside `old` (other ports, its own directories), on `binary`."""
        new = Pod(f"{old.name}-next", old.workload, old.container, self.dir / f"{old.name}-next", old.zone)
        new.root.mkdir(parents=True)
        new.ports = {c["containerPort"]: free_port() for c in old.container["ports"]}
        self._command(new, self.config)
        new.argv[0] = str(binary)
        self.pods.append(new)
        return new

    def close(self) -> None:
        for proxy, _, _ in self.services:
            proxy.close()


class Load:
    """Searches and single-document writes through the router's Service, until stopped."""

    def __init__(self, router: str):
        self.router = router
        self.stop = threading.Event()
        self.searches = 0
        self.failed: list[str] = []
        self.degraded: list[dict] = []
        self.acked: list[str] = []
        self.unacked = 0
        self.threads = [threading.Thread(target=self._search, daemon=True),
                        threading.Thread(target=self._write, daemon=True)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)

    def _search(self) -> None:
        while not self.stop.is_set():
            code, body = http("POST", self.router + "/v1/collections/roll/search",
                              {"query": "rolling upgrade marker", "k": 5}, timeout=10)
            self.searches += 1
            if code != 200:
                self.failed.append(f"{code}: {body}")
            elif body.get("degraded") or body.get("missing_shards"):
                self.degraded.append(body)
            time.sleep(0.02)

    def _write(self) -> None:
        n = 0
        while not self.stop.is_set():
            doc_id = f"w{n}"
            code, body = http("POST", self.router + "/v1/collections/roll/documents",
                              {"documents": [{"id": doc_id, "title": f"Roll {n}",
                                              "text": f"A rolling upgrade marker qz{n}k written during the roll."}]},
                              timeout=10)
            if code == 200 and body.get("accepted") == 1:
                self.acked.append(doc_id)
            else:
                self.unacked += 1
            n += 1
            time.sleep(0.05)


def found(router: str, doc_id: str) -> bool:
    n = doc_id[1:]
    code, body = http("POST", router + "/v1/collections/roll/search",
                      {"query": f"qz{n}k", "k": 3, "lanes": ["bm25"]}, timeout=10)
    return code == 200 and any(h["doc_id"] == doc_id for h in body["hits"])


def test_a_rolling_upgrade_under_load_fails_no_search_and_loses_no_write():
    LOGS.mkdir(parents=True, exist_ok=True)
    run_dir = Path(str(LOGS / time.strftime("rolling-%Y%m%d-%H%M%S")) + f"-{os.getpid()}")
    cluster = RollingCluster(run_dir)
    next_bin = run_dir / "next" / "attest"
    next_bin.parent.mkdir()
    shutil.copy2(attest_bin(), next_bin)
    timings: dict[str, float] = {}
    load = None
    try:
        for p in cluster.pods:
            p.start()
        cluster.refresh_endpoints()
        wait_for("the cluster to be ready", lambda: ready(cluster), timeout=180)
        router = cluster.service_url("router", "http")
        code, body = http("POST", router + "/v1/collections", {"name": "roll", "shards": 3, "replication": 2})
        assert code == 201, body
        load = Load(router)
        load.start()
        wait_for("the first acknowledged write", lambda: load.acked, timeout=30)
        rolled = time.monotonic()

        # StatefulSets roll one pod at a time, highest ordinal first, each ready before the next.
        for role in ("meta", "shard"):
            for pod in reversed(cluster.role(role)):
                started = time.monotonic()
                cluster.refresh_endpoints(leaving=pod)
                if role == "shard":
                    hook = run_pre_stop(pod, run_dir)
                    assert hook["unserved"] == [], hook
                assert pod.stop() == 0, f"{pod.name} did not stop cleanly: {pod.log()}"
                pod.argv[0] = str(next_bin)
                pod.start()
                if role == "meta":
                    wait_for(f"{pod.name} back in the group", lambda: one_group(cluster), timeout=120)
                else:
                    def in_service(name=pod.name):
                        s = status(cluster.meta_addresses())
                        node = s and next((n for n in s["nodes"] if n["name"] == name), None)
                        return node if node and node["alive"] and node["draining"] == "none" else None

                    wait_for(f"{pod.name} back in service", in_service, timeout=120)
                    wait_for(f"{pod.name} ready", lambda p=pod: http("GET", p.url("http") + "/readyz")[0] == 200)
                cluster.refresh_endpoints()
                timings[f"{pod.name}_s"] = time.monotonic() - started

        # Deployments surge: the new pod is ready and in the Service before the old one leaves it and stops.
        for role in ("answer", "router"):
            (old,) = [p for p in cluster.role(role) if not p.name.endswith("-next")]
            started = time.monotonic()
            if os.environ.get("ATTEST_ROLLING_RECREATE") == "1":
                cluster.refresh_endpoints(leaving=old)
                old.stop()
            new = cluster.surge(old, next_bin)
            new.start()
            wait_for(f"{new.name} ready", lambda: http("GET", new.url("http") + "/readyz")[0] == 200, timeout=180)
            cluster.refresh_endpoints(leaving=old)
            # The kubelet runs the preStop hook (a sleep) before SIGTERM: connections routed to the old pod just
            # before it left the Service are answered. Without it one search in a few hundred was cut.
            hook = old.container["lifecycle"]["preStop"]["exec"]["command"]
            subprocess.run(hook, check=True, timeout=60)
            assert old.stop() == 0, f"{old.name} did not stop cleanly: {old.log(old.runs)}"
            cluster.pods.remove(old)
            cluster.refresh_endpoints()
            timings[f"{role}_surge_s"] = time.monotonic() - started
        timings["roll_s"] = time.monotonic() - rolled
        load.finish()
        running = {p.name: os.readlink(f"/proc/{p.proc.pid}/exe") for p in cluster.pods}
        assert all(exe == str(next_bin) for exe in running.values()), f"not every pod runs the new binary: {running}"

        assert not load.failed, f"{len(load.failed)} of {load.searches} searches failed: {load.failed[:5]}"
        assert not load.degraded, f"{len(load.degraded)} of {load.searches} searches degraded: {load.degraded[:2]}"
        missing = [d for d in load.acked if not found(router, d)]
        # A replica that was down catches up at its restart and by anti-entropy: give stragglers that long.
        deadline = time.monotonic() + 60
        while missing and time.monotonic() < deadline:
            time.sleep(1)
            missing = [d for d in missing if not found(router, d)]
        assert not missing, f"acknowledged writes lost: {missing[:20]} ({len(missing)} of {len(load.acked)})"
        summary = {"searches": load.searches, "acknowledged_writes": len(load.acked),
                   "unacknowledged_writes": load.unacked, **timings}
        print(f"rolling upgrade: {json.dumps(summary)}")
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        for p in cluster.pods:
            p.stop()
    except BaseException as e:
        if load is not None:
            load.stop.set()
        for p in cluster.pods:
            if p.proc is not None and p.proc.poll() is None:
                p.stop(signal.SIGKILL)
        cluster.close()
        (run_dir / "summary.json").write_text(json.dumps(timings, indent=2))
        raise AssertionError(f"{e}\nlogs of this run kept in {run_dir}") from e
    cluster.close()
    shutil.rmtree(run_dir)
