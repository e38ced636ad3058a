//! The `coreserve` binary: see `coreserve --help`.

use std::process::ExitCode;

use clap::Parser;
use coreserve::api::telemetry::{self, LogFormat};
use coreserve::cli::{client::Exit, config_file, Cli, Command};

/// mimalloc instead of the system allocator: a service that parses and builds a JSON message
/// per participant call allocates a lot (docs/capacity.md, "Where a message's CPU goes").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // Before any thread starts: the config file of `serve` becomes environment variables.
    if let Err(e) = config_file::apply(&args) {
        eprintln!("Error: {e:#}");
        return ExitCode::from(2);
    }
    let cli = Cli::parse_from(args);
    telemetry::init(match &cli.command {
        Command::Serve(a) => a.log_format,
        _ => LogFormat::Text,
    });
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("Error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(coreserve::cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        // The client's exit codes (`coreserve plans --help`): the message says it all.
        Err(e) => match e.downcast_ref::<Exit>() {
            Some(exit) => {
                if !exit.message.is_empty() {
                    eprintln!("{}", exit.message);
                }
                ExitCode::from(exit.code)
            }
            None => {
                // The chain of causes on one line, without a backtrace (RUST_BACKTRACE or not).
                eprintln!("Error: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}
