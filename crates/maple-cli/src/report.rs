//! `maple report`: measures the maple tree side by side with `BTreeMap`
//! (used as a range map) and the `rangemap` crate on built-in data, and
//! runs the kernel's own maple-tree benchmark loops, printing Markdown.
//!
//! Every figure is the median of several repetitions, and each row runs all
//! structures on the same data in the same process, so the ratios are
//! meaningful even on a busy machine; absolute times are not.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    hint::black_box,
    sync::{
        atomic::{AtomicBool, Ordering as AtomicOrdering},
        RwLock,
    },
    time::{Duration, Instant},
};

use crossbeam_skiplist::SkipMap;
use maple_tree::{ConcurrentMapleTree, MapleTree, U63};
use rand::{rngs::SmallRng, seq::SliceRandom, Rng, SeedableRng};
use rangemap::RangeInclusiveMap;

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Numbers of ranges for the comparison tables.
    pub sizes: Vec<u64>,
    /// Repetitions per measurement (the median is reported).
    pub reps: usize,
    /// Scale of the kernel benchmark loops (1.0 = our default counts).
    pub loop_scale: f64,
    /// Sections to run; empty means all.
    pub sections: Vec<Section>,
}

/// A part of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Section {
    /// maple vs BTreeMap and rangemap: load, iterate, store, erase, gap search, memory.
    Compare,
    /// The kernel's own benchmark loops.
    Kernel,
    /// O(n) duplication (fork) against rebuilding.
    Fork,
    /// Lock-free readers with and without a busy writer.
    Concurrent,
    /// Address space: fork scaling, fork of named mappings, call costs.
    Mm,
    /// Swap extents: lookups from 1-8 threads, list vs ordered map vs ours.
    Swap,
}

impl Default for Options {
    fn default() -> Self {
        Options { sizes: vec![1_000, 100_000, 1_000_000], reps: 5, loop_scale: 1.0, sections: Vec::new() }
    }
}

const STEP: u64 = 16;
const LEN: u64 = 10;

fn range(i: u64) -> (u64, u64) {
    (i * STEP, i * STEP + LEN - 1)
}

fn u(x: u64) -> U63 {
    U63::new_truncate(x)
}

/// Median time per operation of `reps` runs of `f`, which performs `ops`
/// operations; `setup` builds fresh input for each run (not timed).
pub(crate) fn per_op<S, T>(reps: usize, ops: u64, mut setup: impl FnMut() -> S, mut f: impl FnMut(S) -> T) -> Duration {
    let mut times: Vec<Duration> = (0..reps.max(1))
        .map(|_| {
            let input = setup();
            let start = Instant::now();
            let out = f(input);
            let d = start.elapsed();
            drop(black_box(out));
            d
        })
        .collect();
    times.sort();
    times[times.len() / 2] / ops.max(1) as u32
}

pub(crate) fn ns(d: Duration) -> String {
    let n = d.as_secs_f64() * 1e9;
    if n >= 100.0 {
        format!("{n:.0}")
    } else {
        format!("{n:.1}")
    }
}

fn ratio(base: Duration, ours: Duration) -> String {
    format!("{:.2}×", base.as_secs_f64() / ours.as_secs_f64().max(1e-12))
}

fn maple(n: u64, gaps: bool) -> MapleTree<U63> {
    let items = (0..n).map(|i| {
        let (f, l) = range(i);
        (f..=l, u(i))
    });
    let t = if gaps { MapleTree::from_sorted_with_gaps(items) } else { MapleTree::from_sorted(items) };
    t.expect("sorted built-in data")
}

fn btree(n: u64) -> BTreeMap<u64, (u64, u64)> {
    (0..n)
        .map(|i| {
            let (f, l) = range(i);
            (f, (l, i))
        })
        .collect()
}

fn btree_load(m: &BTreeMap<u64, (u64, u64)>, i: u64) -> Option<u64> {
    m.range(..=i).next_back().and_then(|(_, &(l, v))| (l >= i).then_some(v))
}

fn btree_gap(m: &BTreeMap<u64, (u64, u64)>, size: u64) -> Option<u64> {
    let mut next = 0u64;
    for (&f, &(l, _)) in m {
        if f - next >= size {
            return Some(next);
        }
        next = l + 1;
    }
    Some(next)
}

fn rmap(n: u64) -> RangeInclusiveMap<u64, u64> {
    let mut m = RangeInclusiveMap::new();
    for i in 0..n {
        let (f, l) = range(i);
        m.insert(f..=l, i);
    }
    m
}

