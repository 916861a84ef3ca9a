//! The design the maple tree replaced: the same address-space calls on
//! the old design's store (a red-black tree with subtree gaps, the VMA
//! list and the four-entry lookup cache, `AddressSpace::old_design`) and
//! on the maple tree, with the maple tree series' own micro-benchmarks
//! (will-it-scale's brk1, malloc1 and page_fault3), fork, the gap search
//! and memory per VMA.

use std::{
    hint::black_box,
    sync::{Barrier, RwLock},
    time::{Duration, Instant},
};

use maple_mm::{
    rbtree::RbTree, Access, AddressSpace, Layout, MapFlags, MappedFile, Prot, SharedAddressSpace, VmaRef, VmaStore,
    PAGE_SIZE,
};

use super::div;
use crate::{
    measure::{alternate, case, timed, Timing},
    model::{Cell, Plot, Section, Table, Unit},
    workloads::{holey_space, recorded_space, BASE},
    Mode, Options,
};

type Old = AddressSpace<RbTree<VmaRef>>;

/// will-it-scale's 128 MiB (malloc1, page_fault3).
const BIG: u64 = 128 << 20;

/// One workload on both stores: its name, what the series reported, and
/// the two timings with the old design's cache hit rate during it.
struct Row {
    name: String,
    series: &'static str,
    old: Timing,
    new: Timing,
    hits: Option<f64>,
}

/// Times `work` on the old and the new space, alternating rounds; the
/// old design's cache hit rate over the old runs.
fn both(
    opts: &Options,
    ops: u64,
    old: &mut Old,
    new: &mut AddressSpace,
    mut work_old: impl FnMut(&mut Old, u64) -> u64,
    mut work_new: impl FnMut(&mut AddressSpace, u64) -> u64,
) -> (Timing, Timing, Option<f64>) {
    let before = old.cache_stats();
    let t = alternate(
        opts.reps,
        vec![
            case(ops, || (), |()| (0..ops).fold(0u64, |x, i| x.wrapping_add(work_old(old, i)))),
            case(ops, || (), |()| (0..ops).fold(0u64, |x, i| x.wrapping_add(work_new(new, i)))),
        ],
    );
    let after = old.cache_stats();
    let (h, m) = ((after.hits - before.hits) as f64, (after.misses - before.misses) as f64);
    let rate = (h + m > 0.0).then(|| h / (h + m) * 100.0);
    (t[0], t[1], rate)
}

/// brk1: the heap grown by a page and shrunk back.
fn brk1<T: VmaStore>(mm: &mut AddressSpace<T>, top: u64) -> u64 {
    mm.brk(top + PAGE_SIZE);
    mm.brk(top)
}

/// malloc1: 128 MiB of anonymous memory mapped and unmapped.
fn malloc1<T: VmaStore>(mm: &mut AddressSpace<T>) -> u64 {
    let a = mm.mmap(0, BIG, Prot::RW, MapFlags::PRIVATE | MapFlags::ANONYMOUS, None, 0).expect("map");
    mm.munmap(a, BIG).expect("unmap");
    a
}

/// page_fault3: one write fault in the shared file mapping at `at`, page
/// `i` of it (the VMA-side work: `find_vma` and the access check).
fn fault<T: VmaStore>(mm: &mut AddressSpace<T>, at: u64, i: u64) -> u64 {
    let a = at + (i % (BIG / PAGE_SIZE)) * PAGE_SIZE;
    mm.fault(a, Access::Write).map_or(0, |()| a)
}

/// A space with `n` two-page VMAs and one-page holes packed right below
/// the top-down placement's base, so that a placement of two pages must
/// search past all of them.
fn fragmented_top(n: u64) -> AddressSpace {
    let layout = Layout { max_map_count: n as usize + 1000, ..Layout::default() };
    let top = layout.mmap_base;
    let mut mm = AddressSpace::with_layout(layout);
    let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    for i in 0..n {
        let a = top - (i + 1) * 3 * PAGE_SIZE;
        mm.mmap(a, 2 * PAGE_SIZE, Prot::RW, f, None, 0).expect("map");
        mm.touch(a, PAGE_SIZE).expect("write");
    }
    mm
}

