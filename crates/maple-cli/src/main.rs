//! The `maple` command.

use std::{
    io::{self, BufWriter, Write},
    path::PathBuf,
    process::ExitCode,
};

use clap::{Parser, Subcommand};
use maple_cli::{maps, num, ops, replay, swap, trace};
use maple_mm::Layout;

#[derive(Parser)]
#[command(
    name = "maple",
    version,
    about = "Maple tree tools: strace replay, maps files and live processes, swap extents, tree operation logs",
    after_help = "Exit status, every command: 0 success; 1 a check failed (ops --validate) or output could not be written; 2 bad usage or input (the error names the file, and the line where there is one).\n\nNumbers are decimal, or hex with 0x; addresses are hex with or without 0x, as /proc/PID/maps prints them."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Apply an operation log to a fresh tree and print the results.
    ///
    /// One op a line (`#` starts a comment; numbers decimal, or hex with 0x):
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
    /// Rebuild address spaces from an `strace -f` log and print one in
    /// /proc/PID/maps format.
    ///
    /// Reads plain, gzip or xz logs (or "-" for standard input), with or
    /// without -y/-yy, timestamps and any -X style. Memory calls are applied
    /// with the results strace recorded; fork gives a copy, CLONE_VM a
    /// shared space; execve starts an empty one.
    Replay {
        /// The root process's address space at line --from (a maps file).
        #[arg(long, requires = "from")]
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
        #[arg(long, conflicts_with = "pid")]
        all: bool,
        /// Skip malformed lines (their number goes to stderr).
        #[arg(long)]
        lenient: bool,
        /// Also draw the address spaces over the course of the log (VMAs and
        /// mapped memory per process, and where memory lives) into this SVG.
        #[arg(long)]
        svg: Option<String>,
        /// Print JSON: {"pid", "vmas": [{"start", "end", "perms", "offset",
        /// "dev", "inode", "name", "line"}]}, an array of them with --all.
        #[arg(long)]
        json: bool,
        /// Use only what the log (and --maps) says: files are not looked up
        /// on this machine, so the output is the same on every machine
        /// (a file --maps does not name shows device 00:00 and an inode
        /// numbered by its path's first appearance).
        #[arg(long)]
        log_only: bool,
        /// Print the changes each line made instead of the final maps, one
        /// JSON object per line: {"line", "pid", "change" (mapped,
        /// unmapped, changed, moved), "start", "end", "old", "new" (each
        /// {"perms", "offset", "dev", "inode", "name", "flags", "line"}),
        /// "from" for a move}. A fork tells the child's pages mapped, an
        /// execve the old program's unmapped.
        #[arg(long, conflicts_with_all = ["json", "all", "pid"])]
        events: bool,
        /// The layout of the machine the log was recorded on: x86-64,
        /// x86-64-la57, arm64 (4 KiB pages), arm64-16k or arm64-64k
        /// (default: this machine's). Page size, address range and
        /// placement follow it.
        #[arg(long, value_name = "NAME")]
        layout: Option<Layout>,
        /// The strace log, or the per-process files of `strace -ff -tt`
        /// (LOG.PID ..., merged by their timestamps).
        #[arg(required = true)]
        trace: Vec<String>,
    },
    /// Run a command under ptrace and keep a model of every address space
    /// it makes: each program's exec image read from /proc, then every
    /// memory call applied with the kernel's result (the command stops
    /// only on those). Prints the first process's final maps, as `replay`
    /// does, on standard error (or -o): standard output is the command's.
    /// Exits with the command's status.
    Trace {
        /// Compare the model with /proc/PID/maps after every N-th applied
        /// call (default 1); a difference is reported with the call's line
        /// in the event log and both maps, and makes maple exit 1 if the
        /// command succeeded.
        #[arg(long, num_args = 0..=1, default_missing_value = "1", require_equals = true, value_name = "N")]
        verify: Option<u64>,
        /// Print this process (default: the first one).
        #[arg(long)]
        pid: Option<u32>,
        /// Print every process, each headed by "# pid N".
        #[arg(long, conflicts_with = "pid")]
        all: bool,
        /// Print the changes each call made, as `replay --events` does.
        #[arg(long, conflicts_with_all = ["all", "pid"])]
        json: bool,
        /// Also write the calls as an strace log (what `maple replay`
        /// reads; each exec starts its process empty there).
        #[arg(long, value_name = "FILE")]
        strace_log: Option<String>,
        /// Also draw the address spaces over the trace (VMAs and mapped
        /// memory per process, where memory lives) into this SVG.
        #[arg(long, value_name = "FILE")]
        svg: Option<String>,
        /// Write maple's output here instead of standard error (which
        /// keeps it apart from the command's own output).
        #[arg(short, long, value_name = "FILE")]
        output: Option<String>,
        /// The command and its arguments (`--` before them is optional).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
        cmd: Vec<String>,
    },
    /// The swap extents `swapon` would make of a file (read with FIEMAP):
    /// which swap pages lie in which disk blocks, counted in pages.
    SwapExtents {
        /// Print JSON: {"file", "fiemap_extents", "pages", "tree_bytes",
        /// "extents": [{"first_page", "pages", "first_block"}]}.
        #[arg(long)]
        json: bool,
        /// The file.
        file: String,
    },
    /// Summarise an address space: a live process (PID; default this one)
    /// or a saved maps file.
    Maps {
        /// A pid or a maps file.
        #[arg(conflicts_with = "diff")]
        what: Option<String>,
        /// Show the mapping containing (or next above) this address (hex,
        /// with or without 0x).
        #[arg(long, value_parser = num::address, conflicts_with = "diff")]
        find: Option<u64>,
        /// Show what changed between two snapshots (pids or files).
        #[arg(long, num_args = 2, value_names = ["A", "B"])]
        diff: Option<Vec<String>>,
        /// List every mapping, as `pmap -x` does: address, size, resident
        /// size (a live process's, from its smaps), permissions, offset,
        /// device, inode and name.
        #[arg(short = 'x', long, conflicts_with_all = ["diff", "find"])]
        list: bool,
        /// Print JSON: every figure of the summary and every VMA; with
        /// --list, every VMA with its size and resident size; with
        /// --find, the VMA holding the address ("in") or the next one
        /// ("next"); with --diff, the VMAs removed, added and changed.
        #[arg(long)]
        json: bool,
        /// The layout of the machine a maps file was saved on: x86-64,
        /// x86-64-la57, arm64 (4 KiB pages), arm64-16k or arm64-64k
        /// (default: this machine's).
        #[arg(long, value_name = "NAME")]
        layout: Option<Layout>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Ops { gaps, validate, file } => run_ops(&file, gaps, validate),
        Cmd::Replay { maps, from, to, pid, all, lenient, svg, json, log_only, events, layout, trace } => {
            let layout = layout.unwrap_or_default();
            let args = replay::Args { maps, from, to, pid, all, lenient, svg, json, log_only, events, layout };
            let stdout = io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            let res = replay::run_logs(&trace, &args, &mut out)
                .and_then(|()| out.flush().map_err(|e| replay::Failure::output(&e)));
            finish(res)
        }
        Cmd::Trace { verify, pid, all, json, strace_log, svg, output, cmd } => {
            let args = trace::Args { cmd, verify, pid, all, json, strace_log, svg, output };
            // On standard error, as strace: the command owns standard output.
            let stderr = io::stderr();
            let mut out = BufWriter::new(stderr.lock());
            match trace::run(&args, &mut out) {
                Ok(code) => ExitCode::from(code),
                Err(f) => finish(Err(f)),
            }
        }
        Cmd::SwapExtents { json, file } => finish(swap::run(&file, json).and_then(|text| emit(&text))),
        Cmd::Maps { what, find, diff, list, json, layout } => {
            let layout = layout.as_ref();
            let res = match diff {
                Some(d) => replay::load_maps(Some(&d[0]), layout).and_then(|a| {
                    replay::load_maps(Some(&d[1]), layout).map(|b| {
                        if json {
                            format!("{}\n", maps::diff_json(&a, &b))
                        } else {
                            maps::diff(&a, &b)
                        }
                    })
                }),
                None if list => replay::load_maps(what.as_deref(), layout).map(|mm| {
                    let rss = match what.as_deref().map(str::parse::<u32>) {
                        None => maps::resident(std::process::id()),
                        Some(Ok(pid)) => maps::resident(pid),
                        Some(Err(_)) => Default::default(),
                    };
                    if json {
                        format!("{}\n", maps::listing_json(&mm, &rss))
                    } else {
                        maps::listing(&mm, &rss)
                    }
                }),
                None => replay::load_maps(what.as_deref(), layout).map(|mm| match (find, json) {
                    (Some(addr), false) => maps::find(&mm, addr),
                    (Some(addr), true) => format!("{}\n", maps::find_json(&mm, addr)),
                    (None, false) => maps::summary(&mm),
                    (None, true) => format!("{}\n", maps::summary_json(&mm)),
                }),
            };
            finish(res.and_then(|text| emit(&text)))
        }
    }
}

/// Writes `text` to standard output: a write error is a failure, never a
/// panic.
fn emit(text: &str) -> Result<(), replay::Failure> {
    let mut out = io::stdout().lock();
    io::Write::write_all(&mut out, text.as_bytes())
        .and_then(|()| io::Write::flush(&mut out))
        .map_err(|e| replay::Failure::output(&e))
}

fn finish(res: Result<(), replay::Failure>) -> ExitCode {
    match res {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that went away: quietly.
        Err(f) if f.code == 0 => ExitCode::SUCCESS,
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
            eprintln!("maple: cannot read {name}: {}", maple_cli::io_reason(&e));
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
        Err(ops::RunError::Io(e)) => finish(Err(replay::Failure::output(&e))),
        Err(e) => {
            eprintln!("maple: {e}");
            ExitCode::from(1)
        }
    }
}
