//! O(n) duplication: same contents and shape, independent copies, every
//! allocation point failing cleanly, and panic safety of `try_dup_map`.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use common::{
    counted::{live, Tracked},
    *,
};
use maple_tree::{fault, Error, MapleTree, U63};

fn grow(n: u64, gaps: bool) -> MapleTree<U63> {
    let mut t = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
    // Random-ish order so nodes are not all full.
    for i in 0..n {
        let k = (i * 7919) % n;
        t.insert_range(k * 10..=k * 10 + 5, v(k)).unwrap();
    }
    t
}

#[test]
fn dup_has_same_contents_and_shape_at_every_height() {
    let sizes: &[u64] = if cfg!(miri) { &[0, 1, 30, 200] } else { &[0, 1, 15, 16, 200, 3000, 40_000] };
    let mut heights = Vec::new();
    for &n in sizes {
        for gaps in [false, true] {
            let t = grow(n, gaps);
            let c = t.try_dup().unwrap();
            c.validate().unwrap();
            assert_eq!(entries(&c), entries(&t));
            assert_eq!(c.dump(), t.dump(), "shape differs");
            let (cs, ts) = (c.stats(), t.stats());
            let shape = |s: maple_tree::Stats| maple_tree::Stats { held_bytes: 0, ..s };
            assert_eq!((c.len(), c.height(), shape(cs)), (t.len(), t.height(), shape(ts)));
            // The copy's nodes are carved in order, sixteen to a 4 KiB
            // chunk, each chunk with its share of its 2 MiB block's header
            // chunks (509 chunks of nodes per block).
            let chunks = (cs.leaves + cs.internal).div_ceil(16);
            assert_eq!(cs.held_bytes, chunks * (2 << 20) / 509, "copy not packed");
            assert!(cs.held_bytes <= ts.held_bytes + 4096);
            heights.push(t.height());
        }
    }
    if !cfg!(miri) {
        assert!(heights.contains(&0) && heights.iter().max() >= Some(&5), "heights {heights:?}");
    }
}

#[test]
fn copies_are_independent() {
    let n = if cfg!(miri) { 100 } else { 2000 };
    let mut t = grow(n, true);
    let mut m = Model::default();
    for (s, e, x) in entries(&t) {
        m.store(s, e, x);
    }
    let mut c = t.clone();
    let mut mc = m.clone();
    // Write to the copy: the source does not change.
    c.store_range(5..=n * 5, v(1)).unwrap();
    mc.store(5, n * 5, 1);
    c.erase(n * 10 - 10);
    mc.erase(n * 10 - 10);
    check(&c, &mc, "copy after writes");
    check(&t, &m, "source after writes to the copy");
    // And the other way round.
    t.remove_range(0..=n * 3).unwrap();
    m.clear(0, n * 3);
    check(&t, &m, "source after writes");
    check(&c, &mc, "copy after writes to the source");
}

#[test]
fn boxed_values_are_cloned_and_dropped_once() {
    let n = if cfg!(miri) { 60 } else { 5000 };
    let t: MapleTree<Box<Tracked>> =
        MapleTree::from_sorted_with_gaps((0..n).map(|i| (i * 3..=i * 3 + 1, Box::new(Tracked::new(i))))).unwrap();
    let first = t.load(0).unwrap(); // a live borrow while we duplicate
    let c = t.try_dup().unwrap();
    assert_eq!(first.0, 0);
    assert_eq!(live(), 2 * n as i64);
    assert_eq!(c.load(3 * (n - 1)).map(|x| x.0), Some(n - 1));
    assert!(!std::ptr::eq(c.load(0).unwrap(), first), "the copy must own its values");
    drop(c);
    assert_eq!(live(), n as i64);
    drop(t);
    assert_eq!(live(), 0);
}

#[test]
fn dup_map_panicking_midway_drops_what_it_made() {
    let t: MapleTree<Box<Tracked>> =
        MapleTree::from_sorted((0..50u64).map(|i| (i * 2..=i * 2, Box::new(Tracked::new(i))))).unwrap();
    let nodes = fault::live();
    let r = catch_unwind(AssertUnwindSafe(|| {
        t.try_dup_map(|r, x| {
            assert!(*r.start() < 60, "stop");
            Box::new(Tracked::new(x.0 + 100))
        })
    }));
    assert!(r.is_err());
    assert_eq!(live(), 50, "made values dropped, source values kept");
    assert_eq!(fault::live(), nodes, "copy's nodes freed");
    t.validate().unwrap();
    drop(t);
    assert_eq!(live(), 0);
}

#[test]
fn every_allocation_point_of_dup_fails_cleanly() {
    let sizes: &[u64] = if cfg!(miri) { &[40] } else { &[1, 20, 300, 3000] };
    for &n in sizes {
        let t = grow(n, true);
        let before = entries(&t);
        let nodes = t.stats().leaves + t.stats().internal;
        let live = fault::live();
        for k in 1..=nodes as u64 + 1 {
            fault::fail_nth_alloc(k);
            let r = t.try_dup();
            let armed = fault::armed();
            fault::fail_nth_alloc(0);
            match r {
                Err(e) => {
                    assert!(!armed);
                    assert_eq!(Error::from(e), Error::NoMemory);
                    assert_eq!(fault::live(), live, "n={n} k={k}: partial copy leaked");
                }
                Ok(c) => {
                    assert!(armed, "n={n}: dup made more than {nodes} allocations");
                    assert_eq!(k as usize, nodes + 1);
                    assert_eq!(entries(&c), before);
                }
            }
            t.validate().unwrap();
            assert_eq!(entries(&t), before, "source changed");
        }
    }
}

