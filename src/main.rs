//! The `coreserve` binary: see `coreserve --help`.

use clap::Parser;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    match coreserve::cli::run(coreserve::cli::Cli::parse()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // The client's exit codes (`coreserve plans --help`): the message says it all.
        Err(e) => match e.downcast_ref::<coreserve::cli::client::Exit>() {
            Some(exit) => {
                if !exit.message.is_empty() {
                    eprintln!("{}", exit.message);
                }
                std::process::ExitCode::from(exit.code)
            }
            None => {
                eprintln!("Error: {e:?}");
                std::process::ExitCode::FAILURE
            }
        },
    }
}
