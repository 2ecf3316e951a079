//! A real local cluster for the benchmark drivers: `scripts/local-cluster.sh up` (3 meta processes under Raft,
//! N shard processes, 1 router, each its own process on 127.0.0.1), its `attest status`, and SIGKILL / restart
//! of one of its processes with the script's command line. Stopped (`down`) when dropped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use serde_json::Value;

use super::attest_bin;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn log_level() -> String {
    std::env::var("ATTEST_LOG").unwrap_or_else(|_| "info,tantivy=warn".into())
}

/// The cluster `local-cluster.sh up` started; `down` (and every process restarted here) when dropped.
pub struct Cluster {
    pub dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    pub bin: PathBuf,
    pub base: u16,
    pub metas: String,
    pub peers: String,
    /// Processes this program restarted (its children), by pid-file name.
    restarted: Mutex<HashMap<String, Child>>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Our own children first (reaped here, so `down` does not wait on zombies), then the script's.
        for (_, mut child) in self.restarted.lock().unwrap().drain() {
            // SAFETY: signalling our own child.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new(repo_root().join("scripts/local-cluster.sh"))
            .arg("down")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .status();
    }
}

impl Cluster {
    pub fn up(shards: usize, dir: Option<&Path>, base: u16) -> anyhow::Result<Cluster> {
        let bin = attest_bin()?;
        let (dir, tmp) = match dir {
            Some(d) => {
                std::fs::create_dir_all(d)?;
                (d.canonicalize()?, None)
            }
            None => {
                let t = tempfile::tempdir()?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let meta = |i: u16| format!("http://127.0.0.1:{}", base + i);
        let cluster = Cluster {
            dir: dir.clone(),
            _tmp: tmp,
            bin: bin.clone(),
            base,
            metas: (1..=3).map(meta).collect::<Vec<_>>().join(","),
            peers: (1..=3)
                .map(|i| format!("{i}={}", meta(i)))
                .collect::<Vec<_>>()
                .join(","),
            restarted: Mutex::new(HashMap::new()),
        };
        let started = Instant::now();
        let status = Command::new(repo_root().join("scripts/local-cluster.sh"))
            .arg("up")
            .arg(&dir)
            .env("ATTEST_BIN", &bin)
            .env("ATTEST_CLUSTER_PORT", base.to_string())
            .env("ATTEST_CLUSTER_SHARDS", shards.to_string())
            .env("ATTEST_CLUSTER_ANSWER", "0")
            .stdout(Stdio::null())
            .status()?;
        ensure!(status.success(), "local-cluster.sh up failed");
        let alive = cluster.alive_shards()?;
        ensure!(
            alive == shards,
            "{alive} of {shards} shard nodes alive after `up`"
        );
        eprintln!(
            "cluster up in {:.1}s: 3 meta, {shards} shard, 1 router ({})",
            started.elapsed().as_secs_f64(),
            dir.display()
        );
        Ok(cluster)
    }

    pub fn router_grpc(&self) -> String {
        format!("http://127.0.0.1:{}", self.base + 101)
    }

    pub fn status(&self) -> anyhow::Result<Value> {
        let out = Command::new(&self.bin)
            .args(["status", "--json", "--meta", &self.metas])
            .env("ATTEST_LOG", "error")
            .output()?;
        ensure!(
            out.status.success(),
            "attest status: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(serde_json::from_slice(&out.stdout)?)
    }

    /// Each shard of `collection` with the addresses of the nodes holding its replicas, from `attest status`.
    pub fn placement(&self, collection: &str) -> anyhow::Result<Vec<(u32, Vec<String>)>> {
        let state = self.status()?;
        let address: HashMap<u64, String> = state["nodes"]
            .as_array()
            .context("nodes")?
            .iter()
            .map(|n| {
                let id = n["id"].as_u64().unwrap_or(0);
                (id, n["address"].as_str().unwrap_or("").to_string())
            })
            .collect();
        let coll = state["collections"]
            .as_array()
            .context("collections")?
            .iter()
            .find(|c| c["name"] == collection)
            .with_context(|| format!("collection {collection} in status"))?;
        let mut out = Vec::new();
        for p in coll["placement"].as_array().context("placement")? {
            let shard = p["shard"].as_u64().context("shard")? as u32;
            let nodes = p["replicas"].as_array().context("replicas")?.iter();
            let addresses = nodes
                .map(|r| {
                    let node = r["node"].as_u64().context("node")?;
                    address.get(&node).cloned().context("a replica's node")
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            out.push((shard, addresses));
        }
        out.sort_by_key(|(shard, _)| *shard);
        Ok(out)
    }

    pub fn alive_shards(&self) -> anyhow::Result<usize> {
        Ok(self.status()?["nodes"]
            .as_array()
            .context("nodes")?
            .iter()
            .filter(|n| n["role"] == "shard" && n["alive"] == true)
            .count())
    }

    pub fn pid_file(&self, name: &str) -> PathBuf {
        self.dir.join("pids").join(format!("{name}.pid"))
    }

    /// SIGKILL the process of `name` (`meta-2`, `shard-1`) and wait until it is gone.
    pub fn kill(&self, name: &str) -> anyhow::Result<()> {
        if let Some(mut child) = self.restarted.lock().unwrap().remove(name) {
            child.kill()?;
            child.wait()?;
            return Ok(());
        }
        let pid: i32 = std::fs::read_to_string(self.pid_file(name))
            .with_context(|| format!("pid file of {name}"))?
            .trim()
            .parse()?;
        // SAFETY: a process the script started (re-parented to init, which reaps it).
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        // A process with gigabytes mapped takes seconds to be torn down; a zombie is gone for our purpose.
        let gone = || {
            // SAFETY: signal 0 only checks that the process exists.
            let missing = unsafe { libc::kill(pid, 0) } != 0;
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            });
            missing || zombie
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if gone() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        bail!("{name} (pid {pid}) still there 120 s after SIGKILL")
    }

    /// Starts `name` again with the script's command line; its pid goes into the pid file (so `down` stops it).
    pub fn restart(&self, name: &str) -> anyhow::Result<()> {
        let (role, i) = name.split_once('-').context("role-id")?;
        let i: u16 = i.parse()?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("logs").join(format!("{name}.log")))?;
        let mut cmd = Command::new(&self.bin);
        match role {
            "meta" => {
                cmd.args([
                    "serve",
                    "--insecure",
                    "--role",
                    "meta",
                    "--meta-id",
                    &i.to_string(),
                ])
                .args(["--meta-peers", &self.peers, "--grpc"])
                .arg(format!("127.0.0.1:{}", self.base + i));
            }
            "shard" => {
                cmd.args([
                    "serve",
                    "--insecure",
                    "--role",
                    "shard",
                    "--meta",
                    &self.metas,
                    "--grpc",
                ])
                .arg(format!("127.0.0.1:{}", self.base + 10 + i))
                .args(["--node-name", name]);
            }
            other => bail!("cannot restart role {other}"),
        }
        let child = cmd
            .arg("--data-dir")
            .arg(self.dir.join(name))
            .args(["--log-level", &log_level()])
            .env(
                "OPENBLAS_NUM_THREADS",
                std::env::var("OPENBLAS_NUM_THREADS").unwrap_or_else(|_| "1".into()),
            )
            .env(
                "OMP_WAIT_POLICY",
                std::env::var("OMP_WAIT_POLICY").unwrap_or_else(|_| "PASSIVE".into()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        std::fs::write(self.pid_file(name), child.id().to_string())?;
        self.restarted
            .lock()
            .unwrap()
            .insert(name.to_string(), child);
        Ok(())
    }
}

/// Polls `check` every 200 ms until it holds, or fails naming `what` and the last check's answer.
pub fn wait_for(
    limit: Duration,
    what: &str,
    mut check: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut last = String::from("never checked");
    while started.elapsed() < limit {
        match check() {
            Ok(true) => return Ok(()),
            Ok(false) => last = "condition false".into(),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bail!("timed out after {limit:?} waiting for {what} (last check: {last})")
}
