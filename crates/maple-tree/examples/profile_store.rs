//! A workload for profilers: builds trees by storing ranges in ascending or
//! random order (`cargo run --release --example profile_store -- rand`), or
//! runs one of the kernel's benchmark loops (`slot`, `node`, `awalk`,
//! `kload`), iteration
//! (`iter` by `sum`, `iter-for` by a `for` loop, `iter-rev` by a `for`
//! loop over `.rev()`, `iter-rev-sum` by `sum` over `.rev()`), the gaps of a window
//! (`gaps` by `fold`, `gaps-for` by a `for` loop, `gaps-rev` by a `for`
//! loop over `.rev()`), a cursor through 500 entries (`cursor-next`,
//! `cursor-prev`: the kernel section's `next` and `prev`), random erases (`erase`
//! by range, `erase-at` by index, `erase-bulk` by index from a bulk-built tree), a fork through a cursor (`fork`), or
//! ascending stores through `extend` (`extend`) or a loop (`asc-loop`),
//! or the holes of a gap-tracking tree filled by `alloc_range` (`alloc`).
//! `lookup` times random lookups against the `BTreeMap` idiom in one
//! process (1 M ranges by default), `writes-vs-btree` random inserts,
//! overwrites or erases (see [`writes_vs_btree`]); `btree-rand`, `btree-erase`,
//! `btree-for`, `btree-rev`, `btree-sum`, `btree-rev-sum` and
//! `btree-values-mut` run the `BTreeMap` idiom on `rand`'s,
//! `erase-bulk`'s, `iter-for`'s, `iter-rev`'s, `iter`'s, `iter-rev-sum`'s
//! and `for-each-value-mut`'s work, for its instruction count. For `asc`,
//! `rand` and `erase`, `N=1000000` sets the number of ranges
//! (100 K by default) and `GAPS=1` builds gap-tracking trees; for
//! `iter-for`, `iter-rev`, the value loops (`for-each-mut`,
//! `for-each-value-mut`) and the idiom's `btree-for`, `btree-rev` and
//! `btree-values-mut`, `N` sets it too (1000 by default) and `ROUNDS` the
//! passes over the tree (20 M entries in all by default), and `WIDTH=16`
//! makes the bulk-built ranges (the iteration modes', `erase-bulk`'s and
//! the idiom's beside them) `[16i, 16i + 15]`, adjacent, where by default
//! they are `[16i, 16i + 9]`, a gap after each; `rand` prints
//! the node count of its tree to stderr; `REPS=10000000` runs the kernel
//! loops (`slot`, `node`) ten times longer than the default 1 M rounds, for
//! wall-clock comparisons that outlast the machine's swings.
use maple_tree::{MapleTree, U63};

