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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    // A role's config is read before logging starts: its traces (`telemetry.otlp`) are a layer of the log
    // subscriber, and their exporter runs on this runtime.
    let role = match &cli.command {
        cli::Command::Dev(args) => Some(RoleConfig::Dev(Box::new(node_args::dev_config(args)?))),
        cli::Command::Serve(args) => Some(RoleConfig::Serve(Box::new(node_args::node_config(
            (**args).clone(),
        )?))),
        _ => None,
    };
    let traces = {
        let _in_runtime = runtime.enter();
        match &role {
            Some(RoleConfig::Dev(cfg)) => attest_node::traces::for_dev(cfg)?,
            Some(RoleConfig::Serve(cfg)) => attest_node::traces::for_node(cfg)?,
            None => None,
        }
    };
    attest_telemetry::logging::init_with_traces(&cli.log_filter(), traces);
    let outcome = runtime.block_on(run(cli, role));
    // Spans still buffered go out while the runtime that exports them is alive.
    attest_telemetry::traces::flush();
    runtime.shutdown_timeout(BLOCKING_WORK_GRACE);
    outcome
}

/// The config of the role this process serves, read before anything else (see `main`).
enum RoleConfig {
    Dev(Box<attest_node::dev::DevConfig>),
    Serve(Box<attest_node::NodeConfig>),
}

async fn run(cli: cli::Cli, role: Option<RoleConfig>) -> anyhow::Result<()> {
    match (cli.command, role) {
        (cli::Command::Dev(args), Some(RoleConfig::Dev(cfg))) => {
            let http = attest_node::plumbing::bind(&args.http).await?;
            let grpc = attest_node::plumbing::bind(&args.grpc).await?;
            attest_node::dev::serve(&cfg, http, grpc, Shutdown::on_signals()).await
        }
        (cli::Command::Serve(_), Some(RoleConfig::Serve(cfg))) => {
            let listeners = Listeners::bind(&cfg).await?;
            attest_node::serve(&cfg, listeners, Shutdown::on_signals()).await
        }
        (cli::Command::Dev(_) | cli::Command::Serve(_), _) => {
            unreachable!("main reads the role's config first")
        }
        (cli::Command::Collection(cmd), _) => commands::collection(&cli.server, cmd).await,
        (cli::Command::Ingest(args), _) => commands::ingest(&cli.server, args).await,
        (cli::Command::Search(args), _) => commands::search(&cli.server, args).await,
        (cli::Command::Ask(args), _) => attest_cli::ask::ask(&cli.server, args).await,
        (cli::Command::Eval(moved), _) => moved_to_lab("eval", moved),
        (cli::Command::Bench(moved), _) => moved_to_lab("bench", moved),
        (cli::Command::Train(moved), _) => moved_to_lab("train", moved),
        (cli::Command::Status(args), _) => cluster::status(args).await,
        (cli::Command::Cluster(cmd), _) => cluster::command(cmd).await,
        (cli::Command::Meta(cmd), _) => cluster::meta_command(cmd).await,
        (cli::Command::Key(cmd), _) => attest_cli::keys::command(&cli.server, cmd).await,
        (cli::Command::Snapshot(cmd), _) => attest_cli::snapshots::command(&cli.server, cmd).await,
        (cli::Command::Mcp(args), _) => attest_cli::mcp::serve(&cli.server, args).await,
        (cli::Command::Config(cli::ConfigCommand::Check { config }), _) => {
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
        (cli::Command::Openapi(args), _) => attest_cli::openapi::command(args),
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
