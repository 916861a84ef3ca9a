//! `maple report`: runs `maple-bench`'s experiments with progress bars,
//! writes the report files, and optionally compares with an earlier run
//! or refreshes `docs/BENCHMARKS.md`. Measuring and rendering live in
//! `maple-bench`; this is only the command.

use std::{
    io::IsTerminal,
    path::{Path, PathBuf},
};

use indicatif::{ProgressBar, ProgressStyle};
use maple_bench::{render, Options, SectionId};

use crate::replay::Failure;

/// What the command line asked for.
#[derive(Debug, Default)]
pub struct Args {
    /// `--full`: the seeds' sizes.
    pub full: bool,
    /// `--only`: sections to run.
    pub only: Vec<SectionId>,
    /// `--out`: where the files go.
    pub out: PathBuf,
    /// `--compare OLD.json`.
    pub compare: Option<PathBuf>,
    /// `--update-docs FILE`.
    pub update_docs: Option<PathBuf>,
    /// `--reps`, overriding the mode's.
    pub reps: Option<usize>,
    /// `--sizes`, overriding the mode's.
    pub sizes: Option<Vec<u64>>,
    /// `--tiny`: everything at tiny sizes (a smoke test of the harness).
    pub tiny: bool,
}

/// Runs the report; returns the text for standard output.
pub fn run(args: &Args, command: &str) -> Result<String, Failure> {
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
    let docs = match &args.update_docs {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| Failure { msg: format!("cannot read {}: {e}", p.display()), code: 2 })?;
            // Written at the end: it must be writable now.
            std::fs::OpenOptions::new()
                .append(true)
                .open(p)
                .map_err(|e| Failure { msg: format!("cannot write {}: {e}", p.display()), code: 2 })?;
            Some(text)
        }
        None => None,
    };
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
            eprintln!("maple report [{}/{}]: {}", p.done + 1, p.total, p.step)
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
    if let (Some(path), Some(text)) = (&args.update_docs, docs) {
        let (new, done) = render::update_docs(&text, &report)
            .map_err(|msg| Failure { msg: format!("{}: {msg}", path.display()), code: 1 })?;
        std::fs::write(path, new)
            .map_err(|e| Failure { msg: format!("cannot write {}: {e}", path.display()), code: 1 })?;
        eprintln!(
            "maple report: updated {} in {}",
            if done.is_empty() { "nothing".into() } else { done.join(", ") },
            path.display()
        );
    }
    eprintln!("maple report: wrote {}", describe(&args.out, &written));
    Ok(stdout)
}

/// The goals table, for the terminal.
fn summary(r: &maple_bench::Report) -> String {
    let mut out = format!("maple report ({}, {:.0} s): the goals in this run\n\n", r.meta.mode, r.meta.seconds);
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
