//! The `closer` binary: parse the command line, load the configuration once,
//! run the command. Errors are printed, never panicked.

use std::process::ExitCode;

use clap::Parser;
use closer::cli::{Cli, Command};
use closer::config::server::ServerConfig;
use closer::service::{self, ServeOptions};
use closer::store::{Store, migrate};

fn main() -> ExitCode {
    let cli = Cli::parse();
    closer::install_crypto_provider();
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let config = ServerConfig::load(&cli.settings)?;
    match cli.command {
        Command::Serve(args) => {
            let options = ServeOptions {
                role: args.role,
                dry_run: args.dry_run,
            };
            service::serve(config, options).await?;
        }
        Command::Migrate => {
            let store = Store::connect(&config.store, closer::clock::system()).await?;
            let applied = migrate::run(&store).await?;
            println!(
                "database at migration {} ({} applied now)",
                migrate::latest_version(),
                applied.len()
            );
            store.close().await;
        }
        Command::CheckConfig { file } => {
            let _ = file;
            anyhow::bail!("check-config is not available yet");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
