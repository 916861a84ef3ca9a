//! The kernel test themes (REFERENCE.md §9) that apply to a single-threaded
//! tree, with exact expected answers.
#![allow(clippy::reversed_empty_ranges)] // invalid ranges are tested on purpose

mod common;

use common::*;
use maple_tree::{Error, MapleTree, U63};

fn tree(gaps: bool) -> MapleTree<U63> {
    if gaps {
        MapleTree::with_gaps()
    } else {
        MapleTree::new()
    }
}

#[test]
#[cfg_attr(miri, ignore = "thousands of validated steps; runs natively")]
fn splits_at_lower_middle_upper_bounds_with_powers_of_two() {
    for gaps in [false, true] {
        let mut t = tree(gaps);
        let mut m = Model::default();
        for shift in 0..63 {
            let k = 1u64 << shift;
            for (f, l) in [(k, k), (k - 1, k - 1), (k + 1, k + 1)] {
                if m.is_free(f, l) {
                    t.insert_range(f..=l, v(f)).unwrap();
                    m.store(f, l, f);
                }
            }
        }
        check(&t, &m, "powers of two");
        // Split entries at their lower, middle and upper bound.
        for shift in (4..60).step_by(3) {
            let k = 1u64 << shift;
            t.store_range(k..=(k << 1) - 2, v(1)).unwrap();
            m.store(k, (k << 1) - 2, 1);
            t.store_range(k..=k, v(2)).unwrap();
            m.store(k, k, 2);
            t.store_range(k + (k >> 1)..=k + (k >> 1), v(3)).unwrap();
            m.store(k + (k >> 1), k + (k >> 1), 3);
            t.store_range((k << 1) - 2..=(k << 1) - 2, v(4)).unwrap();
            m.store((k << 1) - 2, (k << 1) - 2, 4);
            check(&t, &m, &format!("split around {k:#x}"));
        }
        // The u64::MAX edges.
        t.store_range(u64::MAX..=u64::MAX, v(9)).unwrap();
        m.store(u64::MAX, u64::MAX, 9);
        t.store_range(0..=0, v(8)).unwrap();
        m.store(0, 0, 8);
        check(&t, &m, "edges");
        assert_eq!(t.load(u64::MAX).map(U63::get), Some(9));
        assert_eq!(t.erase(u64::MAX).map(U63::get), Some(9));
        m.erase(u64::MAX);
        check(&t, &m, "erase at max");
    }
}

#[test]
fn next_prev_across_node_boundaries_and_off_both_ends() {
    let mut t = tree(true);
    for i in 1..=200u64 {
        t.insert_range(i * 10..=i * 10 + 3, v(i)).unwrap();
    }
    assert!(t.height() >= 2);
    let mut c = t.cursor(0);
    assert_eq!(c.get(), None);
    assert_eq!(c.prev(), None, "nothing before the first entry");
    assert_eq!(c.prev_range(), None, "index 0 is the first range");
    for i in 1..=200u64 {
        let (r, x) = c.next().unwrap();
        assert_eq!((r, x.get()), (i * 10..=i * 10 + 3, i));
    }
    assert_eq!(c.next(), None, "nothing after the last entry");
    assert_eq!(c.next_range().map(|(r, x)| (r, x.is_some())), Some((2004..=u64::MAX, false)));
    assert_eq!(c.next_range(), None, "the last range ends at u64::MAX");
    for i in (1..=200u64).rev() {
        let (r, x) = c.prev().unwrap();
        assert_eq!((r, x.get()), (i * 10..=i * 10 + 3, i));
    }
    assert_eq!(c.prev(), None);
    assert_eq!(t.next_after(2004), None);
    assert_eq!(t.prev_before(9), None);
    assert_eq!(t.prev_before(u64::MAX).map(|(r, _)| r), Some(2000..=2003));
    assert_eq!(c.find(5).map(|(r, _)| r), None, "no entry starts at or before 5");
    assert_eq!(c.find(10).map(|(r, _)| r), Some(10..=13));
}

