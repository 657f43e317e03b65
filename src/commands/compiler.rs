//! `sdkbox fetch-tsc`: gets the type check's pinned compiler ahead of time, for an image or a
//! machine that will serve offline.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, anyhow};
use clap::Args;
use sdkbox::typecheck::compiler;

/// The command's flags.
#[derive(Args)]
pub struct FetchTscArgs {
    /// Unpack it here instead of sdkbox's cache (then serve with `--tsc DIR/tsc`).
    #[arg(long)]
    pub into: Option<PathBuf>,
}

/// Downloads and checks the pinned compiler for this platform unless it is there already,
/// and prints its path.
pub async fn fetch_tsc(args: FetchTscArgs) -> Result<ExitCode> {
    let package = compiler::this_platform().ok_or_else(|| {
        anyhow!(
            "no TypeScript 7 compiler is pinned for {}-{}",
            std::env::consts::OS,
            std::env::consts::ARCH
        )
    })?;
    let dir = match args.into {
        Some(dir) => dir,
        None => compiler::cached_dir(&package)
            .ok_or_else(|| anyhow!("no cache directory: set SDKBOX_CACHE_DIR or pass --into"))?,
    };
    let tsc = dir.join("tsc");
    if !tsc.is_file() {
        compiler::download(&package, &dir, &compiler::registry()).await?;
    }
    println!("{}", tsc.display());
    Ok(ExitCode::SUCCESS)
}