/// One row of a comparison table: ns/op for maple, the baselines, ratios.
struct Row {
    what: String,
    n: u64,
    maple: Duration,
    btree: Duration,
    rangemap: Option<Duration>,
}

fn comparison(opts: &Options, out: &mut String, progress: &mut dyn FnMut(&str)) {
    let mut rows = Vec::new();
    for &n in &opts.sizes {
        let reps = opts.reps;
        let mut rng = SmallRng::seed_from_u64(n);
        let lookups = 200_000u64;
        let keys: Vec<u64> = (0..lookups).map(|_| rng.gen_range(0..n * STEP)).collect();
        let mut shuffled: Vec<u64> = (0..n).collect();
        shuffled.shuffle(&mut rng);
        let asc: Vec<u64> = (0..n).collect();

        progress(&format!("load n={n}"));
        let t = maple(n, false);
        let m = btree(n);
        let r = rmap(n);
        let sum = |f: &dyn Fn(u64) -> u64| keys.iter().map(|&k| f(k)).sum::<u64>();
        rows.push(Row {
            what: "load (random)".into(),
            n,
            maple: per_op(reps, lookups, || (), |()| sum(&|k| t.load(k).map_or(0, U63::get))),
            btree: per_op(reps, lookups, || (), |()| sum(&|k| btree_load(&m, k).unwrap_or(0))),
            rangemap: Some(per_op(reps, lookups, || (), |()| sum(&|k| r.get(&k).copied().unwrap_or(0)))),
        });

        progress(&format!("iterate n={n}"));
        rows.push(Row {
            what: "iterate".into(),
            n,
            maple: per_op(reps, n, || (), |()| t.iter().map(|(_, v)| v.get()).sum::<u64>()),
            btree: per_op(reps, n, || (), |()| m.values().map(|v| v.1).sum::<u64>()),
            rangemap: Some(per_op(reps, n, || (), |()| r.iter().map(|(_, v)| *v).sum::<u64>())),
        });

        for (what, order) in [("store (ascending)", &asc), ("store (random)", &shuffled)] {
            progress(&format!("{what} n={n}"));
            rows.push(Row {
                what: what.into(),
                n,
                maple: per_op(reps, n, MapleTree::<U63>::new, |mut t| {
                    for &i in order {
                        let (f, l) = range(i);
                        t.store_range(f..=l, u(i)).expect("store");
                    }
                    t
                }),
                btree: per_op(reps, n, BTreeMap::<u64, (u64, u64)>::new, |mut m| {
                    for &i in order {
                        let (f, l) = range(i);
                        m.insert(f, (l, i));
                    }
                    m
                }),
                rangemap: Some(per_op(reps, n, RangeInclusiveMap::<u64, u64>::new, |mut m| {
                    for &i in order {
                        let (f, l) = range(i);
                        m.insert(f..=l, i);
                    }
                    m
                })),
            });
        }

        progress(&format!("erase n={n}"));
        rows.push(Row {
            what: "erase (random)".into(),
            n,
            maple: per_op(
                reps,
                n,
                || maple(n, false),
                |mut t| {
                    for &i in &shuffled {
                        black_box(t.erase(i * STEP));
                    }
                    t
                },
            ),
            btree: per_op(
                reps,
                n,
                || btree(n),
                |mut m| {
                    for &i in &shuffled {
                        black_box(m.remove(&(i * STEP)));
                    }
                    m
                },
            ),
            rangemap: Some(per_op(
                reps,
                n,
                || rmap(n),
                |mut m| {
                    for &i in &shuffled {
                        let (f, l) = range(i);
                        m.remove(f..=l);
                    }
                    m
                },
            )),
        });

        progress(&format!("gap n={n}"));
        let hole = rng.gen_range(n / 4..n / 2 + 1);
        let mut tg = maple(n, true);
        let mut mg = btree(n);
        for k in hole..hole + 5 {
            tg.erase(k * STEP);
            mg.remove(&(k * STEP));
        }
        let searches = 20_000u64;
        let scans = if n > 100_000 { 20 } else { (2_000_000 / n).max(20) };
        debug_assert_eq!(tg.empty_area(.., 64).ok(), btree_gap(&mg, 64));
        rows.push(Row {
            what: "gap search (lowest fit)".into(),
            n,
            maple: per_op(
                reps,
                searches,
                || (),
                |()| (0..searches).map(|_| tg.empty_area(.., black_box(64)).unwrap_or(0)).sum::<u64>(),
            ),
            btree: per_op(
                reps,
                scans,
                || (),
                |()| (0..scans).map(|_| btree_gap(&mg, black_box(64)).unwrap_or(0)).sum::<u64>(),
            ),
            rangemap: None,
        });
    }

    let _ = writeln!(out, "## Maple tree vs `BTreeMap` and `rangemap`\n");
    let _ = writeln!(
        out,
        "Ranges `[i*16, i*16+9]`; ns per operation (median of {} runs); ratio > 1 means the maple tree is faster. \
         The `BTreeMap` baseline is `BTreeMap<u64, (u64, V)>` with `range(..=i).next_back()`; its gap search is a linear scan.\n",
        opts.reps
    );
    let _ = writeln!(out, "| operation | ranges | maple ns | BTreeMap ns | rangemap ns | vs BTreeMap | vs rangemap |");
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in &rows {
        let (rm, rr) = match r.rangemap {
            Some(d) => (ns(d), ratio(d, r.maple)),
            None => ("–".into(), "–".into()),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.what,
            r.n,
            ns(r.maple),
            ns(r.btree),
            rm,
            ratio(r.btree, r.maple),
            rr
        );
    }
    let _ = writeln!(out, "\n### Memory\n");
    let _ = writeln!(out, "| ranges | flavour | height | nodes | bytes per range |");
    let _ = writeln!(out, "| ---: | --- | ---: | ---: | ---: |");
    for &n in &opts.sizes {
        for (gaps, name, how) in [(false, "plain", "bulk"), (true, "gaps", "bulk")] {
            let s = maple(n, gaps).stats();
            let _ = writeln!(
                out,
                "| {n} | {name} ({how}) | {} | {} | {:.1} |",
                s.height,
                s.leaves + s.internal,
                s.bytes_per_entry()
            );
        }
        let mut t = MapleTree::with_gaps();
        let mut order: Vec<u64> = (0..n).collect();
        order.shuffle(&mut SmallRng::seed_from_u64(n));
        for i in order {
            let (f, l) = range(i);
            let _ = t.insert_range(f..=l, u(i));
        }
        let s = t.stats();
        let _ = writeln!(
            out,
            "| {n} | gaps (random inserts) | {} | {} | {:.1} |",
            s.height,
            s.leaves + s.internal,
            s.bytes_per_entry()
        );
    }
}