#[test]
fn gap_searches_with_exact_answers() {
    for gaps in [true, false] {
        let mut t = tree(gaps);
        // The kernel's gap-walk layout: [i*10, i*10+5] for i < 250, then a hole.
        for i in 0..250u64 {
            t.insert_range(i * 10..=i * 10 + 5, v(i)).unwrap();
        }
        t.erase(1470);
        // Gaps of 4 between entries; [1470, 1479] is now free (10 + the 4 around it).
        assert_eq!(t.empty_area(0..=2000, 4), Ok(6));
        assert_eq!(t.empty_area(0..=2000, 5), Ok(1466));
        assert_eq!(t.empty_area_rev(0..=2000, 10), Ok(1470));
        assert_eq!(t.empty_area_rev(0..=2000, 14), Ok(1466));
        assert_eq!(t.empty_area(0..=2000, 15), Err(Error::Busy));
        assert_eq!(t.empty_area_rev(0..=2000, 4), Ok(1996));
        assert_eq!(t.empty_area(2496..=u64::MAX, 1 << 40), Ok(2496));
        assert_eq!(t.empty_area_rev(0..=u64::MAX, 1 << 40), Ok(u64::MAX - (1 << 40) + 1));
        assert_eq!(t.empty_area_rev(0..=u64::MAX, u64::MAX), Err(Error::Busy));
        assert_eq!(t.empty_area(0..=5, 1), Err(Error::Busy));
        // Invalid requests.
        assert_eq!(t.empty_area(0..=2000, 0), Err(Error::InvalidRange));
        assert_eq!(t.empty_area(10..=5, 1), Err(Error::InvalidRange));
        assert_eq!(t.empty_area(0..=3, 5), Err(Error::InvalidRange));
        #[allow(clippy::reversed_empty_ranges)]
        let inverted = 5..3;
        assert_eq!(t.empty_area(inverted, 1), Err(Error::InvalidRange));
        t.validate().unwrap();
    }
    let empty: MapleTree<U63> = tree(true);
    assert_eq!(empty.empty_area(.., u64::MAX), Ok(0));
    assert_eq!(empty.empty_area_rev(.., 16), Ok(u64::MAX - 15));
}

#[test]
#[cfg_attr(miri, ignore = "thousands of validated steps; runs natively")]
fn fill_with_allocations_until_busy() {
    // 5000 allocations of 4 KiB..64 KiB in a 64 MiB window, lowest fit.
    let mut t = tree(true);
    let mut m = Model::default();
    let (lo, hi) = (0x1000_0000u64, 0x1000_0000u64 + (64 << 20) - 1);
    let mut sizes = (0..5000u64).map(|i| 4096 * (1 + (i * 7919) % 16));
    let mut placed = 0;
    for size in sizes.by_ref() {
        match t.alloc_range(lo..=hi, size, v(size)) {
            Ok(start) => {
                assert_eq!(Ok(start), m.gap(lo, hi, size, false));
                m.store(start, start + size - 1, size);
                placed += 1;
            }
            Err(e) => {
                assert_eq!(e.cause, Error::Busy);
                assert_eq!(m.gap(lo, hi, size, false), Err(Error::Busy));
                break;
            }
        }
        if placed % 256 == 0 {
            check(&t, &m, "alloc");
        }
    }
    check(&t, &m, "full");
    assert!(placed > 1000 && placed < 5000, "placed {placed}");
    // Top-down too.
    let mut t = tree(true);
    let mut prev = u64::MAX;
    for size in (0..100u64).map(|i| 4096 * (1 + i % 16)) {
        let start = t.alloc_range_rev(lo..=hi, size, v(size)).unwrap();
        assert_eq!(start + size, prev.min(hi + 1));
        prev = start;
    }
    t.validate().unwrap();
}

#[test]
#[cfg_attr(miri, ignore = "thousands of validated steps; runs natively")]
fn overwrite_big_span_with_nothing() {
    for gaps in [false, true] {
        let mut t = tree(gaps);
        let mut m = Model::default();
        for i in 0..4000u64 {
            t.insert_range(i * 10..=i * 10 + 5, v(i)).unwrap();
            m.store(i * 10, i * 10 + 5, i);
        }
        let h = t.height();
        t.remove_range(1003..=38_004).unwrap();
        m.clear(1003, 38_004);
        check(&t, &m, "big null span");
        assert!(t.height() <= h);
        t.store_range(5..=39_000, v(1)).unwrap();
        m.store(5, 39_000, 1);
        check(&t, &m, "big span store");
        assert_eq!(t.len(), 102, "[0,4], the big entry, the trimmed [39001,39005] and 99 more");
    }
}

#[test]
#[cfg_attr(miri, ignore = "hundreds of validated inserts; the same unsafe paths run in smoke/dup/fault")]
fn height_drops_after_spanning_store() {
    for gaps in [false, true] {
        let mut t = tree(gaps);
        let mut i = 0u64;
        while t.height() < 3 {
            t.insert_range(i * 10..=i * 10 + 5, v(i)).unwrap();
            i += 1;
        }
        let top = i * 10;
        // Overwrite almost everything: the tree must shrink back.
        t.store_range(20..=top - 20, v(0)).unwrap();
        t.validate().unwrap();
        assert!(t.height() <= 2, "height {} after spanning store", t.height());
    }
}

