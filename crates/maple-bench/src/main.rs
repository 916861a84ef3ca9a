//! `maple-report`: runs `maple-bench`'s experiments with progress bars,
//! writes the report files, and optionally compares with an earlier run
//! or refreshes `docs/BENCHMARKS.md`. Measuring and rendering live in the
//! library; this is only the command. It is a binary of its own, apart
//! from the `maple` tool, so that installing the tool builds none of the
//! baselines.

use std::{
    io::IsTerminal,
    path::{Path, PathBuf},
    process::ExitCode,
};

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use maple_bench::{render, Options, SectionId};

/// Measure everything side by side with its baselines and reproduce the
/// tables of the maple tree's kernel series: writes report.md,
/// report.html, report.json and SVG plots into --out, and prints the
/// goals.
///
/// --quick (the default) takes 2–3 minutes on two cores; --full uses the
/// series' exact sizes and takes longer. Sections: forking, fork-scaling,
/// swap, names, mm-readers, mm-calls, old-design, replay, trace, compare,
/// concurrent, kernel (groups: mm, fork). Exit status: 0 done, 1 a failure while measuring
/// or writing, 2 bad usage or input (nothing is measured then).
#[derive(Parser)]
#[command(name = "maple-report", version)]
struct Cli {
    /// Reduced loop counts, under three minutes (the default).
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// The series' exact sizes and loop counts.
    #[arg(long)]
    full: bool,
    /// Every section at tiny sizes, in a second (checks the harness; the
    /// figures mean nothing).
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
    /// `<!-- maple-report:begin ID -->` … `end ID`) from this run; give it
    /// again for more files (alone: docs/BENCHMARKS.md).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "docs/BENCHMARKS.md", action = clap::ArgAction::Append)]
    update_docs: Vec<PathBuf>,
    /// Rounds per measurement (the median is reported).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1000))]
    reps: Option<u64>,
    /// Numbers of ranges for the range-map comparison, comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(4..=50_000_000))]
    sizes: Option<Vec<u64>>,
}

/// A comma-separated list of report sections (one argument to clap).
#[derive(Clone, Debug)]
struct Sections(Vec<SectionId>);

fn parse_sections(s: &str) -> Result<Sections, String> {
    SectionId::parse_list(s).map(Sections)
}

/// Why the command failed, and its exit status.
#[derive(Debug)]
struct Failure {
    msg: String,
    code: u8,
}

fn main() -> ExitCode {
    // A run of this program as the report's memory probe (see
    // `maple_bench::resident`): measure, print, exit.
    if maple_bench::resident::serve_probe()
        || maple_bench::instructions::serve_probe()
        || maple_bench::busy::serve_probe()
    {
        return ExitCode::SUCCESS;
    }
    let cli = Cli::parse();
    let args = Args {
        full: cli.full,
        tiny: cli.tiny,
        only: cli.only.map(|s| s.0).unwrap_or_default(),
        out: cli.out,
        compare: cli.compare,
        update_docs: cli.update_docs,
        reps: cli.reps.map(|r| r as usize),
        sizes: cli.sizes,
    };
    let command = std::env::args().skip(1).fold(String::from("maple-report"), |acc, a| acc + " " + &a);
    match run(&args, &command) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(f) => {
            eprintln!("maple-report: {}", f.msg);
            ExitCode::from(f.code)
        }
    }
}

/// What the command line asked for.
#[derive(Debug, Default)]
struct Args {
    /// `--full`: the published benchmarks' sizes.
    full: bool,
    /// `--only`: sections to run.
    only: Vec<SectionId>,
    /// `--out`: where the files go.
    out: PathBuf,
    /// `--compare OLD.json`.
    compare: Option<PathBuf>,
    /// `--update-docs FILE`.
    update_docs: Vec<PathBuf>,
    /// `--reps`, overriding the mode's.
    reps: Option<usize>,
    /// `--sizes`, overriding the mode's.
    sizes: Option<Vec<u64>>,
    /// `--tiny`: everything at tiny sizes (a smoke test of the harness).
    tiny: bool,
}

