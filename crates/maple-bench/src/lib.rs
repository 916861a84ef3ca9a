//! Measuring `maple-tree` and `maple-mm` side by side with their
//! baselines, and reproducing the tables of the kernel commits and mails the maple tree
//! and its uses were published with.
//!
//! The crate is split the way the work is:
//!
//! * [`workloads`] builds the data (shared with the criterion benches in
//!   `benches/`), [`baselines`] rebuilds the designs ours replace;
//! * [`measure`] is the measuring loop (warm-up, alternating rounds,
//!   medians and spread, CPU pinning, reader/writer throughput);
//! * [`experiments`] run one section each and return a typed
//!   [`Section`](model::Section): tables, plot series and goals, never text;
//! * [`render`] turns a [`Report`] into Markdown, a
//!   self-contained HTML page, SVG plots and JSON, and compares two runs.
//!
//! ```no_run
//! use maple_bench::{run, Options};
//!
//! let report = run(&Options::quick(), &mut |step| eprintln!("{step}"));
//! let md = maple_bench::render::markdown(&report);
//! assert!(md.contains("Summary"));
//! ```
//!
//! Why these dependencies: `plotters` draws the SVG plots (pure Rust, no
//! font rasterising with the features we pick: text is left to the SVG
//! viewer); `serde`/`serde_json` write and read `report.json`;
//! `rangemap`, `crossbeam-skiplist` and `scc` are the baselines users would
//! otherwise pick; `lzma-rs` unpacks the recorded strace logs.

pub mod baselines;
pub mod busy;
pub mod experiments;
pub mod instructions;
pub mod measure;
pub mod meta;
pub mod model;
pub mod render;
pub mod resident;
pub mod workloads;

use std::{fmt, str::FromStr, time::Instant};

pub use model::Report;

/// How big a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Tiny sizes, one repetition: checks that everything is produced
    /// (tests), figures meaningless.
    Tiny,
    /// The default: every experiment at reduced loop counts, under three
    /// minutes on two cores.
    Quick,
    /// The published benchmarks' exact sizes and loop counts.
    Full,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Tiny => "tiny",
            Mode::Quick => "quick",
            Mode::Full => "full",
        })
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Size class.
    pub mode: Mode,
    /// Numbers of ranges for the range-map comparison.
    pub sizes: Vec<u64>,
    /// Rounds per measurement (the median is reported).
    pub reps: usize,
    /// Scale of loop counts (1.0 = the published benchmarks' or our default counts).
    pub scale: f64,
    /// Sections to run; empty means all.
    pub sections: Vec<SectionId>,
}

impl Options {
    /// `--quick`, the default.
    pub fn quick() -> Options {
        Options { mode: Mode::Quick, sizes: vec![1_000, 100_000], reps: 5, scale: 0.5, sections: Vec::new() }
    }

    /// `--full`: the published benchmarks' sizes.
    pub fn full() -> Options {
        Options { mode: Mode::Full, sizes: vec![1_000, 100_000, 1_000_000], reps: 5, scale: 1.0, sections: Vec::new() }
    }

    /// For tests: every table and plot, at sizes that take milliseconds.
    pub fn tiny() -> Options {
        Options { mode: Mode::Tiny, sizes: vec![64, 256], reps: 1, scale: 0.0001, sections: Vec::new() }
    }

    /// `n` scaled by [`scale`](Self::scale), at least `min`.
    pub fn loops(&self, n: f64, min: u64) -> u64 {
        ((n * self.scale) as u64).max(min)
    }

    fn wants(&self, s: SectionId) -> bool {
        self.sections.is_empty() || self.sections.contains(&s)
    }
}

/// The sections of the report, in running order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SectionId {
    /// The `mt_dup()` series: duplicating the 135-entry tree (`bench_forking`).
    Forking,
    /// The `__mt_dup()` fork commit: fork of an address space at 21–51,221 VMAs.
    ForkScaling,
    /// The swap-extent rbtree commit: swap-extent lookups.
    Swap,
    /// Anonymous VMA name refcounting: fork of 64 K named VMAs.
    Names,
    /// The maple tree series: address-space lookups under a busy writer.
    MmReaders,
    /// mmap / munmap / mprotect cost against the number of VMAs.
    MmCalls,
    /// The old design (rbtree + list + cache) against the maple tree.
    OldDesign,
    /// `maple replay` speed on the recorded strace logs.
    Replay,
    /// `maple trace` against `strace` on the same programs.
    Trace,
    /// The tree against `BTreeMap` and `rangemap`.
    Compare,
    /// Concurrent readers against a busy writer, tree and alternatives.
    Concurrent,
    /// The kernel's own benchmark loops.
    Kernel,
}

