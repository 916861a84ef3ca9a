//! The `maple` command.

use std::{
    io::{self, BufWriter, Write},
    path::PathBuf,
    process::ExitCode,
};

use clap::{Parser, Subcommand};
use maple_cli::ops;

#[derive(Parser)]
#[command(
    name = "maple",
    version,
    about = "Maple tree tools: operation logs (and soon strace replay and the benchmark report)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Apply an operation log to a fresh tree and print the results.
    ///
    /// One op a line (`#` starts a comment; numbers decimal or 0x-hex):
    /// store F L V | insert F L V | clear F L | erase I | load I | next I |
    /// prev I | gap MIN MAX SIZE | rgap MIN MAX SIZE.
    Ops {
        /// Use a gap-tracking tree.
        #[arg(long)]
        gaps: bool,
        /// Check every invariant after every operation.
        #[arg(long)]
        validate: bool,
        /// The operation log ("-" for standard input).
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Ops {
            gaps,
            validate,
            file,
        } => run_ops(&file, gaps, validate),
    }
}

fn run_ops(file: &std::path::Path, gaps: bool, validate: bool) -> ExitCode {
    let name = file.display().to_string();
    let text = if name == "-" {
        io::read_to_string(io::stdin())
    } else {
        std::fs::read_to_string(file)
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            eprintln!("maple: cannot read {name}: {e}");
            return ExitCode::from(2);
        }
    };
    let parsed = match ops::parse(&name, &text) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("maple: {e}");
            return ExitCode::from(2);
        }
    };
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let res = ops::run(&name, &parsed, gaps, validate, &mut out)
        .and_then(|()| out.flush().map_err(Into::into));
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(ops::RunError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("maple: {e}");
            ExitCode::from(1)
        }
    }
}
