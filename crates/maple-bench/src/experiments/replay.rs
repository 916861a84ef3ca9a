//! `maple replay` speed: strace lines per second on the recorded logs.

use maple_mm::strace::{replay, ReplayOptions};

use super::div;
use crate::{
    measure::per_op,
    model::{Cell, Goal, Section, Table, Unit},
    workloads::{log_text, LOGS},
    Mode, Options,
};

pub(super) fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> Section {
    let mut s = Section::new("replay", "`maple replay`: strace lines per second");
    s.text(
        "Each recorded log (`crates/maple-mm/tests/data/recorded`) parsed and applied from its first line, every process's address space rebuilt (files looked up on this machine once per replay); decompression not timed. Then one long replay of all logs in a row, repeated, where those per-log costs are amortised.",
    );
    let mut tab =
        Table::new("replay", 1, &["log", "lines", "memory calls applied", "M lines/s", "µs per applied call"]);
    let (mut all_lines, mut all_time) = (0u64, 0f64);
    let mut long = String::new();
    for (name, xz) in LOGS {
        progress(&format!("replay: {name}"));
        let text = log_text(xz);
        long.push_str(&text);
        let lines = text.lines().count() as u64;
        let loops = ((200_000 / lines.max(1)) as f64 * opts.scale.max(0.05)).max(1.0) as u64;
        let mut applied = 0;
        let d = per_op(
            opts.reps,
            loops * lines,
            || (),
            |()| {
                for _ in 0..loops {
                    let r = replay(text.lines(), ReplayOptions::default(), None).expect("recorded log replays");
                    applied = r.stats.applied;
                }
            },
        );
        let per_line = d.median;
        all_lines += lines;
        all_time += per_line * lines as f64;
        tab.row(vec![
            Cell::text(name),
            Cell::num(lines as f64, Unit::Count),
            Cell::num(applied as f64, Unit::Count),
            Cell::num(div(1e-6, per_line), Unit::Millions),
            Cell::num(per_line * lines as f64 / applied.max(1) as f64 * 1e6, Unit::Plain),
        ]);
    }
    let scratch = div(all_lines as f64, all_time) / 1e6;
    tab.row(vec![
        Cell::text("all, each from scratch"),
        Cell::num(all_lines as f64, Unit::Count),
        Cell::Empty,
        Cell::num(scratch, Unit::Millions),
        Cell::Empty,
    ]);
    progress("replay: one long replay");
    let copies = if opts.mode == Mode::Tiny { 1 } else { 20 };
    let long = long.repeat(copies);
    let lines = long.lines().count() as u64;
    let d = per_op(
        opts.reps,
        lines,
        || (),
        |()| replay(long.lines(), ReplayOptions::default(), None).expect("replay").stats.applied,
    );
    let long_rate = div(1e-6, d.median);
    tab.row(vec![
        Cell::text(format!("all logs ×{copies}, one replay")),
        Cell::num(lines as f64, Unit::Count),
        Cell::Empty,
        Cell::num(long_rate, Unit::Millions),
        Cell::Empty,
    ]);
    s.table(tab);
    s.goal(Goal::new(
        "replay ≥ 1 M strace lines per second",
        format!("{long_rate:.2} M on the long replay, {scratch:.2} M from scratch"),
        (opts.mode != Mode::Tiny).then_some(long_rate >= 1.0),
    ));
    s
}