/// The kernel benchmarks' layout: `[i, i+5]` for i = 0, 10, … `top`.
fn kernel_tree(top: u64) -> MapleTree<U63> {
    let mut t = MapleTree::with_gaps();
    for i in (0..=top).step_by(10) {
        t.insert_range(i..=i + 5, u(i)).expect("insert");
    }
    t
}

/// The kernel's benchmark loops (REFERENCE.md §8), on gap-tracking trees.
fn kernel_loops(opts: &Options, out: &mut String, progress: &mut dyn FnMut(&str)) {
    let scale = |n: f64| ((n * opts.loop_scale) as u64).max(1);
    let mut rows: Vec<(&str, &str, u64, Duration)> = Vec::new();

    progress("kernel: slot store");
    let loops = scale(2_000_000.0);
    let d = per_op(
        opts.reps,
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
    rows.push(("slot store", "`[i, i+5]`, i = 0, 10 … 1030", loops, d));

    progress("kernel: node store");
    let loops = scale(2_000_000.0);
    let d = per_op(
        opts.reps,
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
    rows.push(("node store", "i = 0, 10 … 230; store `[ow, ow+15]`", loops, d));

    progress("kernel: gap walk");
    let mut t = kernel_tree(2490);
    t.remove_range(1470..=1475).expect("clear");
    let loops = scale(5_000_000.0);
    let d = per_op(
        opts.reps,
        loops,
        || (),
        |()| (0..loops).map(|_| t.empty_area_rev(0..=2000, black_box(10)).unwrap_or(0)).sum::<u64>(),
    );
    rows.push(("gap walk", "highest gap of 10 in [0, 2000]", loops, d));

    progress("kernel: walk/load");
    let loops = scale(20_000_000.0);
    let d = per_op(
        opts.reps,
        loops,
        || (),
        |()| (0..loops).map(|_| t.load(black_box(1480)).map_or(0, U63::get)).sum::<u64>(),
    );
    rows.push(("walk / load", "lookup of 1480 in the gap-walk tree", loops, d));

    progress("kernel: for-each");
    let mut fe = MapleTree::with_gaps();
    for i in 0..500u64 {
        fe.insert_range(i * 5..=i * 5 + 4, u(i)).expect("insert");
    }
    let loops = scale(50_000.0);
    let d = per_op(
        opts.reps,
        loops,
        || (),
        |()| (0..loops).map(|_| fe.iter().map(|(_, v)| v.get()).sum::<u64>()).sum::<u64>(),
    );
    rows.push(("for-each", "`[i, i+4]`, 500 entries, one full iteration", loops, d));

    let _ = writeln!(out, "\n## The kernel's maple-tree benchmarks (gap-tracking trees)\n");
    let _ = writeln!(
        out,
        "Same data and loop bodies as the kernel's `lib/test_maple_tree.c` benchmarks, fewer iterations.\n"
    );
    let _ = writeln!(out, "| benchmark | data | iterations | ns per iteration |");
    let _ = writeln!(out, "| --- | --- | ---: | ---: |");
    for (name, data, loops, d) in rows {
        let _ = writeln!(out, "| {name} | {data} | {loops} | {} |", ns(d));
    }
}

/// A 256-byte, 256-aligned block: what one node copy moves.
#[derive(Clone, Copy)]
#[repr(C, align(256))]
struct Block([u8; 256]);

/// The seed's fork benchmark (duplicate a 135-entry gap-tracking tree and
/// replace every entry in the copy) and duplication scaling.
fn fork(opts: &Options, out: &mut String, progress: &mut dyn FnMut(&str)) {
    progress("fork: dup vs rebuild");
    let mut t = MapleTree::with_gaps();
    for i in 0..135u64 {
        t.insert_range(i * 10..=i * 10 + 5, u(i)).expect("insert");
    }
    let nodes = t.stats().leaves + t.stats().internal;
    let loops = ((80_000.0 * opts.loop_scale) as u64).max(10);
    let dup = per_op(
        opts.reps,
        loops,
        || (),
        |()| (0..loops).map(|_| t.try_dup_map(|_, v| v).expect("dup").len()).sum::<usize>(),
    );
    let rebuild = per_op(
        opts.reps,
        loops,
        || (),
        |()| {
            (0..loops)
                .map(|_| {
                    let mut c = MapleTree::with_gaps();
                    for (r, v) in t.iter() {
                        c.insert_range(r, v).expect("insert");
                    }
                    c.len()
                })
                .sum::<usize>()
        },
    );
    let m: BTreeMap<u64, (u64, u64)> = t.iter().map(|(r, v)| (*r.start(), (*r.end(), v.get()))).collect();
    let bclone = per_op(opts.reps, loops, || (), |()| (0..loops).map(|_| m.clone().len()).sum::<usize>());
    let src = vec![Block([7; 256]); nodes];
    let memcpy_alloc = per_op(
        opts.reps,
        loops,
        || (),
        |()| (0..loops).map(|_| src.iter().map(|b| Box::new(*black_box(b))).collect::<Vec<_>>().len()).sum::<usize>(),
    );
    let mut dst = vec![Block([0; 256]); nodes];
    let memcpy = per_op(
        opts.reps,
        loops,
        || (),
        |()| {
            for _ in 0..loops {
                dst.copy_from_slice(black_box(&src));
            }
            dst[0].0[0]
        },
    );
    let _ = writeln!(out, "\n## Fork: duplicating a VMA-like tree\n");
    let _ = writeln!(
        out,
        "The seed's benchmark: a gap-tracking tree of 135 entries `[i*10, i*10+5]` ({nodes} nodes), duplicated and every entry of the copy replaced, then the copy dropped; {loops} iterations, time per iteration.\n"
    );
    let _ = writeln!(out, "| method | ns per iteration | ns per node | vs dup |");
    let _ = writeln!(out, "| --- | ---: | ---: | ---: |");
    let per_node = |d: Duration| ns(d / nodes as u32);
    for (name, d) in [
        ("`try_dup_map` (node copy + exact-fit replace)", dup),
        ("rebuild by inserting every entry (old fork path)", rebuild),
        ("`BTreeMap::clone`", bclone),
        ("bound: `Box::new` + 256-byte copy per node", memcpy_alloc),
        ("bound: 256-byte copies only (no allocation)", memcpy),
    ] {
        let _ = writeln!(out, "| {name} | {} | {} | {} |", ns(d), per_node(d), ratio(d, dup));
    }

    progress("fork: dup scaling");
    let _ = writeln!(out, "\nDuplication cost per entry as the tree grows (flat = O(n)):\n");
    let _ = writeln!(out, "| entries | nodes | ns per dup | ns per entry |");
    let _ = writeln!(out, "| ---: | ---: | ---: | ---: |");
    for n in [100u64, 10_000, 1_000_000] {
        if n > 10_000 && opts.loop_scale < 1.0 {
            continue;
        }
        let t = maple(n, true);
        let s = t.stats();
        let loops = (2_000_000 / n).max(3);
        let d = per_op(
            opts.reps,
            loops,
            || (),
            |()| (0..loops).map(|_| t.try_dup_map(|_, v| v).expect("dup").len()).sum::<usize>(),
        );
        let _ =
            writeln!(out, "| {n} | {} | {} | {:.2} |", s.leaves + s.internal, ns(d), d.as_secs_f64() * 1e9 / n as f64);
    }
}

/// CPU time used so far by the calling thread (wall time where the
/// platform has no per-thread clock).
fn thread_cpu_time() -> Option<Duration> {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        if rc == 0 {
            return Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
        }
    }
    None
}

/// Tells a benchmark writer when to stop and, if paced, when each write
/// is due.
pub(crate) struct Pace {
    stop: AtomicBool,
    start: Instant,
    /// Time between writes; `None` writes as fast as possible.
    period: Option<Duration>,
    /// Number of writes after which to stop anyway.
    limit: u64,
}

impl Pace {
    /// Waits (spinning, so the writer keeps its core) until write `i` is
    /// due; false once the readers have finished.
    pub(crate) fn next(&self, i: u64) -> bool {
        if i >= self.limit {
            return false;
        }
        if let Some(p) = self.period {
            let due = self.start + p * i as u32;
            while Instant::now() < due {
                if self.stop.load(AtomicOrdering::Relaxed) {
                    return false;
                }
                std::hint::spin_loop();
            }
        }
        !self.stop.load(AtomicOrdering::Relaxed)
    }
}

/// A benchmark reader: one lookup, returning something to sum.
pub(crate) type Read<'a> = &'a (dyn Fn(u64) -> u64 + Sync);
/// A benchmark writer: writes until its [`Pace`] says stop; returns the
/// number of writes.
pub(crate) type Write<'a> = &'a (dyn Fn(&Pace) -> u64 + Sync);

/// What one [`read_throughput`] run measured.
pub(crate) struct Throughput {
    /// Lookups per second of wall time, mean over readers.
    pub(crate) wall: f64,
    /// Lookups per second of the readers' own CPU time (what a reader gets
    /// done while it runs, apart from time the scheduler gave to others).
    pub(crate) cpu: f64,
    /// Writes per second, if a writer ran.
    pub(crate) writes: f64,
}

/// `readers` threads each do `per_reader` random lookups with `lookup`,
/// while `writer` (if any) runs in another thread until they finish and
/// reports how many writes it did.
fn read_throughput(
    readers: usize,
    per_reader: u64,
    keys: u64,
    lookup: Read<'_>,
    writer: Option<(Write<'_>, Option<Duration>)>,
) -> Throughput {
    let start = Instant::now();
    let pace = Pace { stop: AtomicBool::new(false), start, period: writer.and_then(|w| w.1), limit: u64::MAX };
    let (times, writes) = std::thread::scope(|s| {
        let w = writer.map(|(w, _)| s.spawn(|| w(&pace)));
        let hs: Vec<_> = (0..readers)
            .map(|r| {
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(r as u64 + 1);
                    let cpu0 = thread_cpu_time();
                    let start = Instant::now();
                    let mut sum = 0u64;
                    for _ in 0..per_reader {
                        sum = sum.wrapping_add(lookup(rng.gen_range(0..keys)));
                    }
                    black_box(sum);
                    let wall = start.elapsed().as_secs_f64();
                    let cpu = match (cpu0, thread_cpu_time()) {
                        (Some(a), Some(b)) => (b - a).as_secs_f64(),
                        _ => wall,
                    };
                    (wall, cpu)
                })
            })
            .collect();
        let times: Vec<(f64, f64)> = hs.into_iter().map(|h| h.join().expect("reader")).collect();
        pace.stop.store(true, AtomicOrdering::Relaxed);
        let writes = w.map_or(0, |w| w.join().expect("writer"));
        (times, writes)
    });
    let elapsed = start.elapsed().as_secs_f64();
    let mean = |f: fn(&(f64, f64)) -> f64| times.iter().map(f).sum::<f64>() / times.len() as f64;
    Throughput {
        wall: per_reader as f64 / mean(|t| t.0),
        cpu: per_reader as f64 / mean(|t| t.1).max(1e-9),
        writes: writes as f64 / elapsed,
    }
}

