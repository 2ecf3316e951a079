//! `attest`: one binary, one role per process (`attest serve --role ...`, or all of them: `attest dev`), and the
//! client and operator commands (the modules are in the library, `lib.rs`).

use std::time::Duration;

use attest_cli::{cli, cluster, commands, node_args};
use attest_node::{Listeners, Shutdown};
use clap::Parser;

/// How long a stopping process waits for blocking work still running (a shard's log replay or a model load it
/// no longer needs, an index build): long enough for work that finishes, short enough that SIGTERM during a long
/// start-up stops the process (what was abandoned is recovered at the next start, as after a crash).
const BLOCKING_WORK_GRACE: Duration = Duration::from_secs(3);

fn main() -> anyhow::Result<()> {
    attest_node::plumbing::ensure_thread_pool_environment();
    if let Err(why) = attest_index::ivfpq::check_cpu() {
        anyhow::bail!(why);
    }
    let cli = cli::Cli::parse();
    attest_telemetry::logging::init(&cli.log_level);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(run(cli));
    runtime.shutdown_timeout(BLOCKING_WORK_GRACE);
    outcome
}

async fn run(cli: cli::Cli) -> anyhow::Result<()> {
    match cli.command {
        cli::Command::Dev(args) => {
            let cfg = node_args::dev_config(&args)?;
            let http = attest_node::plumbing::bind(&args.http).await?;
            let grpc = attest_node::plumbing::bind(&args.grpc).await?;
            attest_node::dev::serve(&cfg, http, grpc, Shutdown::on_signals()).await
        }
        cli::Command::Serve(args) => {
            let cfg = node_args::node_config(*args)?;
            let listeners = Listeners::bind(&cfg).await?;
            attest_node::serve(&cfg, listeners, Shutdown::on_signals()).await
        }
        cli::Command::Collection(cmd) => commands::collection(&cli.server, cmd).await,
        cli::Command::Ingest(args) => commands::ingest(&cli.server, args).await,
        cli::Command::Search(args) => commands::search(&cli.server, args).await,
        cli::Command::Ask(args) => attest_cli::ask::ask(&cli.server, args).await,
        cli::Command::Eval(moved) => moved_to_lab("eval", moved),
        cli::Command::Bench(moved) => moved_to_lab("bench", moved),
        cli::Command::Train(moved) => moved_to_lab("train", moved),
        cli::Command::Status(args) => cluster::status(args).await,
        cli::Command::Cluster(cmd) => cluster::command(cmd).await,
        cli::Command::Meta(cmd) => cluster::meta_command(cmd).await,
        cli::Command::Key(cmd) => attest_cli::keys::command(&cli.server, cmd).await,
        cli::Command::Snapshot(cmd) => attest_cli::snapshots::command(&cli.server, cmd).await,
        cli::Command::Config(cli::ConfigCommand::Check { config }) => {
            match attest_node::config::load(config.as_deref(), std::env::vars()) {
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
    }
}

/// `attest-lab eval|bench|train ...`: these moved out of the production binary; says what to run instead.
fn moved_to_lab(command: &str, moved: cli::MovedArgs) -> anyhow::Result<()> {
    let mut instead = vec!["attest-lab".to_string(), command.to_string()];
    instead.extend(moved.args);
    eprintln!(
        "`attest {command}` moved to the lab binary, built beside this one: run\n  {}",
        instead.join(" ")
    );
    std::process::exit(2);
}
