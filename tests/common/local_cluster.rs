//! A whole cluster on loopback for the tests, as a user starts one: `scripts/local-cluster.sh up` (3 meta, 3 shard
//! nodes, 1 router, each its own process), with helpers to kill and restart its processes; `down` when dropped, the
//! processes' logs kept when a test panicked.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{post, repo_root};

/// The cluster started by the script in a temporary directory; `down` runs when dropped.
pub struct LocalCluster {
    pub dir: tempfile::TempDir,
    pub base: u16,
    pub metas: String,
    pub router: String,
    /// Set on every shard process, those the script starts and those restarted here.
    shard_env: Vec<(String, String)>,
    /// One cluster at a time in this test process: every cluster of a process takes the same ports (`base`).
    _alone: std::sync::MutexGuard<'static, ()>,
}

/// Held by the cluster of this process while it is up.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Drop for LocalCluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            keep_logs(self.dir.path());
        }
        let _ = Command::new(repo_root().join("scripts/local-cluster.sh"))
            .args(["down"])
            .arg(self.dir.path())
            .status();
        // Processes this test restarted itself are not in the script's pid files.
        for pid in restarted_pids(self.dir.path()) {
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Copies the processes' logs of a failed run out of the temporary directory (which is removed) and says where.
fn keep_logs(dir: &Path) {
    let kept =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cluster-logs-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&kept);
    for entry in std::fs::read_dir(dir.join("logs"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let _ = std::fs::copy(entry.path(), kept.join(entry.file_name()));
    }
    eprintln!("the cluster's logs are kept in {}", kept.display());
}

fn restarted_pids(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("restarted.pids"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

impl LocalCluster {
    pub fn up() -> LocalCluster {
        Self::up_with_shard_env(&[])
    }

    /// [`Self::up`] with `env` (`ATTEST__ENGINE__…` settings) set on every shard process.
    pub fn up_with_shard_env(env: &[(&str, &str)]) -> LocalCluster {
        // A test that failed with its cluster up poisoned the lock; its cluster is down all the same.
        let alone = ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = tempfile::tempdir().unwrap();
        // A port range of our own, so parallel test binaries do not collide, and below Linux's ephemeral range
        // (32768..), where any outgoing connection may hold a port.
        let base = 20_000 + (std::process::id() % 60) as u16 * 200;
        let status = Command::new(repo_root().join("scripts/local-cluster.sh"))
            .arg("up")
            .arg(dir.path())
            .env("ATTEST_BIN", super::attest_bin())
            .env("ATTEST_CLUSTER_PORT", base.to_string())
            .env("ATTEST_CLUSTER_ANSWER", "0")
            .env("ATTEST_LOG", "info,tantivy=warn")
            // The script passes its environment to every process; these settings concern shards only.
            .envs(env.iter().copied())
            .status()
            .unwrap();
        assert!(status.success(), "local-cluster.sh up failed");
        let read = |f: &str| {
            std::fs::read_to_string(dir.path().join(f))
                .unwrap()
                .trim()
                .to_string()
        };
        let router = read("router.addr");
        let metas = read("meta.addrs");
        assert!(read("meta.addr").starts_with("http://127.0.0.1:"));
        LocalCluster {
            dir,
            base,
            metas,
            router,
            shard_env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            _alone: alone,
        }
    }

    pub fn pid_file(&self, name: &str) -> PathBuf {
        self.dir.path().join("pids").join(format!("{name}.pid"))
    }

    pub fn kill(&self, name: &str) {
        let pid: i32 = std::fs::read_to_string(self.pid_file(name))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        // Reap it (it is the script's child, re-parented to init; wait until it is gone).
        for _ in 0..100 {
            if unsafe { libc::kill(pid, 0) } != 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn shard_port(&self, i: u16) -> u16 {
        self.base + 10 + i
    }

    /// The `/metrics` port of shard node `i` once this test has (re)started it.
    pub fn shard_http_port(&self, i: u16) -> u16 {
        self.base + 160 + i
    }

    /// Starts shard node `i` (again) with the same data directory and address as the script does, and its
    /// `/metrics` on [`Self::shard_http_port`].
    pub fn start_shard(&self, i: u16) {
        let child = Command::new(super::attest_bin())
            .args([
                "serve",
                "--insecure",
                "--role",
                "shard",
                "--meta",
                &self.metas,
                "--grpc",
            ])
            .arg(format!("127.0.0.1:{}", self.shard_port(i)))
            .arg("--http")
            .arg(format!("127.0.0.1:{}", self.shard_http_port(i)))
            .args(["--node-name", &format!("shard-{i}"), "--data-dir"])
            .arg(self.dir.path().join(format!("shard-{i}")))
            .env("ATTEST_LOG", "info,tantivy=warn")
            .envs(self.shard_env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(
                    self.dir
                        .path()
                        .join(format!("logs/shard-{i}-restart-{}.log", now_ms())),
                )
                .unwrap(),
            )
            .spawn()
            .unwrap();
        std::fs::write(self.pid_file(&format!("shard-{i}")), child.id().to_string()).unwrap();
        let mut pids =
            std::fs::read_to_string(self.dir.path().join("restarted.pids")).unwrap_or_default();
        pids.push_str(&format!("{}\n", child.id()));
        std::fs::write(self.dir.path().join("restarted.pids"), pids).unwrap();
        std::mem::forget(child);
    }

    pub fn status(&self) -> Value {
        super::attest_json(&["status", "--json", "--meta", &self.metas])
    }

    pub fn search(&self, body: &Value) -> (u16, Value) {
        post(&format!("{}/v1/collections/c/search", self.router), body)
    }
}

/// Milliseconds since the Unix epoch (unique names for restarted processes' logs).
pub fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}