/// Two threads each doing `ops / 2` of `work(thread, i)` at once, after a
/// barrier: the wall time of the two.
fn two_threads(ops: u64, work: &(dyn Fn(u64, u64) -> u64 + Sync)) -> Duration {
    let barrier = Barrier::new(2);
    std::thread::scope(|sc| {
        let handles: Vec<_> = (0..2u64)
            .map(|t| {
                let barrier = &barrier;
                sc.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    let x = (0..ops / 2).fold(0u64, |x, i| x.wrapping_add(work(t, i)));
                    black_box(x);
                    start.elapsed()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).max().unwrap_or_default()
    })
}

/// The two-thread rows: the old design and the maple tree behind an
/// `RwLock` (the `mmap_lock`), and the maple tree's lock-free readers.
fn threaded(opts: &Options, space: &AddressSpace, s: &mut Section, progress: &mut dyn FnMut(&str)) {
    progress("old design: two threads");
    let mut new = space.clone();
    let mut old = AddressSpace::old_design_from(space);
    let file = std::sync::Arc::new(MappedFile::new(8, 1, 4243, "/data/page_fault3").with_size(BIG));
    let at_old = old.mmap(0, BIG, Prot::RW, MapFlags::SHARED, Some(file.clone()), 0).expect("map");
    let at_new = new.mmap(0, BIG, Prot::RW, MapFlags::SHARED, Some(file), 0).expect("map");
    let shared = SharedAddressSpace::from(new.clone());
    let (old, new) = (RwLock::new(old), RwLock::new(new));
    let page = |t: u64, i: u64| (t * (BIG / PAGE_SIZE / 2) + i % (BIG / PAGE_SIZE / 2)) * PAGE_SIZE;
    let ok = |r: Result<(), maple_mm::Fault>| u64::from(r.is_ok());
    let loops = opts.loops(400_000.0, 200);
    let faults = alternate(
        opts.reps,
        vec![
            timed(loops, || {
                two_threads(loops, &|t, i| {
                    ok(old.read().expect("lock").check_access(at_old + page(t, i), Access::Write))
                })
            }),
            timed(loops, || {
                two_threads(loops, &|t, i| {
                    ok(new.read().expect("lock").check_access(at_new + page(t, i), Access::Write))
                })
            }),
            timed(loops, || {
                two_threads(loops, &|t, i| {
                    let g = shared.pin();
                    ok(shared.check_access(at_new + page(t, i), Access::Write, &g))
                })
            }),
        ],
    );
    let big = opts.loops(20_000.0, 50);
    let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    let mallocs = alternate(
        opts.reps,
        vec![
            timed(big, || {
                two_threads(big, &|_, _| {
                    let a = old.write().expect("lock").mmap(0, BIG, Prot::RW, anon, None, 0).expect("map");
                    old.write().expect("lock").munmap(a, BIG).expect("unmap");
                    a
                })
            }),
            timed(big, || {
                two_threads(big, &|_, _| {
                    let a = new.write().expect("lock").mmap(0, BIG, Prot::RW, anon, None, 0).expect("map");
                    new.write().expect("lock").munmap(a, BIG).expect("unmap");
                    a
                })
            }),
            timed(big, || {
                two_threads(big, &|_, _| {
                    let a = shared.write().mmap(0, BIG, Prot::RW, anon, None, 0).expect("map");
                    shared.write().munmap(a, BIG).expect("unmap");
                    a
                })
            }),
        ],
    );
    let mut tab = Table::new(
        "old-design-threads",
        1,
        &[
            "workload, 2 threads",
            "old design, `RwLock` ns",
            "maple tree, `RwLock` ns",
            "maple / old",
            "maple tree, lock-free readers ns",
            "lock-free / old",
        ],
    );
    for (name, t) in [
        ("page_fault3: access checks (read lock), each thread its half", &faults),
        ("malloc1: mmap + munmap 128 MiB (write lock per call)", &mallocs),
    ] {
        tab.row(vec![
            Cell::text(name),
            Cell::num(t[0].ns(), Unit::Ns),
            Cell::num(t[1].ns(), Unit::Ns),
            Cell::num(div(t[1].ns(), t[0].ns()), Unit::Times),
            Cell::num(t[2].ns(), Unit::Ns),
            Cell::num(div(t[2].ns(), t[0].ns()), Unit::Times),
        ]);
    }
    s.text("Two threads sharing the space, each running the workload at once (ns per operation of the two together, from the wall time): the old design and the maple tree behind an `RwLock`, as `mmap_lock` was in the series, and the maple tree's `SharedAddressSpace`, whose lookups take no lock (its writers still take one: `malloc1` serialises either way). The old design's lookup cache is per thread, as Linux's was.");
    s.table(tab);
}

pub(super) fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> Section {
    let mut s = Section::new(
        "old-design",
        "The old design (rbtree + VMA list + vmacache) against the maple tree, under the same calls",
    );
    let (proc_name, space) = recorded_space();
    let vmas = space.vma_count();
    s.text(format!(
        "Linux 6.1 replaced three structures that tracked a process's VMAs with the maple tree: a red-black tree whose nodes kept the largest gap in their subtree (for `get_unmapped_area`), the doubly linked VMA list, and a per-thread cache of four VMAs indexed by page number and emptied by a sequence number on every change. `AddressSpace::old_design` runs every call of this crate on those structures (`maple_mm::rbtree`), with the same rules (a test runs random call sequences on both and compares them after every call), so the rows compare structures only. The space is the {proc_name} process of the recorded logs at its exit ({vmas} VMAs). Single thread; only the VMA-side work is modelled (no page tables, page allocation or TLB flushes, which dominate the kernel's figures: the series' changes are of whole system calls, for orientation only). Median of {} alternating rounds.",
        opts.reps
    ));
    let mut old = AddressSpace::old_design_from(&space);
    let mut new = space.clone();
    let mut rows = Vec::new();
    let loops = opts.loops(100_000.0, 200);

    progress("old design: brk1");
    if new.brk_state().is_none() {
        let base = 0x6000_0000_0000;
        new.set_brk_base(base).expect("brk base");
        old.set_brk_base(base).expect("brk base");
    }
    let top = new.brk_state().map_or(0, |b| b.current);
    let (o, n, hits) = both(opts, loops, &mut old, &mut new, |m, _| brk1(m, top), |m, _| brk1(m, top));
    rows.push(Row {
        name: "brk1: heap +1 page, −1 page".into(),
        series: "−38 % to −43 % (processes)",
        old: o,
        new: n,
        hits,
    });

    progress("old design: malloc1");
    let big_loops = opts.loops(20_000.0, 50);
    let (o, n, hits) = both(opts, big_loops, &mut old, &mut new, |m, _| malloc1(m), |m, _| malloc1(m));
    rows.push(Row {
        name: "malloc1: mmap + munmap 128 MiB".into(),
        series: "−5 % to −49 % (threads), −25 % to +5 % (processes)",
        old: o,
        new: n,
        hits,
    });

    progress("old design: page_fault3");
    let file = std::sync::Arc::new(MappedFile::new(8, 1, 4242, "/data/page_fault3").with_size(BIG));
    let shared = MapFlags::SHARED;
    let at_old = old.mmap(0, BIG, Prot::RW, shared, Some(file.clone()), 0).expect("map");
    let at_new = new.mmap(0, BIG, Prot::RW, shared, Some(file.clone()), 0).expect("map");
    let (o, n, hits) =
        both(opts, loops * 4, &mut old, &mut new, |m, i| fault(m, at_old, i), |m, i| fault(m, at_new, i));
    rows.push(Row {
        name: "page_fault3: write faults, page by page, 128 MiB shared file".into(),
        series: "−14 % to +11 % (threads)",
        old: o,
        new: n,
        hits,
    });
    old.munmap(at_old, BIG).expect("unmap");
    new.munmap(at_new, BIG).expect("unmap");

    progress("old design: find_vma");
    let starts: Vec<u64> = new.iter().map(|v| v.start() + ((v.len() / 2) & !(PAGE_SIZE - 1))).collect();
    let pick = |i: u64| starts[(i.wrapping_mul(2_654_435_761) % starts.len() as u64) as usize];
    let (o, n, hits) = both(
        opts,
        loops * 4,
        &mut old,
        &mut new,
        |m, i| m.find_vma(black_box(pick(i))).map_or(0, |v| v.start()),
        |m, i| m.find_vma(black_box(pick(i))).map_or(0, |v| v.start()),
    );
    rows.push(Row { name: "`find_vma` at random VMAs".into(), series: "", old: o, new: n, hits });

    progress("old design: fork");
    let forks = opts.loops(2_000.0, 20);
    let (o, n, hits) = both(
        opts,
        forks,
        &mut old,
        &mut new,
        |m, _| m.fork().expect("fork").vma_count() as u64,
        |m, _| m.fork().expect("fork").vma_count() as u64,
    );
    rows.push(Row { name: format!("fork ({vmas} VMAs), child dropped"), series: "", old: o, new: n, hits });

    progress("old design: get_unmapped_area");
    let frag = if opts.mode == Mode::Tiny { 1_000 } else { 10_000 };
    let mut frag_new = fragmented_top(frag);
    let mut frag_old = AddressSpace::old_design_from(&frag_new);
    let (o, n, hits) = both(
        opts,
        loops,
        &mut frag_old,
        &mut frag_new,
        |m, _| m.get_unmapped_area(0, 2 * PAGE_SIZE).expect("room"),
        |m, _| m.get_unmapped_area(0, 2 * PAGE_SIZE).expect("room"),
    );
    rows.push(Row {
        name: format!("`get_unmapped_area` of 2 pages past {frag} one-page holes"),
        series: "",
        old: o,
        new: n,
        hits,
    });

    let mut tab = Table::new(
        "old-design",
        1,
        &["workload", "old design ns", "maple tree ns", "maple / old", "old design cache hits", "the series' change"],
    );
    for r in &rows {
        tab.row(vec![
            Cell::text(&r.name),
            Cell::num(r.old.ns(), Unit::Ns),
            Cell::num(r.new.ns(), Unit::Ns),
            Cell::num(div(r.new.ns(), r.old.ns()), Unit::Times),
            r.hits.map_or(Cell::text("no lookups"), |h| Cell::num(h, Unit::Percent)),
            Cell::text(r.series),
        ]);
    }
    s.table(tab);
    threaded(opts, &space, &mut s, progress);

    // Memory: the structure alone, per VMA (each design also has the
    // 64-byte VMA record).
    let mut mem = Table::new("old-design-memory", 0, &["VMAs", "old design bytes per VMA", "maple tree bytes per VMA"]);
    let sizes: &[u64] = if opts.mode == Mode::Tiny { &[100, 1_000] } else { &[100, 1_000, 10_000, 100_000] };
    let (mut find_old, mut find_new) = (Vec::new(), Vec::new());
    for &count in sizes {
        progress(&format!("old design: {count} VMAs"));
        let mut new = holey_space(count);
        let mut old = AddressSpace::old_design_from(&new);
        mem.row(vec![
            Cell::num(count as f64, Unit::Count),
            Cell::num(old.store_memory() as f64 / count as f64, Unit::Bytes),
            Cell::num(new.tree_stats().bytes as f64 / count as f64, Unit::Bytes),
        ]);
        let addr = |k: u64| BASE + (k.wrapping_mul(2_654_435_761) % (count * 3)) * PAGE_SIZE;
        let (o, n, _) = both(
            opts,
            loops * 4,
            &mut old,
            &mut new,
            |m, k| m.find_vma(black_box(addr(k))).map_or(0, |v| v.start()),
            |m, k| m.find_vma(black_box(addr(k))).map_or(0, |v| v.start()),
        );
        find_old.push((count as f64, o.ns()));
        find_new.push((count as f64, n.ns()));
    }
    s.table(mem);
    let mut p = Plot::new("old-design", "find_vma at random addresses", "VMAs", "ns per lookup").log(true, false);
    p.series("old design (rbtree + cache)", find_old);
    p.series("maple tree", find_new);
    s.plot(p);
    s
}
