//! Lock-free readers of the concurrent tree against a busy writer, next to
//! `RwLock<BTreeMap>`, crossbeam's `SkipMap` and scc's `TreeIndex`.

use std::{
    hint::black_box,
    sync::RwLock,
    time::{Duration, Instant},
};

use crossbeam_skiplist::SkipMap;
use maple_tree::{ConcurrentMapleTree, U63};
use rand::{rngs::SmallRng, Rng, SeedableRng};

use super::div;
use crate::{
    measure::{alone_and_busy, Kept, Pace, Read, Write},
    model::{Cell, Goal, Plot, Section, Table, Unit},
    workloads::{btree, btree_load, maple, range, u, STEP},
    Mode, Options,
};

pub(super) fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> Section {
    let mut s = Section::new("concurrent", "Concurrent readers against a busy writer");
    let n = if opts.mode == Mode::Tiny { 1_000 } else { 100_000u64 };
    let keys = n * STEP;
    let per_reader = opts.loops(1_000_000.0, 1000);
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
    // Churn every structure into its steady state first: readers measured
    // alone on a bulk-built structure and busy on a reshaped one would
    // count the reshaping as interference.
    progress("concurrent: churning every structure to steady state");
    for w in [&maple_write as Write<'_>, &other_write, &rw_write, &skip_write, &scc_write] {
        w(&Pace::limited(2 * n));
    }
    agree();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    s.text(format!(
        "{n} ranges; each reader does {per_reader} random lookups (one pin or read lock per lookup; runs alone and with the writer alternate, {reps} of each, and the median is shown); the writer erases and re-inserts ranges as fast as it can until the readers finish (every structure was first churned by {} such pairs, so that \"alone\" and \"with writer\" measure the same steady state). Lookups per second per reader, by wall time and by the reader's own CPU time; \"kept\" is with-writer over alone. The machine has {cpus} CPUs: with 2 readers plus a writer on 2 CPUs the threads also take turns, which the wall-time column shows and the CPU-time column does not.",
        2 * n,
        reps = opts.reps
    ));
    let mut tab = Table::new(
        "concurrent",
        2,
        &["structure", "readers", "alone/s", "with writer/s", "kept (wall)", "kept (CPU time)", "writer writes/s"],
    );
    let mut maple_kept = None;
    for (name, read, write) in cases {
        for readers in [1usize, 2] {
            progress(&format!("concurrent: {name}, {readers} reader(s)"));
            let k = Kept::measure(opts.reps, readers, per_reader, keys, read, write);
            if readers == 1 && maple_kept.is_none() {
                maple_kept = Some(k.wall());
            }
            tab.row(vec![
                Cell::text(name),
                Cell::num(readers as f64, Unit::Count),
                Cell::num(k.alone.wall, Unit::Rate),
                Cell::num(k.busy.wall, Unit::Rate),
                Cell::num(k.wall(), Unit::Percent),
                Cell::num(k.cpu(), Unit::Percent),
                Cell::num(k.busy.writes, Unit::Rate),
            ]);
        }
    }
    s.table(tab);

    // How much readers keep as the writer gets busier (one reader).
    let rates: &[u32] = if opts.mode == Mode::Tiny { &[100_000] } else { &[10_000, 100_000, 1_000_000] };
    let mut cols = vec!["structure".to_string()];
    cols.extend(rates.iter().map(|r| format!("kept at {} K pairs/s", r / 1000)));
    let col_refs: Vec<&str> = cols.iter().map(String::as_str).collect();
    let mut paced = Table::new("concurrent-paced", 1, &col_refs).caption(
        "One reader against a writer paced to a fixed number of erase + insert pairs per second (kept, by wall time):",
    );
    let mut plot = Plot::new(
        "concurrent-paced",
        "one reader's rate kept against a paced writer",
        "writer pairs per second",
        "kept %",
    )
    .log(true, false);
    for (name, read, write) in cases {
        progress(&format!("concurrent: {name}, paced writer"));
        let mut row = vec![Cell::text(name)];
        let mut pts = Vec::new();
        for &r in rates {
            let period = Some(Duration::from_secs(1) / r);
            let (alone, busy) = alone_and_busy(opts.reps, 1, per_reader, keys, read, (write, period));
            let kept = div(busy.wall, alone.wall) * 100.0;
            row.push(Cell::num(kept, Unit::Percent));
            pts.push((f64::from(r), kept));
        }
        paced.row(row);
        plot.series(name, pts);
    }
    s.table(paced);
    s.plot(plot);
    shared.validate().expect("valid after the race");
    drop(shared);

    progress("concurrent: single-thread lookup cost");
    let lookups = opts.loops(200_000.0, 1000);
    let mut rng = SmallRng::seed_from_u64(5);
    let ks: Vec<u64> = (0..lookups).map(|_| rng.gen_range(0..keys)).collect();
    // One set of nodes, alternately a `MapleTree` and (moved, not copied)
    // a `ConcurrentMapleTree`, so placement in memory cannot differ.
    let timed = |f: &dyn Fn() -> u64| {
        let start = Instant::now();
        black_box(f());
        start.elapsed().as_secs_f64() * 1e9 / lookups as f64
    };
    let mut times: [Vec<f64>; 4] = Default::default();
    let mut tree = maple(n, false);
    for _ in 0..opts.reps.max(1) {
        times[0].push(timed(&|| ks.iter().map(|&k| tree.load(k).map_or(0, U63::get)).sum()));
        let c = ConcurrentMapleTree::from(tree);
        times[1].push(timed(&|| {
            let g = c.pin();
            ks.iter().map(|&k| c.load(k, &g).map_or(0, U63::get)).sum()
        }));
        times[2].push(timed(&|| ks.iter().map(|&k| c.load_with(k, |v| v.map_or(0, U63::get))).sum()));
        times[3].push(timed(&|| {
            ks.iter()
                .map(|&k| {
                    drop(black_box(c.pin()));
                    k
                })
                .sum()
        }));
        tree = c.into_inner();
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let [a, b, c, d] = &mut times;
    let (plain, guarded, pinned, pin) = (med(a), med(b), med(c), med(d));
    let mut single = Table::new("concurrent-single", 1, &["lookup", "ns", "plain / this"])
        .caption("Single-thread lookup cost on the same nodes, alternating:");
    for (what, v) in [
        ("plain `MapleTree::load`", plain),
        ("concurrent `load` under one guard", guarded),
        ("`load_with`, pinning per lookup", pinned),
        ("a pin and unpin alone (crossbeam-epoch)", pin),
    ] {
        single.row(vec![Cell::text(what), Cell::num(v, Unit::Ns), Cell::num(div(plain, v), Unit::Times)]);
    }
    s.table(single);
    let kept = maple_kept.unwrap_or(0.0);
    s.goal(Goal::new(
        "concurrent readers keep ≥ 80 % of their throughput with a busy writer (one reader)",
        format!("{kept:.0} %"),
        (opts.mode != Mode::Tiny).then_some(kept >= 80.0),
    ));
    s.goal(Goal::new(
        "a lookup under a held guard within 10 % of the plain tree's",
        format!("plain is {:.2}× of guarded", div(plain, guarded)),
        (opts.mode != Mode::Tiny).then_some(guarded <= plain * 1.1),
    ));
    s
}
