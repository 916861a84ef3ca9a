//! Workloads, defined once: the report's experiments and the criterion
//! benches (`benches/tree.rs`) build their data here, so both measure the
//! same thing.

use std::collections::BTreeMap;

use maple_mm::{swap::SwapExtents, AddressSpace, Layout, MapFlags, Prot, PAGE_SIZE};
use maple_tree::{MapleTree, U63};

use crate::baselines::SlabValues;
use rand::{rngs::SmallRng, seq::SliceRandom, Rng, SeedableRng};
use rangemap::RangeInclusiveMap;

/// Distance between the starts of consecutive ranges.
pub const STEP: u64 = 16;
/// Length of each range (so gaps of `STEP - LEN` lie between them).
pub const LEN: u64 = 10;

/// Range `i` of the VMA-like layout: `[i*16, i*16+9]`.
pub fn range(i: u64) -> (u64, u64) {
    (i * STEP, i * STEP + LEN - 1)
}

/// A tree value.
pub fn u(x: u64) -> U63 {
    U63::new_truncate(x)
}

/// `n` ranges bulk-built, with gap tracking or without.
pub fn maple(n: u64, gaps: bool) -> MapleTree<U63> {
    let items = (0..n).map(|i| {
        let (f, l) = range(i);
        (f..=l, u(i))
    });
    let t = if gaps { MapleTree::from_sorted_with_gaps(items) } else { MapleTree::from_sorted(items) };
    t.expect("sorted built-in data")
}

/// The `String` value of range `i`.
pub fn name(i: u64) -> String {
    format!("range {i}")
}

/// The ranges numbered `keys`, inserted in that order, each holding its
/// [`name`], in a plain tree (which boxes each value).
pub fn boxed_strings(keys: &[u64]) -> MapleTree<String> {
    let mut t = MapleTree::new();
    for &i in keys {
        let (f, l) = range(i);
        t.insert_range(f..=l, name(i)).expect("ranges apart");
    }
    t
}

/// [`boxed_strings`] in a per-map slab ([`SlabValues`]).
pub fn slab_strings(keys: &[u64]) -> SlabValues<String> {
    let mut t = SlabValues::new();
    for &i in keys {
        let (f, l) = range(i);
        t.insert_range(f..=l, name(i)).expect("ranges apart");
    }
    t
}

/// The `BTreeMap` range-map idiom: start → (last, value).
pub fn btree(n: u64) -> BTreeMap<u64, (u64, u64)> {
    (0..n)
        .map(|i| {
            let (f, l) = range(i);
            (f, (l, i))
        })
        .collect()
}

/// Lookup in the `BTreeMap` idiom: the last range starting at or below `i`.
pub fn btree_load(m: &BTreeMap<u64, (u64, u64)>, i: u64) -> Option<u64> {
    m.range(..=i).next_back().and_then(|(_, &(l, v))| (l >= i).then_some(v))
}

/// The value of the first range that ends at or after `i` in the
/// `BTreeMap` idiom: the range starting at or before `i` if it reaches
/// `i`, else the next one.
pub fn btree_next_from(m: &BTreeMap<u64, (u64, u64)>, i: u64) -> Option<u64> {
    btree_load(m, i).or_else(|| m.range(i..).next().map(|(_, &(_, v))| v))
}

/// The values of the ranges overlapping `[a, b]` summed, in the `BTreeMap`
/// idiom: from the range starting at or before `a` if it reaches `a`.
pub fn btree_window_sum(m: &BTreeMap<u64, (u64, u64)>, a: u64, b: u64) -> u64 {
    let first = match m.range(..=a).next_back() {
        Some((&f, &(l, _))) if l >= a => f,
        _ => a,
    };
    m.range(first..=b).map(|(_, &(_, v))| v).sum()
}

/// Lowest gap of `size` in the `BTreeMap` idiom: a linear scan.
pub fn btree_gap(m: &BTreeMap<u64, (u64, u64)>, size: u64) -> Option<u64> {
    let mut next = 0u64;
    for (&f, &(l, _)) in m {
        if f - next >= size {
            return Some(next);
        }
        next = l + 1;
    }
    Some(next)
}

