//! The address-space sections of `maple report`: fork scaling (seed 000),
//! fork of named mappings (seed 003), and single-thread mmap / munmap /
//! mprotect cost as the number of VMAs grows.

use std::{fmt::Write as _, hint::black_box, sync::RwLock, time::Duration};

use maple_mm::{AddressSpace, Layout, MapFlags, Prot, SharedAddressSpace, VmaStore, PAGE_SIZE};

use crate::report::{alone_and_busy, ns, per_op, Options, Pace};

const BASE: u64 = 0x1000_0000;

/// An address space of `n` one-page anonymous VMAs, alternately read-only
/// and read-write so that none merge, written (`written`) or never touched,
/// optionally each with its own 79-character name.
fn space(n: u64, named: bool, written: bool) -> AddressSpace {
    let layout = Layout { max_map_count: n as usize + 1000, ..Layout::default() };
    let mut mm = AddressSpace::with_layout(layout);
    let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    for i in 0..n {
        let a = BASE + i * PAGE_SIZE;
        mm.mmap(a, PAGE_SIZE, Prot::RW, f, None, 0).expect("map");
        if written {
            mm.touch(a, PAGE_SIZE).expect("touch");
        }
        if i % 2 == 1 {
            mm.mprotect(a, PAGE_SIZE, Prot::READ).expect("protect");
        }
        if named {
            let name = format!("{i:0>79}");
            mm.set_anon_name(a, PAGE_SIZE, Some(&name)).expect("name");
        }
    }
    assert_eq!(mm.vma_count() as u64, n);
    mm
}

/// The seed's VMA counts (`000_*`).
const FORK_SIZES: [u64; 11] = [21, 121, 221, 421, 821, 1621, 3221, 6421, 12821, 25621, 51221];
/// The seed's gain of `__mt_dup` fork over the old fork, in per cent.
const SEED_GAIN: [&str; 11] = ["+2%", "+9%", "+11%", "+13%", "+17%", "+23%", "+30%", "+37%", "+44%", "+49%", "+52%"];

