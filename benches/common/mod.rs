//! What the benchmark examples share: finding the `attest` binary they start roles with.

#[allow(dead_code)] // not every example starts a local cluster
pub mod cluster;

use std::path::{Path, PathBuf};

use anyhow::Context;

/// `$ATTEST_BIN`, else the `attest` binary of the same build as this example (`target/<profile>/attest`).
pub fn attest_bin() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("ATTEST_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe()?;
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .context("example directory")?
        .join("attest");
    anyhow::ensure!(
        bin.exists(),
        "{} not found: build with `cargo build --workspace --all-targets` or set ATTEST_BIN",
        bin.display()
    );
    Ok(bin)
}

/// The "listening" line a started role prints first; with `until_ready`, also waits for its `attest ROLE ready`
/// line (routers, answer replicas and embedders listen before their models and shard map are loaded). The rest
/// of its output is read to the end, so no later line meets a closed pipe.
#[allow(dead_code)] // not every example starts roles itself
pub fn listening_line(
    child: &mut std::process::Child,
    until_ready: bool,
) -> anyhow::Result<String> {
    use std::io::{BufRead, BufReader};
    let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
    let first = lines.next().context("no output")??;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = lines.map_while(Result::ok);
        let _ = tx.send(lines.any(|l| l.ends_with(" ready")));
        lines.for_each(drop);
    });
    if until_ready {
        anyhow::ensure!(
            rx.recv_timeout(std::time::Duration::from_secs(120)) == Ok(true),
            "not ready after its listening line {first:?}"
        );
    }
    Ok(first)
}

/// Child processes, killed when dropped.
#[allow(dead_code)] // not every example starts roles itself
pub struct Procs(pub Vec<std::process::Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `attest ARGS` with `env` added (warnings only in its log, `log`; one BLAS thread) and returns its
/// listening line; a router, answer replica or embedder once it says it is ready.
#[allow(dead_code)] // not every example starts roles itself
pub fn start(
    procs: &mut Procs,
    args: &[&str],
    env: &[(&str, &str)],
    log: &Path,
) -> anyhow::Result<String> {
    let mut child = std::process::Command::new(attest_bin()?)
        .args(args)
        .envs(env.iter().copied())
        .env("ATTEST_LOG", "warn")
        .env("OPENBLAS_NUM_THREADS", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(log)?)
        .spawn()?;
    let waits = args
        .windows(2)
        .any(|w| w[0] == "--role" && ["router", "answer", "embedder"].contains(&w[1]));
    let line =
        listening_line(&mut child, waits).with_context(|| format!("see {}", log.display()))?;
    procs.0.push(child);
    Ok(line)
}

/// The `key=` value of a listening line (`grpc=` is `host:port`, `http=` a URL).
#[allow(dead_code)] // not every example starts roles itself
pub fn value_in(line: &str, key: &str) -> anyhow::Result<String> {
    let value = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .with_context(|| format!("no {key} in {line:?}"))?;
    Ok(value.to_string())
}