/// Runs the report; returns the text for standard output.
fn run(args: &Args, command: &str) -> Result<String, Failure> {
    let mut opts = if args.tiny {
        Options::tiny()
    } else if args.full {
        Options::full()
    } else {
        Options::quick()
    };
    opts.sections = args.only.clone();
    if let Some(r) = args.reps {
        opts.reps = r;
    }
    if let Some(s) = &args.sizes {
        opts.sizes = s.clone();
    }
    // Read the old run first: a bad file should fail before minutes of work.
    let old = match &args.compare {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| Failure { msg: format!("cannot read {}: {e}", p.display()), code: 2 })?;
            Some(render::from_json(&p.display().to_string(), &text).map_err(|msg| Failure { msg, code: 2 })?)
        }
        None => None,
    };
    let mut docs = Vec::new();
    for p in &args.update_docs {
        let text = std::fs::read_to_string(p)
            .map_err(|e| Failure { msg: format!("cannot read {}: {e}", p.display()), code: 2 })?;
        // Written at the end: it must be writable now.
        std::fs::OpenOptions::new()
            .append(true)
            .open(p)
            .map_err(|e| Failure { msg: format!("cannot write {}: {e}", p.display()), code: 2 })?;
        docs.push((p, text));
    }
    // Likewise the output directory: made (with its plots directory) and
    // written to before the measuring starts.
    let plots = args.out.join("plots");
    std::fs::create_dir_all(&plots)
        .map_err(|e| Failure { msg: format!("cannot create {}: {e}", plots.display()), code: 2 })?;
    let probe = args.out.join(".maple-report-probe");
    std::fs::write(&probe, b"")
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| Failure { msg: format!("cannot write in {}: {e}", args.out.display()), code: 2 })?;

    let report = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(1);
        bar.set_style(
            ProgressStyle::with_template("{elapsed:>4} [{bar:30}] {pos}/{len} sections  {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        let report = maple_bench::run_with(&opts, command, &mut |p| {
            bar.set_length(p.total as u64);
            bar.set_position(p.done as u64);
            bar.set_message(p.step.to_string());
        });
        bar.finish_and_clear();
        report
    } else {
        maple_bench::run_with(&opts, command, &mut |p| {
            eprintln!("maple-report [{}/{}]: {}", p.done + 1, p.total, p.step)
        })
    };

    let mut written = render::write_all(&report, &args.out).map_err(|msg| Failure { msg, code: 1 })?;
    let mut stdout = summary(&report);
    if let Some(old) = old {
        let cmp = render::compare(&old, &report);
        let path = args.out.join("compare.md");
        std::fs::write(&path, &cmp)
            .map_err(|e| Failure { msg: format!("cannot write {}: {e}", path.display()), code: 1 })?;
        written.push(path);
        stdout.push('\n');
        stdout.push_str(&cmp);
    }
    for (path, text) in docs {
        let (new, done) = render::update_docs(&text, &report)
            .map_err(|msg| Failure { msg: format!("{}: {msg}", path.display()), code: 1 })?;
        std::fs::write(path, new)
            .map_err(|e| Failure { msg: format!("cannot write {}: {e}", path.display()), code: 1 })?;
        eprintln!(
            "maple-report: updated {} in {}",
            if done.is_empty() { "nothing".into() } else { done.join(", ") },
            path.display()
        );
    }
    eprintln!("maple-report: wrote {}", describe(&args.out, &written));
    Ok(stdout)
}

/// The goals table, for the terminal.
fn summary(r: &maple_bench::Report) -> String {
    let mut out = format!("maple-report ({}, {:.0} s): the goals in this run\n\n", r.meta.mode, r.meta.seconds);
    for (s, g) in r.goals() {
        let mark = match g.met {
            Some(true) => "met    ",
            Some(false) => "NOT MET",
            None => "-      ",
        };
        out.push_str(&format!("  {mark}  {}: {} [{}]\n", g.what, g.figure, s.id));
    }
    out
}

/// "DIR/report.md, report.html, report.json and N plots".
fn describe(dir: &Path, files: &[PathBuf]) -> String {
    let plots = files.iter().filter(|f| f.extension().is_some_and(|e| e == "svg")).count();
    let named: Vec<String> = files
        .iter()
        .filter(|f| f.extension().is_none_or(|e| e != "svg"))
        .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    format!("{}/{{{}}} and {plots} plots in {}/plots/", dir.display(), named.join(", "), dir.display())
}