/// Readers alone and readers with `writer`, measured `reps` times each,
/// alternating (so that drift in the machine's speed hits both alike);
/// for each, the run with the median wall rate.
pub(crate) fn alone_and_busy(
    reps: usize,
    readers: usize,
    per_reader: u64,
    keys: u64,
    lookup: Read<'_>,
    writer: (Write<'_>, Option<Duration>),
) -> (Throughput, Throughput) {
    let (mut alone, mut busy) = (Vec::new(), Vec::new());
    for _ in 0..reps.max(1) {
        alone.push(read_throughput(readers, per_reader, keys, lookup, None));
        busy.push(read_throughput(readers, per_reader, keys, lookup, Some(writer)));
    }
    let median = |mut runs: Vec<Throughput>| {
        runs.sort_by(|a, b| a.wall.total_cmp(&b.wall));
        runs.swap_remove(runs.len() / 2)
    };
    (median(alone), median(busy))
}

/// Read throughput alone and with a busy writer, for the concurrent tree
/// and the usual concurrent alternatives.
fn concurrent(opts: &Options, out: &mut String, progress: &mut dyn FnMut(&str)) {
    let n = 100_000u64;
    let keys = n * STEP;
    let per_reader = ((1_000_000.0 * opts.loop_scale) as u64).max(1000);
    let shared: ConcurrentMapleTree<U63> = ConcurrentMapleTree::from(maple(n, false));
    let rw = RwLock::new(btree(n));
    let skip: SkipMap<u64, (u64, u64)> = btree(n).into_iter().collect();
    let churn = |i: u64| (i * 7919) % n;

    // Readers use the convenient form: one pin per lookup.
    let maple_read = |k: u64| shared.load_with(k, |v| v.map_or(0, U63::get));
    let churn_tree = |t: &ConcurrentMapleTree<U63>, pace: &Pace| {
        let mut i = 0;
        while pace.next(i) {
            let (f, l) = range(churn(i));
            let mut w = t.lock();
            let _ = w.erase(f);
            let _ = w.insert_range(f..=l, u(i));
            i += 1;
        }
        2 * i
    };
    let maple_write = |pace: &Pace| churn_tree(&shared, pace);
    // The control: the same writer on another tree, so the readers share
    // nothing with it but the machine (and the epoch).
    let other: ConcurrentMapleTree<U63> = ConcurrentMapleTree::from(maple(n, false));
    let other_write = |pace: &Pace| churn_tree(&other, pace);
    let rw_read = |k: u64| btree_load(&rw.read().expect("lock"), k).unwrap_or(0);
    let rw_write = |pace: &Pace| {
        let mut i = 0;
        while pace.next(i) {
            let (f, l) = range(churn(i));
            let mut m = rw.write().expect("lock");
            m.remove(&f);
            m.insert(f, (l, i));
            i += 1;
        }
        2 * i
    };
    let scc_tree: scc::TreeIndex<u64, (u64, u64)> = scc::TreeIndex::new();
    for (f, v) in btree(n) {
        let _ = scc_tree.insert_sync(f, v);
    }
    let scc_read = |k: u64| {
        use scc::tree_index::Proximity;
        let g = scc::Guard::new();
        let below = match scc_tree.locate(&k, &g) {
            Proximity::Exact(it) | Proximity::Between(it) => it.get(),
            Proximity::Smaller(it) => it.get_back(),
            Proximity::Larger(_) | Proximity::Empty => None,
        };
        below.and_then(|(_, &(l, v))| (l >= k).then_some(v)).unwrap_or(0)
    };
    let scc_write = |pace: &Pace| {
        let mut i = 0;
        while pace.next(i) {
            let (f, l) = range(churn(i));
            scc_tree.remove_sync(&f);
            let _ = scc_tree.insert_sync(f, (l, i));
            i += 1;
        }
        2 * i
    };
    let skip_read =
        |k: u64| skip.range(..=k).next_back().and_then(|e| (e.value().0 >= k).then(|| e.value().1)).unwrap_or(0);
    let skip_write = |pace: &Pace| {
        let mut i = 0;
        while pace.next(i) {
            let (f, l) = range(churn(i));
            skip.remove(&f);
            skip.insert(f, (l, i));
            i += 1;
        }
        2 * i
    };
    let cases: [(&str, Read<'_>, Write<'_>); 5] = [
        ("ConcurrentMapleTree (epoch readers, locked writer)", &maple_read, &maple_write),
        ("control: ConcurrentMapleTree, writer on another tree", &maple_read, &other_write),
        ("RwLock<BTreeMap> (range idiom)", &rw_read, &rw_write),
        ("crossbeam SkipMap (range idiom)", &skip_read, &skip_write),
        ("scc TreeIndex (range idiom)", &scc_read, &scc_write),
    ];
    // The baselines must answer like the tree before their speed means anything.
    let agree = || {
        for k in (0..keys).step_by(997) {
            let want = maple_read(k);
            assert_eq!((rw_read(k), skip_read(k), scc_read(k)), (want, want, want), "baselines disagree at {k}");
        }
    };
    agree();
    // Churn every structure into its steady state first: a writer reshapes
    // a bulk-built structure (fuller nodes, denser memory), and readers
    // measured alone on the bulk-built one and busy on a reshaped one
    // would count that as interference.
    progress("concurrent: churning every structure to steady state");
    for w in [&maple_write as Write<'_>, &other_write, &rw_write, &skip_write, &scc_write] {
        w(&Pace { stop: AtomicBool::new(false), start: Instant::now(), period: None, limit: 2 * n });
    }
    agree();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let _ = writeln!(out, "\n## Concurrent readers\n");
    let _ = writeln!(
        out,
        "{n} ranges; each reader does {per_reader} random lookups (one pin or read lock per lookup; runs alone and with the writer alternate, {reps} of each, and the median is shown); the writer erases and re-inserts ranges as fast as it can until the readers finish (every structure was first churned by {} such pairs, so that \"alone\" and \"with writer\" measure the same steady state). Lookups per second per reader in millions, by wall time and by the reader's own CPU time; \"kept\" is with-writer over alone. The machine has {cpus} CPUs: with 2 readers plus a writer the threads also take turns on the cores, which the wall-time column shows and the CPU-time column does not.\n",
        2 * n,
        reps = opts.reps
    );
    let _ = writeln!(
        out,
        "| structure | readers | alone M/s | with writer M/s | kept (wall) | kept (CPU time) | writer M writes/s |"
    );
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (name, read, write) in cases {
        for readers in [1usize, 2] {
            progress(&format!("concurrent: {name}, {readers} reader(s)"));
            let (alone, busy) = alone_and_busy(opts.reps, readers, per_reader, keys, read, (write, None));
            let _ = writeln!(
                out,
                "| {name} | {readers} | {:.2} | {:.2} | {:.0} % | {:.0} % | {:.2} |",
                alone.wall / 1e6,
                busy.wall / 1e6,
                100.0 * busy.wall / alone.wall,
                100.0 * busy.cpu / alone.cpu,
                busy.writes / 1e6,
            );
        }
    }

    // How much readers keep as the writer gets busier (one reader).
    let rates = [10_000u32, 100_000, 1_000_000];
    let _ = writeln!(
        out,
        "\nOne reader against a writer paced to a fixed number of erase + insert pairs per second (kept, by wall time):\n"
    );
    let _ = write!(out, "| structure |");
    for r in rates {
        let _ = write!(out, " {} K pairs/s |", r / 1000);
    }
    let _ = writeln!(out, "\n| --- |{}", " ---: |".repeat(rates.len()));
    for (name, read, write) in cases {
        progress(&format!("concurrent: {name}, paced writer"));
        let _ = write!(out, "| {name} |");
        for r in rates {
            let period = Some(Duration::from_secs(1) / r);
            let (alone, busy) = alone_and_busy(opts.reps, 1, per_reader, keys, read, (write, period));
            let _ = write!(out, " {:.0} % |", 100.0 * busy.wall / alone.wall);
        }
        let _ = writeln!(out);
    }
    shared.validate().expect("valid after the race");
    drop(shared);

    progress("concurrent: single-thread lookup cost");
    // Identical, freshly built trees: the one above was reshaped by the churn.
    let lookups = 200_000u64;
    let mut rng = SmallRng::seed_from_u64(5);
    let ks: Vec<u64> = (0..lookups).map(|_| rng.gen_range(0..keys)).collect();
    // One set of nodes, alternately a `MapleTree` and (moved, not copied)
    // a `ConcurrentMapleTree`, so placement in memory cannot differ.
    let timed = |f: &dyn Fn() -> u64| {
        let start = Instant::now();
        black_box(f());
        start.elapsed() / lookups as u32
    };
    let (mut plain_t, mut guarded_t, mut pinned_t, mut pin_t) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut tree = maple(n, false);
    for _ in 0..opts.reps.max(1) {
        plain_t.push(timed(&|| ks.iter().map(|&k| tree.load(k).map_or(0, U63::get)).sum()));
        let c = ConcurrentMapleTree::from(tree);
        guarded_t.push(timed(&|| {
            let g = c.pin();
            ks.iter().map(|&k| c.load(k, &g).map_or(0, U63::get)).sum()
        }));
        pinned_t.push(timed(&|| ks.iter().map(|&k| c.load_with(k, |v| v.map_or(0, U63::get))).sum()));
        pin_t.push(timed(&|| {
            ks.iter()
                .map(|&k| {
                    drop(black_box(c.pin()));
                    k
                })
                .sum()
        }));
        tree = c.into_inner();
    }
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (d_plain, d_guarded, d_pinned, d_pin) = (median(plain_t), median(guarded_t), median(pinned_t), median(pin_t));
    let _ = writeln!(
        out,
        "\nSingle-thread lookup cost on the same nodes, alternating (ns): plain `MapleTree::load` {}, concurrent `load` under one guard {} (plain is {} of it), `load_with` pinning per lookup {} ({}); a pin and unpin alone (crossbeam-epoch) {}.",
        ns(d_plain),
        ns(d_guarded),
        ratio(d_plain, d_guarded),
        ns(d_pinned),
        ratio(d_plain, d_pinned),
        ns(d_pin)
    );
}

/// Runs everything and returns the Markdown report. `progress` is told
/// what is being measured.
pub fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# maple benchmark report\n");
    let _ = writeln!(
        out,
        "Produced by `maple report` (built-in data). Machine: {} logical CPUs. Absolute times are noise on a shared machine; compare the ratios.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let wanted = |s: Section| opts.sections.is_empty() || opts.sections.contains(&s);
    if wanted(Section::Compare) {
        comparison(opts, &mut out, progress);
    }
    if wanted(Section::Kernel) {
        kernel_loops(opts, &mut out, progress);
    }
    if wanted(Section::Fork) {
        fork(opts, &mut out, progress);
    }
    if wanted(Section::Concurrent) {
        concurrent(opts, &mut out, progress);
    }
    if wanted(Section::Mm) {
        crate::report_mm::fork_scaling(opts, &mut out, progress);
        crate::report_mm::named_fork(opts, &mut out, progress);
        crate::report_mm::ops_cost(opts, &mut out, progress);
        crate::report_mm::readers(opts, &mut out, progress);
        crate::report_mm::replay_speed(opts, &mut out, progress);
    }
    if wanted(Section::Swap) {
        crate::report_swap::swap(opts, &mut out, progress);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_report_has_every_table_row() {
        let opts = Options { sizes: vec![64], reps: 1, loop_scale: 0.0001, sections: Vec::new() };
        let report = run(&opts, &mut |_| {});
        for what in [
            "load (random)",
            "iterate",
            "store (ascending)",
            "store (random)",
            "erase (random)",
            "gap search",
            "slot store",
            "node store",
            "gap walk",
            "walk / load",
            "for-each",
            "bytes per range",
            "fork scaling",
            "names shared",
            "mprotect pair",
            "busy writer (seed `004",
            "lines per second",
            "Swap extents",
        ] {
            assert!(report.contains(what), "missing {what}:\n{report}");
        }
    }

    #[test]
    fn baselines_agree_with_the_tree() {
        let n = 300;
        let t = maple(n, true);
        let m = btree(n);
        let r = rmap(n);
        for k in 0..n * STEP + 20 {
            let want = t.load(k).map(U63::get);
            assert_eq!(btree_load(&m, k), want);
            assert_eq!(r.get(&k).copied(), want);
        }
        assert_eq!(t.empty_area(.., 7).ok(), btree_gap(&m, 7));
    }
}