/// Fork scaling: forks per second with fork by duplication and by insertion.
pub fn fork_scaling(opts: &Options, out: &mut String, progress: &mut dyn FnMut(&str)) {
    let _ = writeln!(out, "\n## Address space: fork scaling (seed `000_*`)\n");
    let _ = writeln!(
        out,
        "Forking an address space of N written, non-mergeable anonymous VMAs (written, so every VMA needs a record of its own in the child): `AddressSpace::fork` (tree duplicated node by node, then each entry replaced by a copy of its VMA) against `fork_by_insertion` (every VMA copied and inserted into a new tree, the path before `__mt_dup`). Each fork includes dropping the child. The seed's forks also copied page tables; ours copy only the address space, so our gain should be larger.\n"
    );
    let _ = writeln!(
        out,
        "The last two columns separate the tree from the VMA copies: the tree alone duplicated (`MapleTree::try_dup`, each value a reference-count increment) against the same entries inserted one by one.\n"
    );
    let _ = writeln!(out, "| VMAs | dup fork/s | insertion fork/s | gain | seed's gain | ns per VMA (dup) | tree only: dup ns/VMA | tree only: insert ns/VMA |");
    let _ = writeln!(out, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (i, &n) in FORK_SIZES.iter().enumerate() {
        if opts.loop_scale < 0.01 && n > 1621 {
            continue;
        }
        progress(&format!("address space: fork of {n} VMAs"));
        let mm = space(n, false, true);
        let loops = ((2_000_000 / n).clamp(4, 20_000) as f64 * opts.loop_scale.max(0.001)).max(2.0) as u64;
        let dup = per_op(
            opts.reps,
            loops,
            || (),
            |()| (0..loops).map(|_| mm.fork().expect("fork").vma_count()).sum::<usize>(),
        );
        let ins = per_op(
            opts.reps,
            loops,
            || (),
            |()| (0..loops).map(|_| mm.fork_by_insertion().expect("fork").vma_count()).sum::<usize>(),
        );
        let tree = mm.vma_tree();
        let tdup =
            per_op(opts.reps, loops, || (), |()| (0..loops).map(|_| tree.try_dup().expect("dup").len()).sum::<usize>());
        let tins = per_op(
            opts.reps,
            loops,
            || (),
            |()| {
                (0..loops)
                    .map(|_| {
                        let mut c = maple_tree::MapleTree::with_gaps();
                        for (r, v) in tree.range_cloned(..) {
                            c.insert_range(r, v).expect("insert");
                        }
                        c.len()
                    })
                    .sum::<usize>()
            },
        );
        let per_sec = |d: Duration| 1.0 / d.as_secs_f64().max(1e-12);
        let gain = (ins.as_secs_f64() / dup.as_secs_f64().max(1e-12) - 1.0) * 100.0;
        let _ = writeln!(
            out,
            "| {n} | {:.0} | {:.0} | {:+.0}% ({:.2}×) | {} | {} | {} | {} |",
            per_sec(dup),
            per_sec(ins),
            gain,
            ins.as_secs_f64() / dup.as_secs_f64().max(1e-12),
            SEED_GAIN[i],
            ns(dup / n as u32),
            ns(tdup / n as u32),
            ns(tins / n as u32)
        );
    }
}

/// Fork of 64 K named VMAs: unnamed, shared names, copied names (seed `003_*`).
pub fn named_fork(opts: &Options, out: &mut String, progress: &mut dyn FnMut(&str)) {
    let n: u64 = if opts.loop_scale < 0.01 { 1024 } else { 65_536 };
    progress(&format!("address space: fork of {n} named VMAs"));
    // Unpopulated, as in the seed: the copies of never-written VMAs share
    // their records, so a fork touches no name at all.
    let plain = space(n, false, false);
    let named = space(n, true, false);
    let loops = if opts.loop_scale < 0.01 { 2 } else { 20 };
    let unnamed = per_op(
        opts.reps,
        loops,
        || (),
        |()| (0..loops).map(|_| plain.fork().expect("fork").vma_count()).sum::<usize>(),
    );
    let shared = per_op(
        opts.reps,
        loops,
        || (),
        |()| (0..loops).map(|_| named.fork().expect("fork").vma_count()).sum::<usize>(),
    );
    let copied = per_op(
        opts.reps,
        loops,
        || (),
        |()| (0..loops).map(|_| named.fork_copying_names().expect("fork").vma_count()).sum::<usize>(),
    );
    let _ = writeln!(out, "\n## Address space: fork of named mappings (seed `003_*`)\n");
    let _ = writeln!(
        out,
        "{n} unpopulated anonymous VMAs (as in the seed), unnamed or each with its own 79-character name (the longest allowed). Names shared (what we do, and Linux since the seed) against names copied on fork (Linux before: a 40 % regression on the seed's device).\n"
    );
    let _ = writeln!(out, "| fork of | ms per fork | vs unnamed |");
    let _ = writeln!(out, "| --- | ---: | ---: |");
    for (what, d) in [("unnamed VMAs", unnamed), ("named, names shared", shared), ("named, names copied", copied)] {
        let _ = writeln!(
            out,
            "| {what} | {:.2} | {:+.0}% |",
            d.as_secs_f64() * 1e3,
            (d.as_secs_f64() / unnamed.as_secs_f64().max(1e-12) - 1.0) * 100.0
        );
    }
}

/// mmap / munmap / mprotect cost as the address space grows, and memory.
pub fn ops_cost(opts: &Options, out: &mut String, progress: &mut dyn FnMut(&str)) {
    let _ = writeln!(out, "\n## Address space: call cost against the number of VMAs\n");
    let _ = writeln!(
        out,
        "Single thread. mmap+munmap: a fixed one-page mapping made and removed in a hole in the middle of the space; mprotect pair: one page inside a VMA protected (a split in three) and restored (a merge back). Flat is the goal. Memory: tree nodes per VMA (counted as 256 bytes each) and the shared VMA record.\n"
    );
    let _ =
        writeln!(out, "| VMAs | mmap+munmap ns | mprotect pair ns | find_vma ns | tree bytes per VMA | tree height |");
    let _ = writeln!(out, "| ---: | ---: | ---: | ---: | ---: | ---: |");
    for n in [100u64, 10_000, 100_000] {
        if opts.loop_scale < 0.01 && n > 10_000 {
            continue;
        }
        progress(&format!("address space: calls at {n} VMAs"));
        // VMAs of two pages with a one-page hole after each.
        let layout = Layout { max_map_count: n as usize + 1000, ..Layout::default() };
        let mut mm = AddressSpace::with_layout(layout);
        let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
        for i in 0..n {
            mm.mmap(BASE + i * 3 * PAGE_SIZE, 2 * PAGE_SIZE, Prot::RW, f, None, 0).expect("map");
        }
        let loops = ((200_000.0 * opts.loop_scale) as u64).max(10);
        let mid = n / 2;
        let hole = BASE + mid * 3 * PAGE_SIZE + 2 * PAGE_SIZE;
        let mapping = per_op(
            opts.reps,
            loops,
            || (),
            |()| {
                for _ in 0..loops {
                    // An anonymous page in the hole merges with the VMA before
                    // it; munmap cuts it off again.
                    mm.mmap(hole, PAGE_SIZE, Prot::READ, f, None, 0).expect("map");
                    mm.munmap(hole, PAGE_SIZE).expect("unmap");
                }
            },
        );
        let page = BASE + mid * 3 * PAGE_SIZE;
        let protect = per_op(
            opts.reps,
            loops,
            || (),
            |()| {
                for _ in 0..loops {
                    mm.mprotect(page, PAGE_SIZE, Prot::READ).expect("protect");
                    mm.mprotect(page, PAGE_SIZE, Prot::RW).expect("protect");
                }
            },
        );
        let lookups = loops * 10;
        let find = per_op(
            opts.reps,
            lookups,
            || (),
            |()| {
                let mut x = 0u64;
                for k in 0..lookups {
                    let a = BASE + (k.wrapping_mul(2654435761) % (n * 3)) * PAGE_SIZE;
                    x += mm.find_vma(black_box(a)).map_or(0, |v| v.start());
                }
                x
            },
        );
        let s = mm.tree_stats();
        let _ = writeln!(
            out,
            "| {n} | {} | {} | {} | {:.1} | {} |",
            ns(mapping),
            ns(protect),
            ns(find),
            s.bytes as f64 / n as f64,
            s.height
        );
    }
}

/// One write of the busy writer: protect a page inside VMA `j` (a split in
/// three) and restore it (a merge back), or map and unmap a page in the
/// hole after it. Two calls either way.
fn churn<T: VmaStore>(mm: &mut AddressSpace<T>, i: u64, n: u64) {
    let j = (i.wrapping_mul(7919)) % n;
    let vma = BASE + j * 3 * PAGE_SIZE;
    if i % 2 == 0 {
        mm.mprotect(vma, PAGE_SIZE, Prot::READ).expect("protect");
        mm.mprotect(vma, PAGE_SIZE, Prot::RW).expect("protect");
    } else {
        let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
        mm.mmap(vma + 2 * PAGE_SIZE, PAGE_SIZE, Prot::READ, f, None, 0).expect("map");
        mm.munmap(vma + 2 * PAGE_SIZE, PAGE_SIZE).expect("unmap");
    }
}

/// Lookups under a busy writer (seed `004_*`): `find_vma` from reader
/// threads while one thread maps, unmaps and protects, on the shared
/// address space (lock-free readers) and on the same address space behind
/// an `RwLock` (the `mmap_lock` design).
pub fn readers(opts: &Options, out: &mut String, progress: &mut dyn FnMut(&str)) {
    let n = 10_000u64;
    progress("address space: lookups under a busy writer");
    let layout = Layout { max_map_count: n as usize + 1000, ..Layout::default() };
    let mut plain = AddressSpace::with_layout(layout);
    let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    for i in 0..n {
        plain.mmap(BASE + i * 3 * PAGE_SIZE, 2 * PAGE_SIZE, Prot::RW, f, None, 0).expect("map");
    }
    let locked = RwLock::new(plain.clone());
    let shared = SharedAddressSpace::from(plain);
    // Mapped addresses only: page 0 or 1 of VMA k.
    let addr = |k: u64| BASE + (k / 2) * 3 * PAGE_SIZE + (k % 2) * PAGE_SIZE;
    let keys = 2 * n;
    let per_reader = ((400_000.0 * opts.loop_scale) as u64).max(1000);
    let shared_read = |k: u64| {
        let g = shared.pin();
        shared.find_vma(addr(k), &g).map_or(0, |v| v.start())
    };
    let locked_read = |k: u64| locked.read().expect("lock").find_vma(addr(k)).map_or(0, |v| v.start());
    let shared_write = |p: &Pace| {
        let mut i = 0;
        while p.next(i) {
            churn(&mut *shared.write(), i, n);
            i += 1;
        }
        i
    };
    let locked_write = |p: &Pace| {
        let mut i = 0;
        while p.next(i) {
            churn(&mut *locked.write().expect("lock"), i, n);
            i += 1;
        }
        i
    };
    let _ = writeln!(out, "\n## Address space: lookups under a busy writer (seed `004_*`)\n");
    let _ = writeln!(
        out,
        "{n} VMAs; readers call `find_vma` at random mapped addresses ({per_reader} each, a pin or a read lock per lookup), alone and while one writer protects/restores a page or maps/unmaps one in a hole, flat out. Lock-free: `SharedAddressSpace`; locked: the same `AddressSpace` behind an `RwLock` (the `mmap_lock` design). Median of {} alternating runs. With two readers and the writer, three threads share two cores.\n",
        opts.reps
    );
    let _ = writeln!(out, "| design | readers | lookups/s alone | lookups/s with writer | kept | writer calls/s |");
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: |");
    for readers in [1usize, 2] {
        for (name, read, write) in [
            (
                "lock-free (`SharedAddressSpace`)",
                &shared_read as crate::report::Read<'_>,
                &shared_write as crate::report::Write<'_>,
            ),
            ("`RwLock<AddressSpace>`", &locked_read, &locked_write),
        ] {
            let (alone, busy) = alone_and_busy(opts.reps, readers, per_reader, keys, read, (write, None));
            let _ = writeln!(
                out,
                "| {name} | {readers} | {:.2} M | {:.2} M | {:.0} % | {:.0} K |",
                alone.wall / 1e6,
                busy.wall / 1e6,
                busy.wall / alone.wall * 100.0,
                busy.writes * 2.0 / 1e3
            );
        }
    }
}

/// The recorded strace logs (`maple-mm/tests/data/recorded`), compressed.
const LOGS: [(&str, &[u8]); 6] = [
    ("churn", include_bytes!("../../maple-mm/tests/data/recorded/churn.strace.xz")),
    ("python", include_bytes!("../../maple-mm/tests/data/recorded/python.strace.xz")),
    ("gcc", include_bytes!("../../maple-mm/tests/data/recorded/gcc.strace.xz")),
    ("sqlite", include_bytes!("../../maple-mm/tests/data/recorded/sqlite.strace.xz")),
    ("node", include_bytes!("../../maple-mm/tests/data/recorded/node.strace.xz")),
    ("java", include_bytes!("../../maple-mm/tests/data/recorded/java.strace.xz")),
];

/// Replay speed: strace lines per second on the recorded logs, parsing
/// and applying (the logs are decompressed first, not timed).
pub fn replay_speed(opts: &Options, out: &mut String, progress: &mut dyn FnMut(&str)) {
    progress("replay speed");
    let _ = writeln!(out, "\n## `maple replay`: lines per second\n");
    let _ = writeln!(
        out,
        "Each recorded log (`crates/maple-mm/tests/data/recorded`) parsed and applied from its first line, every process's address space rebuilt; decompression not timed. Goal: ≥ 1 M lines per second.\n"
    );
    let _ = writeln!(out, "| log | lines | memory calls applied | M lines/s | µs per applied call |");
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: |");
    let (mut all_lines, mut all_time) = (0u64, 0f64);
    for (name, xz) in LOGS {
        let mut text = Vec::new();
        lzma_rs::xz_decompress(&mut &xz[..], &mut text).expect("recorded log");
        let text = String::from_utf8(text).expect("utf-8 log");
        let lines = text.lines().count() as u64;
        let loops = ((200_000 / lines.max(1)) as f64 * opts.loop_scale.max(0.05)).max(1.0) as u64;
        let mut applied = 0;
        let d = per_op(
            opts.reps,
            loops * lines,
            || (),
            |()| {
                for _ in 0..loops {
                    let r = maple_mm::strace::replay(text.lines(), maple_mm::strace::ReplayOptions::default(), None)
                        .expect("replay");
                    applied = r.stats.applied;
                }
            },
        );
        all_lines += lines;
        all_time += d.as_secs_f64() * lines as f64;
        let per_line = d.as_secs_f64();
        let _ = writeln!(
            out,
            "| {name} | {lines} | {applied} | {:.2} | {:.2} |",
            1e-6 / per_line.max(1e-15),
            per_line * lines as f64 / applied.max(1) as f64 * 1e6
        );
    }
    let _ = writeln!(out, "| all | {all_lines} | | {:.2} | |", all_lines as f64 / all_time.max(1e-12) / 1e6);
    // One long replay: per-log costs (looking up each file once on this
    // machine, copying every process's space out at the end) amortised.
    let mut long = String::new();
    for (_, xz) in LOGS {
        let mut text = Vec::new();
        lzma_rs::xz_decompress(&mut &xz[..], &mut text).expect("recorded log");
        long.push_str(&String::from_utf8(text).expect("utf-8 log"));
    }
    let copies = if opts.loop_scale < 0.01 { 1 } else { 20 };
    let long = long.repeat(copies);
    let lines = long.lines().count() as u64;
    let d = per_op(
        opts.reps,
        lines,
        || (),
        |()| {
            maple_mm::strace::replay(long.lines(), maple_mm::strace::ReplayOptions::default(), None)
                .expect("replay")
                .stats
                .applied
        },
    );
    let _ =
        writeln!(out, "| all logs ×{copies}, one replay | {lines} | | {:.2} | |", 1e-6 / d.as_secs_f64().max(1e-15));
}
