//! The kernel's own maple-tree benchmark loops (`lib/test_maple_tree.c`,
//! REFERENCE.md §8) at reduced counts, run side by side with the kernel's
//! C code itself where `ci/kernel-c.sh` has built it (our driver,
//! `crates/maple-bench/kernel-c/`, around the kernel's `lib/maple_tree.c`
//! from Debian's `linux-source` package), and beside the figures quoted
//! quotes for it.

use std::{
    cell::RefCell,
    hint::black_box,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use maple_tree::{MapleTree, U63};

use super::div;
use crate::{
    measure::{alternate, case, timed, Candidate, Timing},
    model::{Cell, Goal, Section, Table, Unit},
    workloads::{kernel_tree, u},
    Options,
};

/// The kernel's C maple tree with our benchmark driver, if built.
enum KernelC {
    Built(PathBuf),
    /// Why not (shown in the report).
    Missing(String),
}

impl KernelC {
    /// `$MAPLE_KBENCH`, else `target/kernel-c/kbench` in this workspace
    /// (where `ci/kernel-c.sh` puts it).
    fn find() -> KernelC {
        match std::env::var_os("MAPLE_KBENCH") {
            Some(p) => {
                let p = PathBuf::from(p);
                if p.is_file() {
                    KernelC::Built(p)
                } else {
                    KernelC::Missing(format!("`MAPLE_KBENCH` names no file ({})", p.display()))
                }
            }
            None => {
                let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/kernel-c/kbench");
                if p.is_file() {
                    KernelC::Built(p)
                } else {
                    KernelC::Missing("not built here: `bash ci/kernel-c.sh` builds it".to_string())
                }
            }
        }
    }
}

/// One run of the kernel C loop `name`, `loops` iterations: the loop's own
/// time, as the driver measures it (process start and tree building left
/// out, as they are on our side).
fn run_c(path: &Path, name: &str, loops: u64) -> Result<Duration, String> {
    let out = Command::new(path)
        .arg(name)
        .arg(loops.to_string())
        .output()
        .map_err(|e| format!("could not run {}: {e}", path.display()))?;
    let said = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "`kbench {name}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    match said.trim().parse::<f64>() {
        Ok(ns) if ns.is_finite() && ns > 0.0 => Ok(Duration::from_secs_f64(ns * 1e-9 * loops as f64)),
        _ => Err(format!("`kbench {name}` printed {:?}, not a time", said.trim())),
    }
}

/// Our loop and, where built, the kernel's C loop `name` timed in the same
/// alternating rounds: our timing, and the C timing or why there is none.
fn side_by_side(
    opts: &Options,
    c: &KernelC,
    name: &str,
    loops: u64,
    ours: Candidate<'_>,
) -> (Timing, Result<Timing, String>) {
    let path = match c {
        KernelC::Built(path) => path,
        KernelC::Missing(why) => return (alternate(opts.reps, vec![ours])[0], Err(why.clone())),
    };
    let failed = RefCell::new(None);
    let theirs = timed(loops, || {
        run_c(path, name, loops).unwrap_or_else(|e| {
            failed.borrow_mut().get_or_insert(e);
            Duration::ZERO
        })
    });
    let t = alternate(opts.reps, vec![ours, theirs]);
    match failed.into_inner() {
        Some(e) => (t[0], Err(e)),
        None => (t[0], Ok(t[1])),
    }
}

/// "100 K", "1 M", or the number itself.
fn count_label(n: u64) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{} M", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{} K", n / 1_000),
        n => n.to_string(),
    }
}