#[path = "../tests/common/shuffle.rs"]
mod shuffle;

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let reps = env_u64("REPS", 1_000_000);
    if mode == "slot" {
        println!("{}", slot_loop(reps));
        return;
    }
    if mode == "node" {
        println!("{}", node_loop(reps));
        return;
    }
    if mode == "dup" {
        // The kernel section's dup + destroy: the `mt_dup()` series' tree built by
        // ascending inserts, duplicated and dropped `REPS` times.
        let mut t: MapleTree<U63> = MapleTree::with_gaps();
        for i in 0..=134u64 {
            t.insert_range(i * 10..=i * 10 + 5, U63::new_truncate(i)).unwrap();
        }
        let n: usize = (0..reps).map(|_| t.try_dup().unwrap().len()).sum();
        println!("{n}");
        return;
    }
    if mode == "awalk" || mode == "kload" {
        println!("{}", kernel_read_loop(&mode, reps));
        return;
    }
    if mode == "alloc" {
        // `N` holes (100 K by default) filled by `alloc_range`, lowest
        // first, ten times over copies of one tree.
        let holes = build(&random_order(env_u64("N", 100_000)), true);
        println!("{}", (0..10).map(|_| fill_holes(&holes)).sum::<u64>());
        return;
    }
    if mode == "fork" {
        // The `mt_dup()` series' fork loop the kernel's way: duplicate, then replace
        // every entry of the copy through a cursor.
        let t = seed_tree();
        let mut total = 0;
        for _ in 0..20_000 {
            let mut copy = t.try_dup().unwrap();
            let mut c = copy.cursor_mut(0);
            while let Some((_, v)) = c.next() {
                let v = U63::new_truncate(v.get() + 1);
                c.replace(v).unwrap();
            }
            total += copy.len();
        }
        println!("{total}");
        return;
    }
    if mode == "extend" || mode == "asc-loop" {
        // Ascending stores through `collect` (`extend`, a `store_range`
        // loop) or one `store_range` call each: both
        // start each write from the walk the tree kept from the last.
        let mut total = 0;
        for _ in 0..10 {
            let ranges = (0..100_000u64).map(|i| (i * 16..=i * 16 + 9, U63::new_truncate(i)));
            let t: MapleTree<U63> = if mode == "extend" {
                ranges.collect()
            } else {
                let mut t = MapleTree::new();
                for (r, v) in ranges {
                    t.store_range(r, v).unwrap();
                }
                t
            };
            total += t.len();
        }
        println!("{total}");
        return;
    }
    if mode == "writes-vs-btree" {
        writes_vs_btree();
        return;
    }
    if mode == "lookup" {
        // Random lookups against the `BTreeMap` idiom in the same process
        // (the ratio survives the machine's swings better than either
        // time): `N` random ranges, 4 M random keys, 7 rounds.
        let n = env_u64("N", 1_000_000);
        let order = random_order(n);
        let t = build(&order, false);
        // Inserted one by one in the same order (`collect` would sort
        // first and bulk-build a denser map than inserts leave).
        let mut b = std::collections::BTreeMap::new();
        for &i in &order {
            b.insert(i * 16, (i * 16 + 9, i));
        }
        let keys = random_keys(4_000_000, n);
        for round in 0..7 {
            let t0 = std::time::Instant::now();
            let s: u64 = keys.iter().filter_map(|&k| t.load(k)).map(|v| v.get()).sum();
            let ours = t0.elapsed().as_secs_f64() * 1e9 / keys.len() as f64;
            let t0 = std::time::Instant::now();
            let s2: u64 = keys
                .iter()
                .filter_map(|&k| b.range(..=k).next_back().filter(|(_, &(end, _))| k <= end).map(|(_, &(_, v))| v))
                .sum();
            let theirs = t0.elapsed().as_secs_f64() * 1e9 / keys.len() as f64;
            assert_eq!(s, s2);
            println!("round {round}: maple {ours:.1} ns, BTreeMap {theirs:.1} ns, ratio {:.2}", theirs / ours);
        }
        return;
    }
    if mode == "window" || mode == "window-rev" {
        // Eight ranges summed from each of 200 000 keys of a 1 K-range
        // tree, by `sum` (`fold`) or, backwards, by `.rev()` and `sum`.
        let t = bulk(1000);
        let mut sum = 0u64;
        for i in 0..200_000u64 {
            let k = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) % (1000 * 16);
            let r = t.range(k..k + 8 * 16);
            sum += if mode == "window" {
                r.map(|(_, v)| v.get()).sum::<u64>()
            } else {
                r.rev().map(|(_, v)| v.get()).sum()
            };
        }
        println!("{sum}");
        return;
    }
    if mode == "before" || mode == "after" {
        // The entry at or before each of 1 M keys of a 1 K-range tree
        // (`range(..=k).next_back()`), or at or after it
        // (`range(k..).next()`).
        let t = bulk(1000);
        let mut sum = 0u64;
        for i in 0..1_000_000u64 {
            let k = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) % (1000 * 16);
            let e = if mode == "before" { t.range(..=k).next_back() } else { t.range(k..).next() };
            sum += e.map_or(0, |(_, v)| v.get());
        }
        println!("{sum}");
        return;
    }
    if mode == "cursor-next" || mode == "cursor-prev" {
        // The kernel section's `next` and `prev` loops: a cursor through
        // 500 entries of a gap-tracking tree, 20 000 times.
        let mut t: MapleTree<U63> = MapleTree::with_gaps();
        for i in (0..2500u64).step_by(5) {
            t.insert_range(i..=i + if i % 30 == 0 { 3 } else { 4 }, U63::new_truncate(i)).unwrap();
        }
        let mut sum = 0u64;
        for _ in 0..20_000 {
            if mode == "cursor-next" {
                let mut c = t.cursor(std::hint::black_box(0));
                sum = sum.wrapping_add(c.get().map_or(0, |v| v.get()));
                while let Some((_, v)) = c.next() {
                    sum = sum.wrapping_add(v.get());
                }
            } else {
                let mut c = t.cursor(std::hint::black_box(u64::MAX));
                while let Some((_, v)) = c.prev() {
                    sum = sum.wrapping_add(v.get());
                }
            }
        }
        println!("{sum}");
        return;
    }
    if mode == "iter" {
        let t = bulk(1000);
        let mut sum = 0;
        for _ in 0..20_000 {
            sum += t.iter().map(|(_, v)| v.get()).sum::<u64>();
        }
        println!("{sum}");
        return;
    }
    if mode == "iter-for" {
        // The same, entry by entry through `next` (a `for` loop), over `N`
        // ranges (1000 by default), 20 M entries in all.
        let n = env_u64("N", 1000);
        let t = bulk(n);
        println!("{}", (0..env_u64("ROUNDS", (20_000_000 / n).max(1))).map(|_| sum_by_for(&t)).sum::<u64>());
        return;
    }
    if mode == "for-each-mut" || mode == "for-each-value-mut" || mode == "btree-values-mut" {
        // Every inline value of `N` ranges (1000 by default) changed in
        // place, 20 M values in all, with its range or without; or the
        // `BTreeMap` idiom's `values_mut` on the same work.
        let n = env_u64("N", 1000);
        let rounds = env_u64("ROUNDS", (20_000_000 / n).max(1));
        if mode == "btree-values-mut" {
            let mut m: std::collections::BTreeMap<u64, (u64, u32)> =
                (0..n).map(|i| (i * 16, (i * 16 + 9, i as u32))).collect();
            for _ in 0..rounds {
                m.values_mut().for_each(|v| v.1 = v.1.wrapping_add(1));
            }
            println!("{}", m.get(&16).map_or(0, |v| v.1));
            return;
        }
        let mut t: MapleTree<u32> = MapleTree::from_sorted((0..n).map(|i| (i * 16..=i * 16 + 9, i as u32))).unwrap();
        for _ in 0..rounds {
            if mode == "for-each-mut" {
                t.for_each_mut(|_, v| *v = v.wrapping_add(1));
            } else {
                t.for_each_value_mut(|v| *v = v.wrapping_add(1));
            }
        }
        println!("{}", t.load(16).unwrap_or(0));
        return;
    }
    if mode == "iter-rev-sum" {
        // The same backwards by `sum` (`rfold`).
        let t = bulk(1000);
        let mut sum = 0;
        for _ in 0..20_000 {
            sum += t.iter().rev().map(|(_, v)| v.get()).sum::<u64>();
        }
        println!("{sum}");
        return;
    }
    if mode == "btree-for" || mode == "btree-rev" || mode == "btree-sum" || mode == "btree-rev-sum" {
        // The `BTreeMap` idiom (start → (end, value)) on `iter-for`'s,
        // `iter-rev`'s, `iter`'s and `iter-rev-sum`'s work, for its
        // instruction count.
        let (n, w) = (env_u64("N", 1000), width());
        let t: std::collections::BTreeMap<u64, (u64, u64)> = (0..n).map(|i| (i * 16, (i * 16 + w - 1, i))).collect();
        let total: u64 = (0..env_u64("ROUNDS", (20_000_000 / n).max(1)))
            .map(|_| {
                let mut sum = 0;
                if mode == "btree-sum" {
                    sum = std::hint::black_box(&t).values().map(|(_, v)| v).sum();
                } else if mode == "btree-rev-sum" {
                    sum = std::hint::black_box(&t).values().rev().map(|(_, v)| v).sum();
                } else if mode == "btree-for" {
                    for (_, v) in std::hint::black_box(&t).values() {
                        sum += v;
                    }
                } else {
                    for (_, v) in std::hint::black_box(&t).values().rev() {
                        sum += v;
                    }
                }
                sum
            })
            .sum();
        println!("{total}");
        return;
    }
    if mode == "iter-rev" {
        // The same backwards, entry by entry through `next_back`.
        let n = env_u64("N", 1000);
        let t = bulk(n);
        let total: u64 = (0..env_u64("ROUNDS", (20_000_000 / n).max(1)))
            .map(|_| {
                let mut sum = 0;
                for (_, v) in t.iter().rev() {
                    sum += v.get();
                }
                sum
            })
            .sum();
        println!("{total}");
        return;
    }
    if mode == "gaps" || mode == "gaps-for" || mode == "gaps-rev" {
        // The gaps of a window of 100 entries, one after each (the
        // report's "gaps in a window" row), in a gap-tracking tree.
        let t: MapleTree<U63> =
            MapleTree::from_sorted_with_gaps((0..100_000u64).map(|i| (i * 16..=i * 16 + 9, U63::new_truncate(i))))
                .unwrap();
        let (a, b) = (50_000 * 16, 50_100 * 16 - 1);
        let mut sum = 0u64;
        for _ in 0..100_000 {
            if mode == "gaps" {
                sum = t.gaps(std::hint::black_box(a)..=b).fold(sum, |s, g| s.wrapping_add(g.start() + g.end()));
            } else if mode == "gaps-rev" {
                for g in t.gaps(std::hint::black_box(a)..=b).rev() {
                    sum = sum.wrapping_add(g.start() + g.end());
                }
            } else {
                for g in t.gaps(std::hint::black_box(a)..=b) {
                    sum = sum.wrapping_add(g.start() + g.end());
                }
            }
        }
        println!("{sum}");
        return;
    }
    if mode == "btree-rand" || mode == "btree-erase" {
        // The `BTreeMap` idiom on `rand`'s and `erase-bulk`'s work (the
        // compare section's baseline), for its instruction count.
        let (n, w) = (env_u64("N", 100_000), width());
        let order = random_order(n);
        let mut total = 0;
        for _ in 0..10 {
            let mut b = std::collections::BTreeMap::new();
            if mode == "btree-rand" {
                for &i in &order {
                    b.insert(i * 16, (i * 16 + 9, i));
                }
            } else {
                b = (0..n).map(|i| (i * 16, (i * 16 + w - 1, i))).collect();
                for &i in order.iter().rev() {
                    std::hint::black_box(b.remove(&(i * 16)));
                }
            }
            total += b.len();
        }
        println!("{total}");
        return;
    }
    let random = mode == "rand" || mode == "erase" || mode == "erase-at" || mode == "erase-bulk";
    let n = env_u64("N", 100_000);
    let order: Vec<u64> = if random { random_order(n) } else { (0..n).collect() };
    let mut total = 0;
    for _ in 0..10 {
        let mut t = if mode == "erase-bulk" { bulk(n) } else { build(&order, std::env::var_os("GAPS").is_some()) };
        if mode == "erase" {
            // Then empty it again in another random order.
            for &i in order.iter().rev() {
                t.remove_range(i * 16..=i * 16 + 9).unwrap();
            }
        }
        if mode == "erase-at" || mode == "erase-bulk" {
            let start = std::time::Instant::now();
            erase_at(&mut t, &order);
            if std::env::var_os("TIME").is_some() {
                eprintln!("{:.1} ns per erase", start.elapsed().as_nanos() as f64 / order.len() as f64);
            }
        }
        total += t.len();
        if mode == "rand" && total == t.len() {
            let s = t.stats();
            eprintln!("nodes after random inserts: {} ({} leaves)", s.leaves + s.internal, s.leaves);
        }
    }
    println!("{total}");
}

