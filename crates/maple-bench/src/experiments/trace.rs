//! `maple trace` against `strace`: the wall time of the same programs
//! traced by each, side by side.

use std::{
    process::{Command, Stdio},
    time::Instant,
};

use super::{div, span};
use crate::{
    busy,
    model::{Cell, Goal, Section, Table, Unit},
    Mode, Options,
};

/// Rounds of the busy program (three memory calls each) at full size.
const BUSY_ROUNDS: u64 = 10_000;

pub(super) fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> Section {
    let mut s = Section::new("trace", "`maple trace` against `strace`: wall time of the same programs");
    s.text(
        "Each program run under `maple trace` (the model kept, no `--verify`, its output thrown away) and under `strace -f -e trace=memory -o /dev/null`, alternately, several times; the median wall time of each, and their ratio (below 1: maple is faster). `strace --seccomp-bpf` is shown beside: like `maple trace`, it stops the program on memory calls only. The busy program is this report's own binary doing nothing but rounds of mmap, write, mprotect and munmap; the others start up and exit. Each program's output goes to /dev/null through `sh -c 'exec … >/dev/null 2>&1'`, the same under every tracer.",
    );
    let rounds = match opts.mode {
        Mode::Tiny => 1,
        Mode::Quick => 5,
        Mode::Full => 9,
    };
    let mut tab = Table::new(
        "trace",
        1,
        &["program", "memory calls", "maple trace ms", "strace ms", "maple / strace", "strace --seccomp-bpf ms"],
    );
    let have_strace = Command::new("strace").arg("-V").stdout(Stdio::null()).status().is_ok_and(|s| s.success());
    let mut ratios = Vec::new();
    for (name, cmd) in programs(opts) {
        progress(&format!("trace: {name}"));
        // A program not measured: why, in its row.
        let unmeasured = |why: &str| {
            let mut row = vec![Cell::text(name.as_str()), Cell::text(why)];
            row.resize(6, Cell::Empty);
            row
        };
        if !have_strace {
            tab.row(unmeasured("strace is not installed"));
            continue;
        }
        let cmd = quiet(&cmd);
        let Some(calls) = memory_calls(&cmd) else {
            tab.row(unmeasured("cannot be traced here"));
            continue;
        };
        let (mut maple, mut strace, mut bpf) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            maple.extend(traced(&cmd));
            strace.extend(straced(&cmd, false));
            bpf.extend(straced(&cmd, true));
        }
        let (m, st, b) = (median(&mut maple), median(&mut strace), median(&mut bpf));
        let ratio = div(m, st);
        ratios.push(ratio);
        tab.row(vec![
            Cell::text(name),
            Cell::num(calls as f64, Unit::Count),
            Cell::num(m * 1e3, Unit::Ms),
            Cell::num(st * 1e3, Unit::Ms),
            Cell::num(ratio, Unit::Times),
            Cell::num(b * 1e3, Unit::Ms),
        ]);
    }
    s.table(tab);
    let worst = ratios.iter().copied().fold(0.0, f64::max);
    s.goal(Goal::new(
        "maple trace no slower than strace -f -e trace=memory",
        if ratios.is_empty() {
            "not measured".to_string()
        } else {
            format!("maple / strace {}", span(&ratios, 2, "×"))
        },
        (opts.mode != Mode::Tiny && !ratios.is_empty()).then_some(worst <= 1.0),
    ));
    s
}

/// The traced programs: the busy one, where this program can be it, and
/// the start-up of the runtimes found on this machine.
fn programs(opts: &Options) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let rounds = if opts.mode == Mode::Tiny { 100 } else { BUSY_ROUNDS };
    if let (true, Ok(exe)) = (busy::available(), std::env::current_exe()) {
        out.push((
            format!("busy: {rounds} × mmap, mprotect, munmap"),
            vec!["env".into(), format!("{}={rounds}", busy::PROBE_ENV), exe.display().to_string()],
        ));
    }
    out.push(("sh -c true".into(), vec!["sh".into(), "-c".into(), "true".into()]));
    if opts.mode == Mode::Tiny {
        return out;
    }
    // The interpreter itself, not a version manager's shim in front of it.
    if let Some(python) = output(&["python3", "-c", "import sys; print(sys.executable)"]) {
        out.push(("python3 -c pass".into(), vec![python, "-c".into(), "pass".into()]));
    }
    if output(&["java", "-version"]).is_some() {
        out.push(("java -version".into(), vec!["java".into(), "-version".into()]));
    }
    if output(&["go", "version"]).is_some() {
        out.push(("go version".into(), vec!["go".into(), "version".into()]));
    }
    out
}

/// The first line `cmd` prints (on stdout or stderr), if it runs and
/// succeeds.
fn output(cmd: &[&str]) -> Option<String> {
    let o = Command::new(cmd[0]).args(&cmd[1..]).output().ok().filter(|o| o.status.success())?;
    let text = if o.stdout.is_empty() { o.stderr } else { o.stdout };
    Some(String::from_utf8_lossy(&text).lines().next()?.trim().to_string())
}

/// `cmd` run with its output thrown away.
fn quiet(cmd: &[String]) -> Vec<String> {
    let mut v: Vec<String> = ["sh", "-c", "exec \"$@\" >/dev/null 2>&1", "sh"].map(String::from).to_vec();
    v.extend(cmd.iter().cloned());
    v
}

/// The number of memory calls `cmd` makes, from the log `maple trace`
/// writes of it (not timed); `None` if it cannot be traced.
fn memory_calls(cmd: &[String]) -> Option<u64> {
    let log = std::env::temp_dir().join(format!("maple-report-trace-{}.strace", std::process::id()));
    let args =
        maple_cli::trace::Args { cmd: cmd.to_vec(), strace_log: Some(log.display().to_string()), ..Default::default() };
    let ok = maple_cli::trace::run(&args, &mut std::io::sink()).is_ok_and(|s| s == 0);
    let text = std::fs::read_to_string(&log).ok();
    let _ = std::fs::remove_file(&log);
    let calls = text?.lines().filter(|l| !l.contains("+++") && !l.contains("---")).count() as u64;
    ok.then_some(calls)
}

/// Seconds `maple trace` takes over `cmd`, if it succeeds.
fn traced(cmd: &[String]) -> Option<f64> {
    let args = maple_cli::trace::Args { cmd: cmd.to_vec(), ..Default::default() };
    let t = Instant::now();
    let ok = maple_cli::trace::run(&args, &mut std::io::sink()).is_ok_and(|s| s == 0);
    ok.then(|| t.elapsed().as_secs_f64())
}

/// Seconds `strace -f -e trace=memory` (with `--seccomp-bpf` if `bpf`)
/// takes over `cmd`, if it succeeds.
fn straced(cmd: &[String], bpf: bool) -> Option<f64> {
    let mut c = Command::new("strace");
    c.args(["-f", "-e", "trace=memory", "-o", "/dev/null"]);
    if bpf {
        c.arg("--seccomp-bpf");
    }
    c.args(cmd).stdout(Stdio::null()).stderr(Stdio::null());
    let t = Instant::now();
    let ok = c.status().is_ok_and(|s| s.success());
    ok.then(|| t.elapsed().as_secs_f64())
}

/// The median of `xs` (0 if empty).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(0.0)
}