/// The numbers `0..n` in the order a Fisher-Yates shuffle driven by
/// splitmix64 seeded with `seed` leaves them: seed 7 is the order in which
/// both sides store ranges (random inserts, node counts), 8 the order in
/// which they erase them.
fn shuffled(n: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    let mut state = seed;
    for i in (1..v.len()).rev() {
        let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// Nodes after `n` ranges stored in random order: ours, and the kernel
/// C's (or why not).
fn nodes_after_random(c: &KernelC, n: u64) -> (u64, Result<u64, String>) {
    let mut t = MapleTree::with_gaps();
    for i in shuffled(n, 7) {
        t.insert_range(i * 16..=i * 16 + 9, u(i)).expect("insert");
    }
    let st = t.stats();
    let ours = (st.leaves + st.internal) as u64;
    let theirs = match c {
        KernelC::Missing(why) => Err(why.clone()),
        KernelC::Built(path) => Command::new(path)
            .arg("nodes-random")
            .arg(n.to_string())
            .output()
            .map_err(|e| format!("could not run {}: {e}", path.display()))
            .and_then(|out| {
                let said = String::from_utf8_lossy(&out.stdout);
                match said.trim().parse::<u64>() {
                    Ok(nodes) if out.status.success() && nodes > 0 => Ok(nodes),
                    _ => Err(format!("`kbench nodes-random {n}` answered {:?}", said.trim())),
                }
            }),
    };
    (ours, theirs)
}

/// splitmix64: the key sequence both sides draw for random lookups.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A row of the table.
struct Row {
    name: String,
    /// The data the loop runs on.
    data: &'static str,
    loops: u64,
    /// Our nanoseconds per unit.
    ours: f64,
    /// The kernel C's nanoseconds per unit in this run, or why there are
    /// none.
    c: Result<f64, String>,
    /// The quoted kernel C figure for the loop, if there is one.
    quoted: Option<f64>,
    unit: &'static str,
}

/// The table's rows, measured one by one.
struct Rows<'a> {
    opts: &'a Options,
    c: &'a KernelC,
    rows: Vec<Row>,
}

impl Rows<'_> {
    /// Times `ours` beside the kernel C loop `kbench` in the same rounds
    /// and adds the row; an iteration of either is `per` units of `unit`.
    fn add(
        &mut self,
        name: impl Into<String>,
        kbench: &str,
        data: &'static str,
        (loops, per, unit): (u64, f64, &'static str),
        quoted: Option<f64>,
        ours: Candidate<'_>,
    ) {
        let (d, k) = side_by_side(self.opts, self.c, kbench, loops, ours);
        let c = k.map(|t| t.ns() / per);
        self.rows.push(Row { name: name.into(), data, loops, ours: d.ns() / per, c, quoted, unit });
    }
}

pub(super) fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> Section {
    let mut s = Section::new("kernel", "The kernel's maple-tree benchmarks (gap-tracking trees)");
    let c = KernelC::find();
    let mut rows = Rows { opts, c: &c, rows: Vec::new() };

    progress("kernel: slot store");
    let loops = opts.loops(2_000_000.0, 10);
    let ours = case(
        loops,
        || kernel_tree(1030),
        |mut t| {
            for _ in 0..loops {
                t.remove_range(105..=105).expect("clear");
                t.store_range(100..=105, u(100)).expect("store");
            }
            t
        },
    );
    rows.add("slot store", "slot-store", "`[i, i+5]`, i = 0, 10 … 1030", (loops, 1.0, "iteration"), Some(71.0), ours);

    progress("kernel: node store");
    let loops = opts.loops(2_000_000.0, 10);
    let ours = case(
        loops,
        || kernel_tree(230),
        |mut t| {
            let mut ow = 76u64;
            for _ in 0..loops {
                t.store_range(ow..=ow + 15, u(ow)).expect("store");
                ow += 5;
                if ow > 135 {
                    ow = 76;
                }
            }
            t
        },
    );
    rows.add(
        "node store",
        "node-store",
        "i = 0, 10 … 230; store `[ow, ow+15]`",
        (loops, 1.0, "iteration"),
        Some(51.0),
        ours,
    );

    progress("kernel: gap walk");
    let mut t = kernel_tree(2490);
    t.remove_range(1470..=1475).expect("clear");
    let loops = opts.loops(5_000_000.0, 10);
    let ours = case(
        loops,
        || (),
        |()| (0..loops).map(|_| t.empty_area_rev(0..=2000, black_box(10)).unwrap_or(0)).sum::<u64>(),
    );
    rows.add("gap walk", "gap-walk", "highest gap of 10 in [0, 2000]", (loops, 1.0, "iteration"), Some(63.0), ours);

    progress("kernel: walk / load");
    let loops = opts.loops(20_000_000.0, 10);
    let ours = case(loops, || (), |()| (0..loops).map(|_| t.load(black_box(1480)).map_or(0, U63::get)).sum::<u64>());
    rows.add("walk / load", "load", "lookup of 1480 in the gap-walk tree", (loops, 1.0, "iteration"), Some(20.0), ours);

    progress("kernel: for-each");
    let mut fe = MapleTree::with_gaps();
    for i in 0..500u64 {
        fe.insert_range(i * 5..=i * 5 + 4, u(i)).expect("insert");
    }
    let loops = opts.loops(50_000.0, 10);
    // A `for` loop steps with `next`, as `mt_for_each` steps with
    // `mt_find` (`sum` would run on the iterator's `fold`).
    let ours = case(
        loops,
        || (),
        |()| {
            let mut s = 0u64;
            for _ in 0..loops {
                for (_, v) in &fe {
                    s = s.wrapping_add(v.get());
                }
            }
            s
        },
    );
    rows.add(
        "for-each",
        "for-each",
        "`[i, i+4]`, 500 entries, full iterations",
        (loops, 500.0, "entry"),
        Some(20.0),
        ours,
    );

    progress("kernel: prev");
    let mut pv = MapleTree::with_gaps();
    for i in (0..2500u64).step_by(5) {
        pv.insert_range(i..=i + if i % 30 == 0 { 3 } else { 4 }, u(i)).expect("insert");
    }
    let loops = opts.loops(20_000.0, 10);
    // From the empty range at the top of the index space down through
    // every entry, as `mas_prev` steps from `ULONG_MAX`.
    let ours = case(
        loops,
        || (),
        |()| {
            let mut s = 0u64;
            for _ in 0..loops {
                let mut c = pv.cursor(black_box(u64::MAX));
                while let Some((_, v)) = c.prev() {
                    s = s.wrapping_add(v.get());
                }
            }
            s
        },
    );
    rows.add(
        "prev",
        "prev",
        "`[i, i+4]` (every sixth `[i, i+3]`), 500 entries, backwards",
        (loops, 500.0, "entry"),
        None,
        ours,
    );

    progress("kernel: next");
    // Forward from index 0 through every entry, as `mas_for_each` steps.
    let ours = case(
        loops,
        || (),
        |()| {
            let mut s = 0u64;
            for _ in 0..loops {
                let mut c = pv.cursor(black_box(0));
                if let Some(v) = c.get() {
                    s = s.wrapping_add(v.get());
                }
                while let Some((_, v)) = c.next() {
                    s = s.wrapping_add(v.get());
                }
            }
            s
        },
    );
    rows.add("next", "next", "the same 500 entries, forwards", (loops, 500.0, "entry"), None, ours);

    // The `mt_dup()` series' tree, built as the kernel's fork benchmark builds it.
    let mut seed = MapleTree::with_gaps();
    for i in 0..=134u64 {
        seed.insert_range(i * 10..=i * 10 + 5, u(i)).expect("insert");
    }
    progress("kernel: fork");
    let loops = opts.loops(20_000.0, 10);
    let ours = case(
        loops,
        || (),
        |()| {
            let mut n = 0;
            for _ in 0..loops {
                let mut copy = seed.try_dup().expect("dup");
                let mut c = copy.cursor_mut(0);
                while let Some((_, v)) = c.next() {
                    c.replace(v).expect("replace");
                }
                n += copy.len();
            }
            n
        },
    );
    rows.add(
        "fork",
        "fork",
        "135 entries: dup, every entry stored again by cursor, drop",
        (loops, 1.0, "iteration"),
        None,
        ours,
    );

    progress("kernel: dup");
    let loops = opts.loops(200_000.0, 10);
    let ours = case(loops, || (), |()| (0..loops).map(|_| seed.try_dup().expect("dup").len()).sum::<usize>());
    rows.add("dup + destroy", "dup", "the same 135 entries", (loops, 1.0, "iteration"), None, ours);

    // Random lookups in a plain tree of `[i*16, i*16+9]` stored in
    // ascending order, keys from the same generator as the C driver's, at
    // the section's sizes from 100 K up (the smallest, if none is).
    let big = |n: &&u64| **n >= 100_000;
    let lookup_sizes: Vec<u64> = if opts.sizes.iter().any(|n| big(&n)) {
        opts.sizes.iter().filter(big).copied().collect()
    } else {
        opts.sizes.iter().take(1).copied().collect()
    };
    for &n in &lookup_sizes {
        progress(&format!("kernel: lookups, {n} ranges"));
        let mut t = MapleTree::new();
        for i in 0..n {
            t.store_range(i * 16..=i * 16 + 9, u(i)).expect("store");
        }
        let loops = opts.loops(2_000_000.0, 10);
        let ours = case(
            loops,
            || (),
            |()| {
                let mut state = 1u64;
                (0..loops).map(|_| t.load(splitmix64(&mut state) % (n * 16)).map_or(0, U63::get)).sum::<u64>()
            },
        );
        rows.add(
            format!("lookup, random, {}", count_label(n)),
            &format!("lookup:{n}"),
            "plain tree, `[i*16, i*16+9]` stored in order; random keys",
            (loops, 1.0, "lookup"),
            None,
            ours,
        );
    }

    // Random inserts into an empty gap tree, and random erases of them
    // all, at the same sizes: the kernel's writes take its lock and
    // allocate every node they write; ours work in place where no reader
    // can be (see docs/DESIGN.md, "Writes").
    for &n in &lookup_sizes {
        progress(&format!("kernel: random inserts and erases, {n} ranges"));
        let order = shuffled(n, 7);
        let build = |t: &mut MapleTree<U63>| {
            for &i in &order {
                t.store_range(i * 16..=i * 16 + 9, u(i)).expect("store");
            }
        };
        let ours = case(n, MapleTree::with_gaps, |mut t| {
            build(&mut t);
            t
        });
        let what = "gap tree, `[i*16, i*16+9]` in a random order";
        rows.add(format!("random inserts, {}", count_label(n)), "insert", what, (n, 1.0, "insert"), None, ours);
        let erase_order = shuffled(n, 8);
        let ours = case(
            n,
            || {
                let mut t = MapleTree::with_gaps();
                build(&mut t);
                t
            },
            |mut t| {
                for &i in &erase_order {
                    black_box(t.erase(i * 16));
                }
                t
            },
        );
        let what = "that tree; each range erased, in another random order";
        rows.add(format!("random erases, {}", count_label(n)), "erase", what, (n, 1.0, "erase"), None, ours);
    }

    // The lowest gap of 4 (the first one) or 10 (none but the end) in a
    // gap tree of such ranges (100 K, or the section's largest size below).
    let n = opts.sizes.iter().copied().filter(|&n| n <= 100_000).max().unwrap_or(100_000);
    progress("kernel: lowest gap");
    let mut gt = MapleTree::with_gaps();
    for i in 0..n {
        gt.store_range(i * 16..=i * 16 + 9, u(i)).expect("store");
    }
    for size in [4u64, 10] {
        let loops = opts.loops(2_000_000.0, 10);
        let ours =
            case(loops, || (), |()| (0..loops).map(|_| gt.empty_area(.., black_box(size)).unwrap_or(0)).sum::<u64>());
        rows.add(
            format!("lowest gap ≥ {size}, {}", count_label(n)),
            &format!("gap:{size}:{n}"),
            "gap tree, the same ranges; the whole index space",
            (loops, 1.0, "search"),
            None,
            ours,
        );
    }

    let rows = rows.rows;
    let measured = rows.iter().all(|r| r.c.is_ok());
    let how = if measured {
        "The kernel C column was measured in this run: the kernel's own `lib/maple_tree.c` (Debian's `linux-source` package, here Linux 6.12), built in userspace at `-O2` without its debug checks by `ci/kernel-c.sh` on the kernel's test shims, with our driver and a lean node allocator (`crates/maple-bench/kernel-c/`), each loop in a process of its own, timed by the driver, in the same alternating rounds as ours. Its writes take the tree's lock (a mutex in the shims) and its reads an RCU read lock (liburcu), as a kernel caller's do. The ratio compares the two; the quoted column is the figure quoted for the same C code built in userspace on another machine, for context.".to_string()
    } else {
        let why = rows.iter().find_map(|r| r.c.as_ref().err()).cloned().unwrap_or_default();
        format!("The kernel's C code was not run here ({why}), so the ratio compares ours with the figures quoted for the kernel's C maple tree built in userspace on a machine like ours (context, not measured in this run).")
    };
    s.text(format!(
        "Same data and loop bodies as the kernel's `lib/test_maple_tree.c` benchmarks, fewer iterations. {how} A ratio above 1 means we are faster. The for-each figures are per entry: ours steps a Rust iterator (`next`), the kernel's `mt_for_each` calls `mt_find` from the root for each entry; prev and next step a read cursor back and forth (ours `Cursor::prev` and `Cursor::next`, the kernel's `mas_prev` and `mas_for_each`). Fork and dup are the kernel's `BENCH_FORK` loop and its duplication alone (ours `try_dup`, the kernel's `__mt_dup`; both allocators serve nodes from free lists). Random inserts store ranges into an empty gap tree in a random order (a Fisher–Yates shuffle driven by splitmix64, both sides the same) with `store_range` and `mtree_store_range`; random erases then erase each by its first index in another such order (`erase`, `mtree_erase`; the build is not timed)."
    ));
    let mut tab = Table::new(
        "kernel",
        1,
        &["benchmark", "data", "iterations", "ours ns", "kernel C ns", "C / ours", "kernel C ns (quoted)", "per"],
    );
    let mut ratios = Vec::new();
    let num_or_dash = |v: Option<f64>, unit| v.map_or_else(|| Cell::text("–"), |v| Cell::num(v, unit));
    for r in &rows {
        // Against this run's C where it ran, else the quoted figure.
        let c = r.c.as_ref().ok().copied();
        let ratio = c.or(r.quoted).map(|c| div(c, r.ours));
        if let Some(x) = ratio {
            ratios.push((r.name.clone(), x));
        }
        tab.row(vec![
            Cell::text(r.name.clone()),
            Cell::text(r.data),
            Cell::num(r.loops as f64, Unit::Count),
            Cell::num(r.ours, Unit::Ns),
            num_or_dash(c, Unit::Ns),
            num_or_dash(ratio, Unit::Times),
            num_or_dash(r.quoted, Unit::Ns),
            Cell::text(r.unit),
        ]);
    }
    s.table(tab);

    // Density: the nodes each tree keeps after random inserts.
    let mut dens = Table::new("kernel-nodes", 0, &["ranges", "ours", "kernel C", "C / ours"]);
    for &n in &opts.sizes {
        progress(&format!("kernel: nodes after {n} random inserts"));
        let (ours, theirs) = nodes_after_random(&c, n);
        let ratio = theirs.as_ref().ok().map(|&k| div(k as f64, ours as f64));
        if let Some(r) = ratio {
            ratios.push((format!("nodes after {} random inserts", count_label(n)), r));
        }
        dens.row(vec![
            Cell::num(n as f64, Unit::Count),
            Cell::num(ours as f64, Unit::Count),
            num_or_dash(theirs.ok().map(|k| k as f64), Unit::Count),
            num_or_dash(ratio, Unit::Times),
        ]);
    }
    s.text("Nodes a gap-tracking tree keeps after ranges `[i*16, i*16+9]` are stored in a random order (the same order on both sides: a Fisher–Yates shuffle driven by splitmix64); the kernel's count is the nodes its allocator handed out and the tree kept. A ratio above 1 means we use fewer nodes.");
    s.table(dens.caption("Nodes after random inserts"));
    let slower: Vec<String> = ratios.iter().filter(|r| r.1 < 1.0).map(|r| format!("{} {:.2}×", r.0, r.1)).collect();
    let against = if measured { "the kernel's C, this run" } else { "the quoted kernel C figures" };
    s.goal(Goal::new(
        "faster than the kernel's C on every benchmark loop",
        if slower.is_empty() {
            format!("every loop ≥ 1.0× ({against})")
        } else {
            format!("slower: {} ({against})", slower.join(", "))
        },
        Some(slower.is_empty()),
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The driver's answer is its nanoseconds per iteration, turned into
    /// the run's time; a failed run or anything but a positive number is
    /// an error naming the loop, never a time.
    #[test]
    fn a_driver_run_is_read_or_refused() {
        // `printf %s 250` prints "250": 250 ns per iteration, 250 loops.
        let d = run_c(Path::new("printf"), "%s", 250).expect("a time");
        assert_eq!(d, Duration::from_nanos(250 * 250));
        let e = run_c(Path::new("echo"), "slot-store", 10).expect_err("not a time");
        assert!(e.contains("slot-store 10"), "{e}");
        let e = run_c(Path::new("printf"), "-1", 10).expect_err("not positive");
        assert!(e.contains("-1"), "{e}");
        let e = run_c(Path::new("false"), "load", 10).expect_err("failed");
        assert!(e.contains("`kbench load` failed"), "{e}");
        let e = run_c(Path::new("/nonexistent/kbench"), "load", 10).expect_err("missing");
        assert!(e.contains("could not run"), "{e}");
    }

    /// Both sides draw the same keys: the first values of splitmix64
    /// seeded with 1, as the C driver computes them.
    #[test]
    fn the_key_sequence_is_splitmix64() {
        let mut s = 1u64;
        let got: Vec<u64> = (0..3).map(|_| splitmix64(&mut s)).collect();
        assert_eq!(got, [0x910a_2dec_8902_5cc1, 0xbeeb_8da1_658e_ec67, 0xf893_a2ee_fb32_555e]);
    }
}