/// Random writes against the `BTreeMap` idiom in one process, alternating
/// rounds (median ns per write, and the idiom's time over ours):
/// `WRITE=insert` (the default) builds each structure from empty in the
/// kernel section's random order, as the compare section's random stores
/// do; `WRITE=overwrite` stores the same ranges again over a copy of the
/// built structure (no growth: an exact fit, and the idiom's insert over
/// an existing key); `WRITE=erase` erases every range of a bulk-built one
/// in that order. `FENCE=1` (x86-64) puts an `lfence` after every write,
/// so that no write starts before the one before it has finished: what
/// is left is each write's own latency, without the overlap of one write's
/// cache misses with the next one's work that a short write allows.
/// `N` ranges (100 K by default), `ROUNDS` rounds (15).
fn writes_vs_btree() {
    use std::{collections::BTreeMap, hint::black_box, time::Instant};
    let n = env_u64("N", 100_000);
    let rounds = env_u64("ROUNDS", 15) as usize;
    let write = std::env::var("WRITE").unwrap_or_else(|_| "insert".into());
    let fence = std::env::var_os("FENCE").is_some();
    let order = random_order(n);
    let sep = || {
        if fence {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `lfence` has no memory effects; SSE2, which provides
            // it, is part of x86-64.
            unsafe {
                core::arch::x86_64::_mm_lfence()
            };
        }
    };
    let (base, mbase): (MapleTree<U63>, BTreeMap<u64, (u64, u64)>) = match write.as_str() {
        "insert" => (MapleTree::new(), BTreeMap::new()),
        // Both built by random inserts (`collect` would sort first and
        // build the `BTreeMap` dense).
        "overwrite" => {
            let mut m = BTreeMap::new();
            for &i in &order {
                m.insert(i * 16, (i * 16 + 9, i));
            }
            (build(&order, false), m)
        }
        "erase" => (bulk(n), (0..n).map(|i| (i * 16, (i * 16 + 9, i))).collect()),
        other => panic!("unknown WRITE={other} (insert, overwrite, erase)"),
    };
    let erase = write == "erase";
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let mut t = base.clone();
        let t0 = Instant::now();
        for &i in &order {
            if erase {
                black_box(t.erase(i * 16));
            } else {
                t.store_range(i * 16..=i * 16 + 9, U63::new_truncate(i)).unwrap();
            }
            sep();
        }
        ours.push(t0.elapsed().as_secs_f64() * 1e9 / n as f64);
        drop(black_box(t));
        let mut m = mbase.clone();
        let t0 = Instant::now();
        for &i in &order {
            if erase {
                black_box(m.remove(&(i * 16)));
            } else {
                m.insert(i * 16, (i * 16 + 9, i));
            }
            sep();
        }
        theirs.push(t0.elapsed().as_secs_f64() * 1e9 / n as f64);
        drop(black_box(m));
    }
    ours.sort_by(f64::total_cmp);
    theirs.sort_by(f64::total_cmp);
    let (a, b) = (ours[rounds / 2], theirs[rounds / 2]);
    println!("{write}, n = {n}, fence {fence}: maple {a:.1} ns, BTreeMap {b:.1} ns, ratio {:.3}", b / a);
}

