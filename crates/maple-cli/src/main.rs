//! The `maple` command.

use std::{
    io::{self, BufWriter, Write},
    path::PathBuf,
    process::ExitCode,
};

use clap::{Parser, Subcommand};
use maple_cli::{maps, ops, replay, report, swap};

#[derive(Parser)]
#[command(
    name = "maple",
    version,
    about = "Maple tree tools: operation logs, strace replay, maps files, and the benchmark report"
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
    /// Rebuild address spaces from an `strace -f` log and print one in
    /// /proc/PID/maps format.
    ///
    /// Reads plain, gzip or xz logs (or "-" for standard input), with or
    /// without -y/-yy, timestamps and any -X style. Memory calls are applied
    /// with the results strace recorded; fork gives a copy, CLONE_VM a
    /// shared space; execve starts an empty one.
    Replay {
        /// The root process's address space at line --from (a maps file).
        #[arg(long)]
        maps: Option<String>,
        /// Lines up to this one are read only for processes, files and the
        /// program break (1-based).
        #[arg(long)]
        from: Option<usize>,
        /// Stop before this line (1-based).
        #[arg(long)]
        to: Option<usize>,
        /// Print this process (default: the first one).
        #[arg(long)]
        pid: Option<u32>,
        /// Print every process, each headed by "# pid N".
        #[arg(long)]
        all: bool,
        /// Skip malformed lines (their number goes to stderr).
        #[arg(long)]
        lenient: bool,
        /// Also draw the address spaces over the course of the log (VMAs and
        /// mapped memory per process, and where memory lives) into this SVG.
        #[arg(long)]
        svg: Option<String>,
        /// The strace log.
        trace: String,
    },
    /// The swap extents `swapon` would make of a file (read with FIEMAP),
    /// and page lookups in them: list with a cache vs ordered map vs maple.
    SwapExtents {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
        /// The file.
        file: String,
    },
    /// Summarise an address space: a live process (PID; default this one)
    /// or a saved maps file.
    Maps {
        /// A pid or a maps file.
        what: Option<String>,
        /// Show the mapping containing (or next above) this address.
        #[arg(long, value_parser = parse_addr)]
        find: Option<u64>,
        /// Show what changed between two snapshots (pids or files).
        #[arg(long, num_args = 2, value_names = ["A", "B"])]
        diff: Option<Vec<String>>,
    },
}

fn parse_addr(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("not an address: {s:?}"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Ops { gaps, validate, file } => run_ops(&file, gaps, validate),
        Cmd::Report { sizes, reps, quick, out, only } => run_report(sizes, reps, quick, out, only),
        Cmd::Replay { maps, from, to, pid, all, lenient, svg, trace } => {
            let args = replay::Args { maps, from, to, pid, all, lenient, svg };
            let stdout = io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            let res = replay::run(&trace, &args, &mut out)
                .and_then(|()| out.flush().map_err(|e| replay::Failure { msg: format!("cannot write: {e}"), code: 1 }));
            finish(res)
        }
        Cmd::SwapExtents { json, file } => finish(swap::run(&file, json).map(|text| print!("{text}"))),
        Cmd::Maps { what, find, diff } => {
            let res = match diff {
                Some(d) => replay::load_maps(Some(&d[0]))
                    .and_then(|a| replay::load_maps(Some(&d[1])).map(|b| maps::diff(&a, &b))),
                None => replay::load_maps(what.as_deref()).map(|mm| match find {
                    Some(addr) => maps::find(&mm, addr),
                    None => maps::summary(&mm),
                }),
            };
            finish(res.map(|text| print!("{text}")))
        }
    }
}

fn finish(res: Result<(), replay::Failure>) -> ExitCode {
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("maple: {}", f.msg);
            ExitCode::from(f.code)
        }
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
