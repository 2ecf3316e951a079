//! `attest`: one binary, one role per process, and the client commands.
//!
//! # Layout
//! - [`cli`]: the command line (clap).
//! - [`config`]: YAML config, `ATTEST__SECTION__KEY` environment overrides, then flags.
//! - [`roles`]: `attest dev` (every role in one process) and `attest serve --role ...`.
//! - [`commands`]: client commands that talk to a running router over HTTP (collection, ingest, search).
//! - [`logging`]: JSON log lines on stderr.

mod cli;
mod commands;
mod config;
mod logging;
mod roles;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    logging::init(&cli.log_level);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        match cli.command {
            cli::Command::Dev(args) => roles::dev(args).await,
            cli::Command::Serve(args) => roles::serve(args).await,
            cli::Command::Collection(cmd) => commands::collection(&cli.server, cmd).await,
            cli::Command::Ingest(args) => commands::ingest(&cli.server, args).await,
            cli::Command::Search(args) => commands::search(&cli.server, args).await,
        }
    })
}