/// The number in the environment variable `name`, or `default`.
fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The values of `t` summed by a `for` loop (entry by entry through
/// `next`).
fn sum_by_for(t: &MapleTree<U63>) -> u64 {
    let mut sum = 0;
    for (_, v) in t {
        sum += v.get();
    }
    sum
}

/// `0..n` in the kernel section's random order (the C driver's too), so
/// that node counts compare with the kernel's. (A
/// multiplicative-hash order, which spreads inserts more evenly than a
/// random one does and flattered the push rules: 17,205 nodes for 100 K
/// ranges against 18,412 here.)
fn random_order(n: u64) -> Vec<u64> {
    shuffle::kernel_order(n)
}

/// `count` keys scattered over the ranges of a tree of `n` (hits and
/// misses).
fn random_keys(count: u64, n: u64) -> Vec<u64> {
    (0..count).map(|k| (k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 7) % (n * 16)).collect()
}

/// The `mt_dup()` series' tree: 135 ranges `[i * 10, i * 10 + 5]`, tracking gaps.
fn seed_tree() -> MapleTree<U63> {
    MapleTree::from_sorted_with_gaps((0..135u64).map(|i| (i * 10..=i * 10 + 5, U63::new_truncate(i)))).unwrap()
}

/// A bulk-built tree of the ranges `[i * 16, i * 16 + WIDTH - 1]`, `i < n`.
fn bulk(n: u64) -> MapleTree<U63> {
    let w = width();
    MapleTree::from_sorted((0..n).map(|i| (i * 16..=i * 16 + w - 1, U63::new_truncate(i)))).unwrap()
}

/// How many indices each range of [`bulk`] spans (`WIDTH`, 1 to 16).
fn width() -> u64 {
    env_u64("WIDTH", 10).clamp(1, 16)
}

/// The kernel's slot-store loop (`reps` rounds); the tree's length.
fn slot_loop(reps: u64) -> usize {
    let mut t: MapleTree<U63> = MapleTree::with_gaps();
    for i in (0..=1030u64).step_by(10) {
        t.insert_range(i..=i + 5, U63::new_truncate(i)).unwrap();
    }
    for _ in 0..reps {
        t.remove_range(105..=105).unwrap();
        t.store_range(100..=105, U63::new_truncate(100)).unwrap();
    }
    t.len()
}

/// The kernel's gap-walk (`awalk`) or load (`kload`) loop, `reps` rounds:
/// the highest gap of 10 below 2000, or a lookup of 1480, in the tree of
/// `[i, i+5]`, i = 0, 10 … 2490, without `[1470, 1475]` (the report's
/// kernel section). Returns a sum of the answers.
fn kernel_read_loop(mode: &str, reps: u64) -> u64 {
    let mut t: MapleTree<U63> = MapleTree::with_gaps();
    for i in (0..=2490u64).step_by(10) {
        t.insert_range(i..=i + 5, U63::new_truncate(i)).unwrap();
    }
    t.remove_range(1470..=1475).unwrap();
    let mut sum = 0u64;
    for _ in 0..reps {
        sum = sum.wrapping_add(if mode == "awalk" {
            t.empty_area_rev(0..=2000, std::hint::black_box(10)).unwrap_or(0)
        } else {
            t.load(std::hint::black_box(1480)).map_or(0, U63::get)
        });
    }
    sum
}

/// The kernel's node-store loop (`reps` rounds); the tree's length.
fn node_loop(reps: u64) -> usize {
    let mut t: MapleTree<U63> = MapleTree::with_gaps();
    for i in (0..=230u64).step_by(10) {
        t.insert_range(i..=i + 5, U63::new_truncate(i)).unwrap();
    }
    let mut ow = 76u64;
    for _ in 0..reps {
        t.store_range(ow..=ow + 15, U63::new_truncate(ow)).unwrap();
        ow += 5;
        if ow > 135 {
            ow = 76;
        }
    }
    t.len()
}

/// A tree of the ranges `[i * 16, i * 16 + 9]`, stored in `order`.
fn build(order: &[u64], gaps: bool) -> MapleTree<U63> {
    let mut t: MapleTree<U63> = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
    for &i in order {
        t.store_range(i * 16..=i * 16 + 9, U63::new_truncate(i)).unwrap();
    }
    t
}

/// Fills every hole of a copy of `holes` (a gap-tracking tree of
/// [`build`]: six free indices after each range) by `alloc_range`, lowest
/// first, as an id allocator would.
fn fill_holes(holes: &MapleTree<U63>) -> u64 {
    let mut t = holes.try_dup().unwrap();
    let n = t.len() as u64;
    for i in 0..n {
        t.alloc_range(.., 6, U63::new_truncate(i)).unwrap();
    }
    t.len() as u64
}

/// Empties a tree of [`build`] by `erase` of an index in each entry, in
/// the reverse of `order`.
fn erase_at(t: &mut MapleTree<U63>, order: &[u64]) {
    for &i in order.iter().rev() {
        t.erase(i * 16 + 3).unwrap();
    }
}