#[test]
fn collapse_a_height_6_tree_one_erase_at_a_time() {
    let n: u64 = if cfg!(miri) { 40 } else { 170_000 };
    let t: Result<MapleTree<U63>, _> = MapleTree::from_sorted_with_gaps((0..n).map(|i| (i..=i, v(i))));
    let mut t = t.unwrap();
    t.validate().unwrap();
    if !cfg!(miri) {
        assert_eq!(t.height(), 6);
    }
    let mut last_height = t.height();
    for i in 0..n {
        // Erase from both ends and the middle in turn.
        let idx = match i % 3 {
            0 => i / 3,
            1 => n - 1 - i / 3,
            _ => n / 2 + (i / 3) % (n / 4),
        };
        let _ = t.erase(idx);
        assert!(t.height() <= last_height, "height grew while erasing");
        last_height = t.height();
        if i % 4096 == 0 || t.len() < 300 {
            t.validate().unwrap_or_else(|e| panic!("erase #{i} ({idx}): {e}"));
        }
    }
    for i in 0..n {
        let _ = t.erase(i);
    }
    t.validate().unwrap();
    assert_eq!((t.len(), t.height()), (0, 0));
}

#[test]
fn bulk_build_rejects_bad_input() {
    let bad: Result<MapleTree<U63>, _> = MapleTree::from_sorted(vec![(5..=9, v(1)), (9..=12, v(2))]);
    assert_eq!(bad.unwrap_err(), Error::InvalidRange);
    #[allow(clippy::reversed_empty_ranges)]
    let bad: Result<MapleTree<U63>, _> = MapleTree::from_sorted(vec![(5..=4, v(1))]);
    assert_eq!(bad.unwrap_err(), Error::InvalidRange);
    let ok = MapleTree::from_sorted(vec![(0..=0, v(1)), (1..=u64::MAX, v(2))]).unwrap();
    ok.validate().unwrap();
    assert_eq!(ok.len(), 2);
    for n in [1u64, 15, 16, 17, 200, 5000] {
        for gaps in [false, true] {
            let items = (0..n).map(|i| (i * 3..=i * 3 + (i % 2), v(i)));
            let t = if gaps { MapleTree::from_sorted_with_gaps(items) } else { MapleTree::from_sorted(items) }.unwrap();
            t.validate().unwrap();
            let want: Vec<_> = (0..n).map(|i| (i * 3, i * 3 + (i % 2), i)).collect();
            assert_eq!(entries(&t), want);
        }
    }
}

#[test]
fn alloc_cyclic_wraps_once_and_reports_it() {
    let mut t = tree(true);
    let mut next = 5;
    assert_eq!(t.alloc_cyclic(0..=7, &mut next, v(0)).unwrap(), (5, false));
    assert_eq!(t.alloc_cyclic(0..=7, &mut next, v(0)).unwrap(), (6, false));
    assert_eq!(t.alloc_cyclic(0..=7, &mut next, v(0)).unwrap(), (7, false));
    assert_eq!(next, 8, "past the window: the next call wraps");
    t.insert(0, v(0)).unwrap();
    assert_eq!(t.alloc_cyclic(0..=7, &mut next, v(0)).unwrap(), (1, true));
    for want in 2..=4 {
        assert_eq!(t.alloc_cyclic(0..=7, &mut next, v(0)).unwrap().0, want);
    }
    assert_eq!(t.alloc_cyclic(0..=7, &mut next, v(0)).unwrap_err().cause, Error::Busy);
    t.erase(2);
    next = 6;
    assert_eq!(t.alloc_cyclic(0..=7, &mut next, v(0)).unwrap(), (2, true));
    t.validate().unwrap();
    // Handing out u64::MAX wraps `next` to 0; the wrap is reported once.
    let mut t = tree(true);
    let mut next = u64::MAX;
    assert_eq!(t.alloc_cyclic(.., &mut next, v(0)).unwrap(), (u64::MAX, false));
    assert_eq!(next, 0);
    assert_eq!(t.alloc_cyclic(.., &mut next, v(0)).unwrap(), (0, true));
    assert_eq!(t.alloc_cyclic(.., &mut next, v(0)).unwrap(), (1, false));
}