/// A copy keeps `alloc_cyclic`'s pending wrap whatever the tree holds, an
/// empty tree included (the wrap is tree state, not node state).
#[test]
fn dup_keeps_a_pending_cyclic_wrap() {
    for keep_one in [false, true] {
        let mut t: MapleTree<U63> = MapleTree::with_gaps();
        let mut next = 0;
        if keep_one {
            t.insert(5, U63::new(5).unwrap()).unwrap();
        }
        assert_eq!(t.alloc_cyclic(u64::MAX..=u64::MAX, &mut next, U63::new(1).unwrap()).unwrap(), (u64::MAX, false));
        assert_eq!(next, 0);
        t.erase(u64::MAX);
        let mut copy = t.try_dup().unwrap();
        let mapped = t.try_dup_map(|_, v| v).unwrap();
        let (mut n1, mut n2, mut n3) = (next, next, next);
        let want = (0, true);
        for (name, tree, n) in [("source", &mut t, &mut n1), ("copy", &mut copy, &mut n2)] {
            assert_eq!(
                tree.alloc_cyclic(0..=18, n, U63::new(2).unwrap()).unwrap(),
                want,
                "{name}, keep_one={keep_one}"
            );
        }
        let mut mapped = mapped;
        assert_eq!(mapped.alloc_cyclic(0..=18, &mut n3, U63::new(2).unwrap()).unwrap(), want, "mapped copy");
    }
}

/// A map function that fails part way (fork's VMA copy running out of
/// memory): at every possible failure point the values made so far are
/// dropped, the copy's nodes freed, the source untouched, and the error
/// names the entry that failed.
#[test]
fn dup_map_fallible_fails_cleanly_at_every_entry() {
    use maple_tree::DupError;
    let n: u64 = if cfg!(miri) { 30 } else { 400 };
    let mut t: MapleTree<Box<Tracked>> = MapleTree::with_gaps();
    for i in 0..n {
        t.insert_range(i * 4..=i * 4 + 2, Box::new(Tracked::new(i))).unwrap();
    }
    // A reserved range is no value: the map function never sees it.
    t.reserve_range(n * 4..=n * 4 + 9).unwrap();
    let before: Vec<_> = t.iter().map(|(r, x)| (r, x.0)).collect();
    let nodes = fault::live();
    for fail_at in 0..n {
        let mut calls = 0;
        let r = t.try_dup_map_fallible(|_, x| {
            calls += 1;
            if x.0 == fail_at {
                Err("copy failed")
            } else {
                Ok(Box::new(Tracked::new(x.0 + 1000)))
            }
        });
        assert_eq!(r.unwrap_err(), DupError::Map { index: fail_at * 4, error: "copy failed" });
        assert_eq!(calls, fail_at + 1, "the copy stops at the failure");
        assert_eq!(live(), n as i64, "made values dropped, source values kept (fail at {fail_at})");
        assert_eq!(fault::live(), nodes, "copy's nodes freed (fail at {fail_at})");
    }
    t.validate().unwrap();
    assert_eq!(t.iter().map(|(r, x)| (r, x.0)).collect::<Vec<_>>(), before);
    // And a node allocation failing while copying the structure.
    fault::fail_nth_alloc(1);
    let r = t.try_dup_map_fallible(|_, x| Ok::<_, ()>(Box::new(Tracked::new(x.0))));
    fault::fail_nth_alloc(0);
    assert!(matches!(r, Err(DupError::Alloc(_))));
    assert_eq!((live(), fault::live()), (n as i64, nodes));
    let ok = t.try_dup_map_fallible(|_, x| Ok::<_, ()>(Box::new(Tracked::new(x.0)))).unwrap();
    ok.validate().unwrap();
    assert!(ok.is_reserved(n * 4 + 5), "reserved ranges are copied");
    assert_eq!(ok.len(), n as usize);
    drop(ok);
    drop(t);
    assert_eq!(live(), 0);
}

/// `try_dup_share_or_map` shares the values the map function keeps (one
/// more reference, no allocation) and replaces the others; a failure part
/// way releases both kinds and leaves the source as it was.
#[test]
fn dup_share_or_map_shares_and_replaces() {
    use std::sync::Arc;
    let n = if cfg!(miri) { 20 } else { 300u64 };
    let t: MapleTree<Arc<u64>> = MapleTree::from_sorted((0..n).map(|i| (i * 3..=i * 3 + 1, Arc::new(i)))).unwrap();
    let copy =
        t.try_dup_share_or_map(|_, v| Ok::<_, ()>(if *v % 2 == 0 { None } else { Some(Arc::new(*v + 1000)) })).unwrap();
    copy.validate().unwrap();
    for i in 0..n {
        let (orig, new) = (t.load(i * 3).unwrap(), copy.load(i * 3).unwrap());
        if i % 2 == 0 {
            assert!(std::ptr::eq(orig, new), "kept values are shared");
        } else {
            assert_eq!(*new, i + 1000);
        }
    }
    let shared = t.get_range_cloned(0).unwrap().1;
    assert_eq!(Arc::strong_count(&shared), 3, "source, copy and our clone");
    drop(shared);
    drop(copy);
    let nodes = fault::live();
    let r = t.try_dup_share_or_map(|r, v| {
        if *r.start() < n * 3 / 2 {
            Ok(if *v % 2 == 0 { None } else { Some(Arc::new(0)) })
        } else {
            Err("stop")
        }
    });
    assert!(matches!(r, Err(maple_tree::DupError::Map { error: "stop", .. })));
    assert_eq!(fault::live(), nodes, "nodes freed");
    for (_, v) in t.range_cloned(..) {
        assert_eq!(Arc::strong_count(&v), 2, "every shared reference released");
    }
}
