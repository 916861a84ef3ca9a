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
    /// Measure everything side by side with its baselines and reproduce the
    /// seeds' tables: writes report.md, report.html, report.json and SVG
    /// plots into --out, and prints the goals.
    ///
    /// --quick (the default) takes 2–3 minutes on two cores; --full uses
    /// the seeds' exact sizes and takes longer. Sections: forking,
    /// fork-scaling, swap, names, mm-readers, mm-calls, replay, compare,
    /// concurrent, kernel (groups: mm, fork).
    Report {
        /// Reduced loop counts, under three minutes (the default).
        #[arg(long, conflicts_with = "full")]
        quick: bool,
        /// The seeds' exact sizes and loop counts.
        #[arg(long)]
        full: bool,
        /// Every section at tiny sizes, in a second (checks the harness;
        /// the figures mean nothing).
        #[arg(long, hide = true, conflicts_with_all = ["quick", "full"])]
        tiny: bool,
        /// Run only these sections (comma-separated).
        #[arg(long, value_parser = parse_sections)]
        only: Option<Sections>,
        /// Directory for the report files.
        #[arg(long, default_value = "maple-report")]
        out: PathBuf,
        /// An earlier run's report.json: print the ratio of every figure.
        #[arg(long, value_name = "OLD.json")]
        compare: Option<PathBuf>,
        /// Rewrite the generated blocks of this Markdown file (marked
        /// `<!-- maple-report:begin ID -->` … `end ID`) from this run.
        #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "docs/BENCHMARKS.md")]
        update_docs: Option<PathBuf>,
        /// Rounds per measurement (the median is reported).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1000))]
        reps: Option<u64>,
        /// Numbers of ranges for the range-map comparison, comma-separated.
        #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(4..=50_000_000))]
        sizes: Option<Vec<u64>>,
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

/// A comma-separated list of report sections (one argument to clap).
#[derive(Clone, Debug)]
struct Sections(Vec<maple_bench::SectionId>);

fn parse_sections(s: &str) -> Result<Sections, String> {
    maple_bench::SectionId::parse_list(s).map(Sections)
}

fn parse_addr(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("not an address: {s:?}"))
}

fn main() -> ExitCode {
    // A run of this program as the report's memory probe (see
    // `maple_bench::resident`): measure, print, exit.
    if maple_bench::resident::serve_probe() {
        return ExitCode::SUCCESS;
    }
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Ops { gaps, validate, file } => run_ops(&file, gaps, validate),
        Cmd::Report { quick: _, full, tiny, only, out, compare, update_docs, reps, sizes } => {
            let args = report::Args {
                full,
                tiny,
                only: only.map(|s| s.0).unwrap_or_default(),
                out,
                compare,
                update_docs,
                reps: reps.map(|r| r as usize),
                sizes,
            };
            let command = std::env::args().skip(1).fold(String::from("maple"), |acc, a| acc + " " + &a);
            match report::run(&args, &command) {
                Ok(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(f) => {
                    eprintln!("maple: {}", f.msg);
                    ExitCode::from(f.code)
                }
            }
        }
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
