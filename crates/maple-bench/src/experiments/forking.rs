//! The `mt_dup()` series' `bench_forking`: duplicate the 135-entry tree, replace
//! every entry of the copy, drop it; and duplication cost as trees grow.

use std::{collections::BTreeMap, hint::black_box};

use maple_tree::U63;

use super::{div, span};
use crate::{
    measure::{alternate, case, per_op, Timing},
    model::{Cell, Goal, Plot, Section, Table, Unit},
    workloads::{forking_tree, maple, rebuild_by_insertion},
    Mode, Options,
};

/// A 256-byte, 256-aligned block: what one node copy moves.
#[derive(Clone, Copy)]
#[repr(C, align(256))]
struct Block([u8; 256]);

/// The `mt_dup()` series' loop count and its before/after seconds.
const SEED_LOOPS: u64 = 80_000;
const SEED_BEFORE_S: f64 = 13.52;
const SEED_AFTER_S: f64 = 2.60;
/// The kernel's bare `__mt_dup` of this tree (C, lean allocator, measured
/// on a machine like ours).
const KERNEL_DUP_NS: f64 = 560.0;

pub(super) fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> Section {
    let mut s = Section::new(
        "forking",
        "Fork of a tree: duplicate, replace every entry, drop (the `mt_dup()` series, July 2023)",
    );
    progress("forking: dup vs rebuild");
    let t = forking_tree();
    let nodes = t.stats().leaves + t.stats().internal;
    let loops = opts.loops(SEED_LOOPS as f64, 10);
    let m: BTreeMap<u64, (u64, u64)> = t.iter().map(|(r, v)| (*r.start(), (*r.end(), v.get()))).collect();
    let src = vec![Block([7; 256]); nodes];
    let mut dst = vec![Block([0; 256]); nodes];
    let timings = alternate(
        opts.reps,
        vec![
            case(loops, || (), |()| (0..loops).map(|_| t.try_dup_map(|_, v| v).expect("dup").len()).sum::<usize>()),
            case(loops, || (), |()| (0..loops).map(|_| rebuild_by_insertion(&t).len()).sum::<usize>()),
            case(loops, || (), |()| (0..loops).map(|_| m.clone().len()).sum::<usize>()),
            case(loops, || (), |()| (0..loops).map(|_| t.try_dup().expect("dup").len()).sum::<usize>()),
            case(
                loops,
                || (),
                |()| {
                    (0..loops)
                        .map(|_| {
                            let mut c = t.try_dup().expect("dup");
                            let mut cur = c.cursor_mut(0);
                            while let Some((_, v)) = cur.next() {
                                let v = U63::new(v.get() + 1).expect("small");
                                cur.replace(v).expect("exact fit");
                            }
                            c.len()
                        })
                        .sum::<usize>()
                },
            ),
            case(
                loops,
                || (),
                |()| {
                    (0..loops)
                        .map(|_| src.iter().map(|b| Box::new(*black_box(b))).collect::<Vec<_>>().len())
                        .sum::<usize>()
                },
            ),
            case(
                loops,
                || (),
                |()| {
                    for _ in 0..loops {
                        dst.copy_from_slice(black_box(&src));
                    }
                    dst[0].0[0]
                },
            ),
        ],
    );
    let [dup, rebuild, bclone, bare, by_cursor, alloc_bound, copy_bound]: [Timing; 7] =
        timings.try_into().expect("seven");
    s.text(format!(
        "The `mt_dup()` series' benchmark: a gap-tracking tree of 135 entries `[i*10, i*10+5]` ({nodes} nodes), duplicated and every entry of the copy replaced, then the copy dropped; {loops} iterations timed per round (the series ran {SEED_LOOPS}; seconds below are per-iteration medians × {SEED_LOOPS}). The series' kernel went from {SEED_BEFORE_S} s (re-inserting every entry) to {SEED_AFTER_S} s (`mt_dup`)."
    ));
    let mut tab = Table::new(
        "forking",
        1,
        &["method", "ns per iteration", "ns per node", &format!("s per {SEED_LOOPS}"), "vs dup", "spread"],
    );
    let seed_rows = [
        ("the series' kernel, re-inserting every entry (before)", SEED_BEFORE_S),
        ("the series' kernel, `mt_dup` (after)", SEED_AFTER_S),
    ];
    for (name, d) in [
        ("`try_dup_map` (node copy + exact-fit replace)", dup),
        ("rebuild by inserting every entry (the old fork path)", rebuild),
        ("`BTreeMap::clone`", bclone),
        ("`try_dup` alone (no replace)", bare),
        ("`try_dup`, then every entry replaced through a `CursorMut` (the kernel's loop)", by_cursor),
        ("bound: `Box::new` + 256-byte copy per node", alloc_bound),
        ("bound: 256-byte copies only (no allocation)", copy_bound),
    ] {
        tab.row(vec![
            Cell::text(name),
            Cell::num(d.ns(), Unit::Ns),
            Cell::num(d.ns() / nodes as f64, Unit::Ns),
            Cell::num(d.median * SEED_LOOPS as f64, Unit::Plain),
            Cell::num(div(d.ns(), dup.ns()), Unit::Times),
            Cell::num(d.spread(), Unit::Percent),
        ]);
    }
    for (name, secs) in seed_rows {
        let per = secs / SEED_LOOPS as f64 * 1e9;
        tab.row(vec![
            Cell::text(name),
            Cell::num(per, Unit::Ns),
            Cell::Empty,
            Cell::num(secs, Unit::Plain),
            Cell::num(div(per, dup.ns()), Unit::Times),
            Cell::Empty,
        ]);
    }
    s.table(tab);
    s.goal(Goal::new(
        "dup-based fork ≥ 7× faster than rebuilding by insertion",
        format!("{:.1}×", div(rebuild.ns(), dup.ns())),
        Some(rebuild.ns() >= 7.0 * dup.ns()),
    ));
    s.goal(Goal::new(
        format!("bare dup of the 135-entry tree ≤ 0.45 µs (kernel C: {:.2} µs)", KERNEL_DUP_NS / 1e3),
        format!("{:.2} µs", bare.ns() / 1e3),
        Some(bare.ns() <= 450.0),
    ));
    s.goal(Goal::new(
        "the series' loop faster than the series' kernel (2.60 s per 80,000)",
        format!("{:.2} s per 80,000", dup.median * SEED_LOOPS as f64),
        Some(dup.median * (SEED_LOOPS as f64) < SEED_AFTER_S),
    ));

    progress("forking: dup scaling");
    let sizes: &[u64] = match opts.mode {
        Mode::Tiny => &[100, 1_000],
        Mode::Quick => &[100, 1_000, 10_000, 100_000],
        Mode::Full => &[100, 1_000, 10_000, 100_000, 1_000_000],
    };
    let mut tab = Table::new("dup-scaling", 1, &["entries", "nodes", "µs per dup", "ns per entry"]);
    let mut points = Vec::new();
    let mut per_entry = Vec::new();
    for &n in sizes {
        let t = maple(n, true);
        let st = t.stats();
        let loops = ((2_000_000 / n).max(3) as f64 * opts.scale.max(0.05)).max(2.0) as u64;
        let d =
            per_op(opts.reps, loops, || (), |()| (0..loops).map(|_| t.try_dup().expect("dup").len()).sum::<usize>());
        let pe = d.ns() / n as f64;
        per_entry.push(pe);
        points.push((n as f64, pe));
        tab.row(vec![
            Cell::num(n as f64, Unit::Count),
            Cell::num((st.leaves + st.internal) as f64, Unit::Count),
            Cell::num(d.ns() / 1e3, Unit::Plain),
            Cell::num(pe, Unit::Plain),
        ]);
    }
    s.text(
        "Duplication cost per entry as the tree grows (flat = O(n)); values are `U63`, so a dup is node copies only.",
    );
    s.table(tab);
    let mut p = Plot::new("dup-scaling", "duplication: ns per entry", "entries", "ns per entry").log(true, false);
    p.series("MapleTree::try_dup", points);
    s.plot(p);
    s.goal(Goal::new(
        "dup time per entry flat (O(n))",
        format!("{} ns per entry from {} to {} entries", span(&per_entry, 1, ""), sizes[0], sizes[sizes.len() - 1]),
        None,
    ));
    s
}
