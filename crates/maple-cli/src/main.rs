//! The `maple` command.

use std::{
    io::{self, BufWriter, Write},
    path::PathBuf,
    process::ExitCode,
};

use clap::{Parser, Subcommand};
use maple_cli::{ops, report};

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
    /// Measure the tree against BTreeMap and rangemap on built-in data and
    /// run the kernel's benchmark loops; prints a Markdown report.
    Report {
        /// Numbers of ranges, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = [1_000u64, 100_000, 1_000_000])]
        sizes: Vec<u64>,
        /// Repetitions per measurement (the median is reported).
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
        reps: u64,
        /// Smaller sizes and loops (about ten seconds).
        #[arg(long)]
        quick: bool,
        /// Also write the report to this file.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Run only these sections (comma-separated; default all).
        #[arg(long, value_delimiter = ',')]
        only: Vec<report::Section>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Ops { gaps, validate, file } => run_ops(&file, gaps, validate),
        Cmd::Report { sizes, reps, quick, out, only } => run_report(sizes, reps, quick, out, only),
    }
}

fn run_report(sizes: Vec<u64>, reps: u64, quick: bool, out: Option<PathBuf>, only: Vec<report::Section>) -> ExitCode {
    if let Some(bad) = sizes.iter().find(|&&n| !(4..=50_000_000).contains(&n)) {
        eprintln!("maple: --sizes: {bad} is outside 4..=50000000");
        return ExitCode::from(2);
    }
    let mut opts = report::Options { sizes, reps: reps as usize, loop_scale: 1.0, sections: only };
    if quick {
        opts.sizes.retain(|&n| n <= 100_000);
        opts.reps = opts.reps.min(3);
        opts.loop_scale = 0.1;
    }
    let text = report::run(&opts, &mut |what| eprintln!("maple report: measuring {what}"));
    print!("{text}");
    if let Some(path) = out {
        if let Err(e) = std::fs::write(&path, &text) {
            eprintln!("maple: cannot write {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}

fn run_ops(file: &std::path::Path, gaps: bool, validate: bool) -> ExitCode {
    let name = file.display().to_string();
    let text = if name == "-" {
        let mut buf = Vec::new();
        io::Read::read_to_end(&mut io::stdin(), &mut buf).map(|_| buf)
    } else {
        std::fs::read(file)
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            eprintln!("maple: cannot read {name}: {e}");
            return ExitCode::from(2);
        }
    };
    let parsed = match ops::parse_bytes(&name, &text) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("maple: {e}");
            return ExitCode::from(2);
        }
    };
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let res = ops::run(&name, &parsed, gaps, validate, &mut out).and_then(|()| out.flush().map_err(Into::into));
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(ops::RunError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("maple: {e}");
            ExitCode::from(1)
        }
    }
}