/// The empty ranges inside `[a, b]` in the `BTreeMap` idiom (the entry
/// starting at or below `a`, then every entry up to `b`), summed as
/// `start + end` so that nothing is optimised away.
pub fn btree_gaps(m: &BTreeMap<u64, (u64, u64)>, a: u64, b: u64) -> u64 {
    let mut next = a;
    let mut sum = 0u64;
    let first = m.range(..=a).next_back().map_or(a, |(&s, _)| s);
    for (&f, &(l, _)) in m.range(first..=b) {
        if f > next {
            sum = sum.wrapping_add(next + (f - 1).min(b));
        }
        next = next.max(l.saturating_add(1));
        if next > b {
            return sum;
        }
    }
    sum.wrapping_add(next + b)
}

/// The same ranges in `rangemap`.
pub fn rmap(n: u64) -> RangeInclusiveMap<u64, u64> {
    let mut m = RangeInclusiveMap::new();
    for i in 0..n {
        let (f, l) = range(i);
        m.insert(f..=l, i);
    }
    m
}

/// `0..n` in ascending or a seeded random order.
pub fn order(n: u64, random: bool) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    if random {
        v.shuffle(&mut SmallRng::seed_from_u64(n));
    }
    v
}

/// `count` seeded random keys below `n * STEP` (hits and misses).
pub fn random_keys(n: u64, count: u64, seed: u64) -> Vec<u64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..count).map(|_| rng.gen_range(0..n * STEP)).collect()
}

/// The kernel benchmarks' layout: `[i, i+5]` for i = 0, 10, … `top`.
pub fn kernel_tree(top: u64) -> MapleTree<U63> {
    let mut t = MapleTree::with_gaps();
    for i in (0..=top).step_by(10) {
        t.insert_range(i..=i + 5, u(i)).expect("insert");
    }
    t
}

/// A copy of `t` made the way fork worked before `__mt_dup`: every entry
/// inserted one by one into a new gap-tracking tree.
pub fn rebuild_by_insertion<V: maple_tree::Handle + Clone>(t: &MapleTree<V>) -> MapleTree<V> {
    let mut c = MapleTree::with_gaps();
    for (r, v) in t.range_cloned(..) {
        c.insert_range(r, v).expect("insert");
    }
    c
}

/// The fork benchmark tree of the `mt_dup()` series: 135 entries `[i*10, i*10+5]`.
pub fn forking_tree() -> MapleTree<U63> {
    let mut t = MapleTree::with_gaps();
    for i in 0..135u64 {
        t.insert_range(i * 10..=i * 10 + 5, u(i)).expect("insert");
    }
    t
}

/// Where the address-space workloads place their VMAs.
pub const BASE: u64 = 0x1000_0000;

