//! `attest-lab`: the quality gate, the index benchmarks and model training (the modules are in the library).

use attest_lab::{bench, cli, eval, replay, rules, train};
use clap::Parser;

fn main() -> anyhow::Result<()> {
    attest_node::plumbing::ensure_thread_pool_environment();
    if let Err(why) = attest_index::ivfpq::check_cpu() {
        anyhow::bail!(why);
    }
    let lab = cli::Lab::parse();
    attest_telemetry::logging::init(&lab.log_level);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match lab.command {
            cli::LabCommand::Eval(args) => {
                let code = eval::eval(args).await?;
                if code != 0 {
                    std::process::exit(code);
                }
                Ok(())
            }
            cli::LabCommand::Bench(args) => {
                tokio::task::spawn_blocking(move || bench::run(args)).await?
            }
            cli::LabCommand::Train(cmd) => {
                tokio::task::spawn_blocking(move || train::run(cmd)).await?
            }
            cli::LabCommand::Rules(args) => {
                tokio::task::spawn_blocking(move || rules::run(args)).await?
            }
            cli::LabCommand::Replay(args) => {
                tokio::task::spawn_blocking(move || replay::run(args)).await?
            }
        }
    })
}