#[test]
fn invalid_ranges_change_nothing() {
    let mut t = tree(true);
    t.insert_range(10..=20, v(1)).unwrap();
    #[allow(clippy::reversed_empty_ranges)]
    {
        assert_eq!(t.insert_range(5..=4, v(2)).unwrap_err().cause, Error::InvalidRange);
        assert_eq!(t.store_range(5..5, v(2)).unwrap_err().cause, Error::InvalidRange);
        assert_eq!(t.remove_range(9..0), Err(Error::InvalidRange));
    }
    assert_eq!(t.insert_range(..0, v(2)).unwrap_err().cause, Error::InvalidRange);
    assert_eq!(t.alloc_range(0..=100, 0, v(2)).unwrap_err().cause, Error::InvalidRange);
    assert_eq!(t.insert_range(u64::MAX.., v(3)).map_err(|e| e.cause), Ok(()));
    assert_eq!(entries(&t), vec![(10, 20, 1), (u64::MAX, u64::MAX, 3)]);
    t.validate().unwrap();
}

#[test]
#[cfg_attr(miri, ignore = "hundreds of validated inserts; the same unsafe paths run in smoke/dup/fault")]
fn reserved_marker_occupies_but_is_invisible() {
    for gaps in [false, true] {
        let mut t = tree(gaps);
        for i in 0..500u64 {
            t.insert_range(i * 10..=i * 10 + 5, v(i)).unwrap();
        }
        // A reserved marker where a failed fork stopped: [1000, 2999].
        t.remove_range(1000..=2999).unwrap();
        t.reserve_range(1000..=2999).unwrap();
        t.validate().unwrap();
        assert_eq!(t.len(), 300);
        assert_eq!(t.iter().count(), 300);
        assert_eq!(t.load(1500), None);
        assert!(t.get_range(1500).is_none() && !t.contains(1500) && t.is_reserved(1500));
        assert_eq!(t.insert(1500, v(1)).unwrap_err().cause, Error::Occupied);
        assert_eq!(t.reserve_range(995..=1000), Err(Error::Occupied));
        assert_eq!(t.empty_area(996..=3100, 4), Ok(996));
        assert_eq!(t.empty_area(997..=3100, 4), Ok(3006), "the reserved range is not free");
        assert_eq!(t.next_after(1000).map(|(r, _)| r), Some(3000..=3005));
        // An empty range, then the reserved one: stepped over too.
        assert_eq!(t.next_after(997).map(|(r, _)| r), Some(3000..=3005));
        assert_eq!(t.prev_before(2999).map(|(r, _)| r), Some(990..=995));
        // The cursor sees it.
        let mut c = t.cursor(995);
        assert_eq!(c.next_range().map(|(r, x)| (r, x.is_some())), Some((996..=999, false)));
        assert_eq!(c.next_range().map(|(r, x)| (r, x.is_some())), Some((1000..=2999, false)));
        assert!(c.is_reserved());
        // Cutting it keeps the marker on both sides; a dup keeps it too.
        t.store_range(1500..=1500, v(7)).unwrap();
        assert!(t.is_reserved(1499) && t.is_reserved(1501));
        assert_eq!(t.len(), 301);
        let c = t.try_dup().unwrap();
        let m = t.try_dup_map(|_, x| x).unwrap();
        for d in [&c, &m] {
            d.validate().unwrap();
            assert!(d.is_reserved(2000));
            assert_eq!(d.len(), 301);
        }
        // Erase removes it (and returns no value); empties merge again.
        assert_eq!(t.erase(1000), None);
        assert_eq!(t.erase(2000), None);
        assert!(!t.is_reserved(1000) && !t.is_reserved(2000));
        t.validate().unwrap();
        assert_eq!(t.empty_area(996..=3100, 500), Ok(996));
    }
}

#[test]
#[cfg_attr(miri, ignore = "tens of thousands of inserts; runs natively")]
fn random_inserts_use_no_more_nodes_than_the_kernel() {
    // The kernel's own C tree (Linux 6.12 `lib/maple_tree.c`, built by
    // `ci/kernel-c.sh`), after `kbench nodes-random N`: the same ranges
    // `[i * 16, i * 16 + 9]`, stored in the same shuffled order into a
    // tree that tracks gaps, counted by its node cache.
    for (n, kernel) in [(1_000u64, 177usize), (5_000, 880), (20_000, 3_507), (50_000, 8_728)] {
        let mut t = MapleTree::with_gaps();
        for i in shuffle::kernel_order(n) {
            t.insert_range(i * 16..=i * 16 + 9, v(i)).unwrap();
        }
        t.validate().unwrap();
        assert_eq!(t.len(), n as usize);
        let s = t.stats();
        let ours = s.leaves + s.internal;
        assert!(ours <= kernel, "{n} random inserts: {ours} nodes, the kernel's tree {kernel}");
    }
}