/// An address space of `n` one-page anonymous VMAs, alternately read-only
/// and read-write so that none merge, written (`written`) or never
/// touched, optionally each with its own 79-character name.
pub fn vma_space(n: u64, named: bool, written: bool) -> AddressSpace {
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

/// An address space of `n` two-page VMAs, each followed by a one-page
/// hole: VMA `k` starts at `BASE + 3k` pages.
pub fn holey_space(n: u64) -> AddressSpace {
    let layout = Layout { max_map_count: n as usize + 1000, ..Layout::default() };
    let mut mm = AddressSpace::with_layout(layout);
    let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    for i in 0..n {
        mm.mmap(BASE + i * 3 * PAGE_SIZE, 2 * PAGE_SIZE, Prot::RW, f, None, 0).expect("map");
    }
    mm
}

/// Where the mm-calls loops work in a [`holey_space`] of `n` VMAs: the
/// hole in its middle, and the first page of the VMA before that hole.
pub fn middle(n: u64) -> (u64, u64) {
    let page = BASE + (n / 2) * 3 * PAGE_SIZE;
    (page + 2 * PAGE_SIZE, page)
}

/// `loops` times: a one-page anonymous mapping made in the hole at `hole`
/// and unmapped again.
pub fn map_pairs(mm: &mut AddressSpace, loops: u64, hole: u64) {
    let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    for _ in 0..loops {
        mm.mmap(hole, PAGE_SIZE, Prot::READ, f, None, 0).expect("map");
        mm.munmap(hole, PAGE_SIZE).expect("unmap");
    }
}

/// `loops` times: the page at `page` protected (a split in three) and
/// restored (a merge back).
pub fn protect_pairs(mm: &mut AddressSpace, loops: u64, page: u64) {
    for _ in 0..loops {
        mm.mprotect(page, PAGE_SIZE, Prot::READ).expect("protect");
        mm.mprotect(page, PAGE_SIZE, Prot::RW).expect("protect");
    }
}

/// An observer that counts the changes it is told, and the count.
pub fn counting_observer() -> (impl maple_mm::Observer, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    let told = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = std::sync::Arc::clone(&told);
    let observer = move |_: &maple_mm::Change| {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
    (observer, told)
}

/// The recorded strace logs (`maple-mm/tests/data/recorded`), xz-compressed.
pub const LOGS: [(&str, &[u8]); 6] = [
    ("churn", include_bytes!("../../maple-mm/tests/data/recorded/churn.strace.xz")),
    ("python", include_bytes!("../../maple-mm/tests/data/recorded/python.strace.xz")),
    ("gcc", include_bytes!("../../maple-mm/tests/data/recorded/gcc.strace.xz")),
    ("sqlite", include_bytes!("../../maple-mm/tests/data/recorded/sqlite.strace.xz")),
    ("node", include_bytes!("../../maple-mm/tests/data/recorded/node.strace.xz")),
    ("java", include_bytes!("../../maple-mm/tests/data/recorded/java.strace.xz")),
];

/// The final maps of the recorded processes (`maple-mm/tests/data/recorded`),
/// xz-compressed, `==> PID.end.maps <==` before each process's.
const FINAL_MAPS: [(&str, &[u8]); 3] = [
    ("python", include_bytes!("../../maple-mm/tests/data/recorded/python.maps.xz")),
    ("node", include_bytes!("../../maple-mm/tests/data/recorded/node.maps.xz")),
    ("java", include_bytes!("../../maple-mm/tests/data/recorded/java.maps.xz")),
];

/// The largest process space of the recorded programs at its exit (its
/// program's name and the space, read from its maps).
pub fn recorded_space() -> (&'static str, AddressSpace) {
    let mut best: Option<(&str, AddressSpace)> = None;
    for (name, xz) in FINAL_MAPS {
        let text = log_text(xz);
        for part in text.split("==> ").skip(1) {
            let Some((_, maps)) = part.split_once('\n') else { continue };
            let Ok(mm) = AddressSpace::from_maps(maps, name) else { continue };
            if best.as_ref().is_none_or(|b| b.1.vma_count() < mm.vma_count()) {
                best = Some((name, mm));
            }
        }
    }
    best.expect("a recorded space")
}

/// A recorded log, decompressed.
pub fn log_text(xz: &[u8]) -> String {
    let mut text = Vec::new();
    lzma_rs::xz_decompress(&mut &xz[..], &mut text).expect("recorded log");
    String::from_utf8(text).expect("utf-8 log")
}

/// Swap extents of `pages_per` pages each, scattered on disk (never
/// continuing one another), as a fragmented swap file has.
pub fn swap_extents(extents: u64, pages_per: u64) -> SwapExtents {
    let mut rng = SmallRng::seed_from_u64(2);
    let mut map = SwapExtents::new();
    let mut slots: Vec<u64> = (0..extents).collect();
    slots.shuffle(&mut rng);
    for (i, slot) in slots.into_iter().enumerate() {
        map.add_extent(i as u64 * pages_per, pages_per, 1_000_000 + slot * (pages_per + 1)).expect("extent");
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

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
            // The short range queries of the compare section.
            let next = t.range(k..).next().map(|(_, v)| v.get());
            assert_eq!(btree_next_from(&m, k), next, "next from {k}");
            let prev = t.range(..=k).next_back().map(|(_, v)| v.get());
            assert_eq!(m.range(..=k).next_back().map(|(_, v)| v.1), prev, "last at or before {k}");
            let b = k + 8 * STEP - 1;
            let window: u64 = t.range(k..=b).map(|(_, v)| v.get()).sum();
            assert_eq!(btree_window_sum(&m, k, b), window, "window from {k}");
            assert_eq!(r.overlapping(&(k..=b)).map(|(_, v)| *v).sum::<u64>(), window, "rangemap window from {k}");
        }
        assert_eq!(t.empty_area(.., 7).ok(), btree_gap(&m, 7));
        for (a, b) in [(0, 100), (5, 5), (10, 4000), (3, 16 * 300 + 50)] {
            let want: u64 = t.gaps(a..=b).map(|g| g.start() + g.end()).fold(0, u64::wrapping_add);
            assert_eq!(btree_gaps(&m, a, b), want, "[{a}, {b}]");
            let rm: u64 = r.gaps(&(a..=b)).map(|g| g.start() + g.end()).fold(0, u64::wrapping_add);
            assert_eq!(rm, want, "rangemap [{a}, {b}]");
        }
    }

    #[test]
    fn swap_extents_never_continue_each_other() {
        let map = swap_extents(500, 4);
        assert_eq!(map.len(), 500);
    }
}
