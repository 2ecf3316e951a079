// Cluster: GET /v1/cluster (admin scope) every 2 s — meta voters with the Raft leader and term, shard nodes
// with liveness and zone, each shard's replica set and health, and the replica moves of a rebalance.
import { api } from "./api.js";
import { h, clear, errorBox, table, banner } from "./ui.js";

const REFRESH_MS = 2000;

function ago(ms) {
  if (!ms) return "—";
  const s = Math.max(0, (Date.now() - ms) / 1000);
  return s < 60 ? `${s.toFixed(0)} s ago` : `${(s / 60).toFixed(0)} min ago`;
}

function draw(c) {
  const alive = (b) => h(`span.badge.${b ? "ok" : "bad"}`, {}, b ? "alive" : "down");
  // A drained node (`attest cluster drain`): its peers serve its shards; a decommissioned one is being emptied.
  const draining = (d) => (d && d !== "none" ? [" ", h("span.badge.warn", {}, `draining (${d})`)] : []);
  const voters = c.meta.map((m) => h("tr", {},
    h("td", {}, m.id ?? "?"), h("td", {}, m.address),
    h("td", {}, m.reachable ? (m.id === c.leader ? h("span.badge.ok", {}, "leader") : m.raft_role) : h("span.badge.bad", {}, "unreachable")),
    h("td", {}, m.reachable ? m.term : m.error), h("td", {}, m.reachable ? m.applied_index : "—")));
  const nodes = c.nodes.map((n) => h("tr", { dataset: { node: n.id } },
    h("td", {}, n.id), h("td", {}, n.name), h("td", {}, n.role), h("td", {}, n.address),
    h("td", {}, n.zone || "—"), h("td", {}, alive(n.alive), ...draining(n.draining)), h("td", {}, ago(n.last_heartbeat_ms))));
  const sets = c.collections.flatMap((col) => col.placement.map((p) => h("tr", {},
    h("td", {}, col.name), h("td", {}, p.shard),
    h("td", {}, p.replicas.map((r) => h(`span.replica.${r.alive ? "up" : "down"}`, {}, `node ${r.node} ${r.state}${r.alive ? "" : " (down)"}`))),
    h("td", {}, h(`span.badge.${p.health === "ok" ? "ok" : p.health === "down" ? "bad" : "warn"}`, {}, p.health)))));
  return [
    h("p.summary", { "data-testid": "cluster-summary" },
      h("span", {}, "Raft leader: ", h("strong", {}, c.leader || "none")), " · ",
      h("span", {}, "term ", h("strong", {}, c.term)), " · ",
      h("span", {}, `commit index ${c.commit_index} · state version ${c.state_version}`)),
    c.rebalancing.length
      ? banner("warn", "Rebalance in progress:", c.rebalancing.map((m) => `${m.collection}/${m.shard} node ${m.node} ${m.state}`).join("; "), "rebalancing")
      : banner("info", "No rebalance in progress.", "", "rebalancing"),
    h("h2", {}, "Meta voters"),
    table(["id", "address", "role", "term", "applied"], voters),
    h("h2", {}, "Nodes"),
    table(["id", "name", "role", "address", "zone", "liveness", "last heartbeat"], nodes, { "data-testid": "nodes" }),
    h("h2", {}, "Replica sets"),
    sets.length ? table(["collection", "shard", "replicas", "health"], sets) : h("p.muted", {}, "No collections."),
  ];
}

export function render(view) {
  const out = h("section#cluster", { "aria-live": "off" });
  const stamp = h("p.muted");
  view.append(h("h1", {}, "Cluster"), stamp, out);
  let stopped = false;
  let timer = null;
  async function tick() {
    try {
      const c = await api("GET", "/v1/cluster");
      if (stopped) return;
      clear(out, draw(c));
      stamp.textContent = `Refreshed ${new Date().toLocaleTimeString()} (every ${REFRESH_MS / 1000} s)`;
    } catch (e) {
      if (stopped) return;
      clear(out, errorBox(e));
    }
    if (!stopped) timer = setTimeout(tick, REFRESH_MS);
  }
  tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
