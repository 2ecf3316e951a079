//! `attest`: one binary, one role per process, and the client commands (the modules are in the library,
//! `lib.rs`).

use attest_cli::{bench, cli, cluster, commands, eval, roles, train};
use clap::Parser;

/// Thread-pool settings that must be in the environment before libgomp and OpenBLAS initialise (they read it
/// when loaded, before `main`): FAISS calls OpenBLAS inside OpenMP regions, and two spinning pools on a small
/// machine slow index training down by orders of magnitude. Unless the caller chose otherwise, re-exec once with
/// them set.
fn ensure_thread_pool_environment() {
    use std::os::unix::process::CommandExt;
    let wanted = [
        ("OPENBLAS_NUM_THREADS", "1"),
        ("OMP_WAIT_POLICY", "PASSIVE"),
    ];
    if wanted.iter().all(|(k, _)| std::env::var_os(k).is_some()) {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut cmd = std::process::Command::new(exe);
    cmd.args(std::env::args_os().skip(1));
    for (k, v) in wanted {
        if std::env::var_os(k).is_none() {
            cmd.env(k, v);
        }
    }
    // Only returns if exec failed; then carry on with the inherited environment.
    let _ = cmd.exec();
}

fn main() -> anyhow::Result<()> {
    ensure_thread_pool_environment();
    if let Err(why) = attest_index::ivfpq::check_cpu() {
        anyhow::bail!(why);
    }
    let cli = cli::Cli::parse();
    attest_telemetry::logging::init(&cli.log_level);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            cli::Command::Dev(args) => roles::dev(args).await,
            cli::Command::Serve(args) => roles::serve(args).await,
            cli::Command::Collection(cmd) => commands::collection(&cli.server, cmd).await,
            cli::Command::Ingest(args) => commands::ingest(&cli.server, args).await,
            cli::Command::Search(args) => commands::search(&cli.server, args).await,
            cli::Command::Ask(args) => attest_cli::ask::ask(&cli.server, args).await,
            cli::Command::Eval(args) => {
                let code = eval::eval(args).await?;
                if code != 0 {
                    std::process::exit(code);
                }
                Ok(())
            }
            cli::Command::Bench(args) => {
                tokio::task::spawn_blocking(move || bench::run(args)).await?
            }
            cli::Command::Status(args) => cluster::status(args).await,
            cli::Command::Cluster(cmd) => cluster::command(cmd).await,
            cli::Command::Meta(cmd) => cluster::meta_command(cmd).await,
            cli::Command::Key(cmd) => attest_cli::keys::command(&cli.server, cmd).await,
            cli::Command::Snapshot(cmd) => attest_cli::snapshots::command(&cli.server, cmd).await,
            cli::Command::Config(cli::ConfigCommand::Check { config }) => {
                match attest_cli::config::load(config.as_deref(), std::env::vars()) {
                    Ok(resolved) => {
                        print!("{}", serde_yaml::to_string(&resolved)?);
                        Ok(())
                    }
                    Err(e) => {
                        eprintln!("{e}");
                        std::process::exit(1);
                    }
                }
            }
            cli::Command::Openapi(args) => attest_cli::openapi::command(args),
            cli::Command::Train(cmd) => {
                tokio::task::spawn_blocking(move || train::run(cmd)).await?
            }
        }
    })
}