impl SectionId {
    /// Every section, in running order.
    pub const ALL: [SectionId; 12] = [
        SectionId::Forking,
        SectionId::ForkScaling,
        SectionId::Swap,
        SectionId::Names,
        SectionId::MmReaders,
        SectionId::MmCalls,
        SectionId::OldDesign,
        SectionId::Replay,
        SectionId::Trace,
        SectionId::Compare,
        SectionId::Concurrent,
        SectionId::Kernel,
    ];

    /// The name used by `--only` and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            SectionId::Forking => "forking",
            SectionId::ForkScaling => "fork-scaling",
            SectionId::Swap => "swap",
            SectionId::Names => "names",
            SectionId::MmReaders => "mm-readers",
            SectionId::MmCalls => "mm-calls",
            SectionId::OldDesign => "old-design",
            SectionId::Replay => "replay",
            SectionId::Trace => "trace",
            SectionId::Compare => "compare",
            SectionId::Concurrent => "concurrent",
            SectionId::Kernel => "kernel",
        }
    }

    /// Whether the section runs more than one thread (it must not be
    /// pinned to one CPU).
    fn threaded(self) -> bool {
        matches!(
            self,
            SectionId::Swap | SectionId::MmReaders | SectionId::OldDesign | SectionId::Concurrent | SectionId::Trace
        )
    }

    /// Parses a comma-separated list of section names (and the groups
    /// `mm` = the four address-space sections, `fork` = `forking`).
    pub fn parse_list(s: &str) -> Result<Vec<SectionId>, String> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                "mm" => out.extend([
                    SectionId::ForkScaling,
                    SectionId::Names,
                    SectionId::MmReaders,
                    SectionId::MmCalls,
                    SectionId::OldDesign,
                ]),
                "fork" => out.push(SectionId::Forking),
                _ => out.push(part.parse()?),
            }
        }
        Ok(out)
    }
}

impl fmt::Display for SectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SectionId {
    type Err = String;
    fn from_str(s: &str) -> Result<SectionId, String> {
        SectionId::ALL.into_iter().find(|x| x.name() == s).ok_or_else(|| {
            let names: Vec<&str> = SectionId::ALL.iter().map(|x| x.name()).collect();
            format!("unknown section {s:?}; the sections are {} (and the groups mm, fork)", names.join(", "))
        })
    }
}

/// Runs the chosen sections; `progress` is told each step as it starts,
/// with how many sections are finished and how many will run.
/// `command` is recorded in the report as the command that produced it.
pub fn run_with(opts: &Options, command: &str, progress: &mut dyn FnMut(Progress<'_>)) -> Report {
    let start = Instant::now();
    let mut meta = meta::collect();
    meta.command = command.to_string();
    meta.mode = opts.mode.to_string();
    let mut report = Report { meta, sections: Vec::new() };
    let chosen: Vec<SectionId> = SectionId::ALL.into_iter().filter(|&id| opts.wants(id)).collect();
    for (done, &id) in chosen.iter().enumerate() {
        let _pin = if id.threaded() { None } else { measure::pin_to_current_cpu() };
        let total = chosen.len();
        let mut step = |what: &str| progress(Progress { done, total, step: what });
        let mut section = experiments::run(id, opts, &mut step);
        section.id = id.name().to_string();
        let mode = if opts.mode == Mode::Tiny { Mode::Quick } else { opts.mode };
        section.command = format!("cargo run --release -p maple-bench -- --{mode} --only {}", id.name());
        if opts.mode == Mode::Tiny {
            // Tiny sizes say nothing about the goals.
            for g in &mut section.goals {
                g.met = None;
            }
        }
        report.sections.push(section);
    }
    report.meta.load_after = meta::load_average();
    report.meta.seconds = start.elapsed().as_secs_f64();
    report
}

/// [`run_with`], recording the command as `maple-report` and telling
/// `progress` only the steps.
pub fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> Report {
    run_with(opts, "maple-report", &mut |p| progress(p.step))
}

/// Where a run is.
#[derive(Clone, Copy, Debug)]
pub struct Progress<'a> {
    /// Sections finished.
    pub done: usize,
    /// Sections in the run.
    pub total: usize,
    /// What is being measured now.
    pub step: &'a str,
}
