//! Fault injection: every allocating operation is run with its N-th node
//! allocation failing, for every N it reaches. Each failure must report
//! `NoMemory`, leave the tree valid and exactly as before, and leak no node;
//! then the operation succeeds without the hook.

mod common;

use common::*;
use maple_tree::{fault, Error, FreshNodes, InPlace, MapleTree, Moved, Writes, U63};

fn shifted(old: U63, m: Moved) -> U63 {
    U63::new_truncate(old.get() + m.shift())
}

type Op<W> = dyn Fn(&mut MapleTree<U63, u64, W>) -> Result<(), Error>;

fn build<W: Writes>(n: u64, gaps: bool) -> MapleTree<U63, u64, W> {
    let mut t = empty::<W>(gaps);
    for i in 0..n {
        t.insert_range(i * 10..=i * 10 + 5, v(i)).unwrap();
    }
    t
}

fn exercise<W: Writes>(name: &str, setup: &dyn Fn() -> MapleTree<U63, u64, W>, op: &Op<W>) -> u64 {
    // What the operation leaves without injection.
    let want = {
        let mut t = setup();
        op(&mut t).unwrap_or_else(|e| panic!("{name}: failed without injection: {e}"));
        entries(&t)
    };
    let mut n = 1;
    loop {
        let mut t = setup();
        let before = entries(&t);
        let height = t.height();
        let live = fault::live();
        fault::fail_nth_alloc(n);
        let r = op(&mut t);
        if fault::armed() {
            // The operation made fewer than n allocations: it must have succeeded.
            fault::fail_nth_alloc(0);
            r.unwrap_or_else(|e| panic!("{name}: failed without injection: {e}"));
            t.validate().unwrap();
            return n - 1;
        }
        assert_eq!(r, Err(Error::NoMemory), "{name}: allocation {n} failed silently");
        t.validate().unwrap_or_else(|e| panic!("{name}: alloc {n}: {e}"));
        assert_eq!(entries(&t), before, "{name}: alloc {n}: contents changed");
        assert_eq!(t.height(), height, "{name}: alloc {n}: height changed");
        assert_eq!(fault::live(), live, "{name}: alloc {n}: nodes leaked");
        // The tree goes on as if nothing had been tried (the walk it keeps
        // from its last write included): the operation now succeeds on it
        // and leaves what it leaves on a fresh copy.
        op(&mut t).unwrap_or_else(|e| panic!("{name}: alloc {n}: the retry failed: {e}"));
        t.validate().unwrap_or_else(|e| panic!("{name}: alloc {n}: after the retry: {e}"));
        assert_eq!(entries(&t), want, "{name}: alloc {n}: the retry left other contents");
        drop(t);
        n += 1;
    }
}

#[test]
fn every_allocation_point_of_every_write() {
    let start_live = fault::live();
    let mut points = 0;
    let flavours: &[bool] = if cfg!(miri) { &[true] } else { &[false, true] };
    for &gaps in flavours {
        points += every_point::<InPlace>(gaps);
        points += every_point::<FreshNodes>(gaps);
    }
    assert!(points > if cfg!(miri) { 5 } else { 100 }, "only {points} allocation points reached");
    assert_eq!(fault::live(), start_live, "nodes leaked overall");
}

/// Every allocation point of every write on trees written as `W` says.
fn every_point<W: Writes>(gaps: bool) -> u64 {
    let mut points = 0;
    for n in if cfg!(miri) { &[17u64][..] } else { &[0u64, 1, 15, 16, 17, 100, 170, 700, 2000][..] } {
        let n = *n;
        let setup = move || build::<W>(n, gaps);
        let ops: Vec<(&str, Box<Op<W>>)> = vec![
            ("insert", Box::new(move |t| t.insert_range(n / 2 * 10 + 7..=n / 2 * 10 + 8, v(1)).map_err(|e| e.cause))),
            ("insert-end", Box::new(move |t| t.insert(n * 10 + 100, v(1)).map_err(|e| e.cause))),
            (
                "store-split",
                Box::new(move |t| t.store_range(n / 2 * 10 + 1..=n / 2 * 10 + 2, v(1)).map_err(|e| e.cause)),
            ),
            ("spanning-store", Box::new(move |t| t.store_range(3..=n * 9 + 3, v(1)).map_err(|e| e.cause))),
            ("spanning-clear", Box::new(move |t| t.remove_range(n * 2..=n * 7 + 1))),
            (
                "rebase-split",
                Box::new(move |t| {
                    t.store_range_with(n / 2 * 10 + 1..=n / 2 * 10 + 2, v(1), shifted).map_err(|e| e.cause)
                }),
            ),
            (
                "rebase-front",
                Box::new(move |t| {
                    t.store_range_with(n / 2 * 10 + 3..=n / 2 * 10 + 12, v(1), shifted).map_err(|e| e.cause)
                }),
            ),
            ("rebase-clear", Box::new(move |t| t.remove_range_with(n * 2..=n * 7 + 1, shifted))),
            ("erase", Box::new(move |t| t.try_erase(n / 2 * 10).map(|_| ()).map_err(Error::from))),
            ("alloc", Box::new(|t| t.alloc_range(.., 3, v(1)).map(|_| ()).map_err(|e| e.cause))),
            (
                "alloc-rev",
                Box::new(move |t| t.alloc_range_rev(..=n * 10 + 50, 3, v(1)).map(|_| ()).map_err(|e| e.cause)),
            ),
            ("cursor-replace-empty", Box::new(|t| t.cursor_mut(7).replace(v(1)).map(|_| ()).map_err(|e| e.cause))),
            (
                "cursor-store-split",
                Box::new(move |t| {
                    let mut c = t.cursor_mut(n / 2 * 10);
                    c.store_range(n / 2 * 10 + 1..=n / 2 * 10 + 2, v(1)).map_err(|e| e.cause)
                }),
            ),
            (
                "cursor-insert",
                Box::new(move |t| {
                    let mut c = t.cursor_mut(n / 2 * 10);
                    c.insert_range(n / 2 * 10 + 7..=n / 2 * 10 + 8, v(1)).map_err(|e| e.cause)
                }),
            ),
            (
                "cursor-spanning-clear",
                Box::new(move |t| {
                    let mut c = t.cursor_mut(n * 2);
                    c.remove_range(n * 2..=n * 7 + 1)
                }),
            ),
        ];
        for (name, op) in &ops {
            points +=
                exercise(&format!("{name} n={n} gaps={gaps} {}", core::any::type_name::<W>()), &setup, op.as_ref());
        }
    }
    points
}

#[test]
fn erase_sequences_under_injection() {
    // Shrinking a tree by erases exercises rebalancing; fail allocations at
    // every step for a while.
    for gaps in [false, true] {
        let n = if cfg!(miri) { 24 } else { 600 };
        let mut t = build::<FreshNodes>(n, gaps);
        let mut m = Model::default();
        for i in 0..n {
            m.store(i * 10, i * 10 + 5, i);
        }
        for i in (0..n).rev().step_by(3) {
            for n in 1..4 {
                fault::fail_nth_alloc(n);
                match t.try_erase(i * 10) {
                    Ok(x) => {
                        fault::fail_nth_alloc(0);
                        assert_eq!(x.map(U63::get), Some(i));
                        m.erase(i * 10);
                        break;
                    }
                    Err(_) => check(&t, &m, "failed erase"),
                }
            }
            fault::fail_nth_alloc(0);
            if m.get(i * 10).is_some() {
                t.erase(i * 10);
                m.erase(i * 10);
            }
            check(&t, &m, "erase");
        }
    }
}

#[test]
fn bulk_build_under_injection() {
    let live = fault::live();
    for n in 1..200 {
        fault::fail_nth_alloc(n);
        let r: Result<MapleTree<U63>, _> =
            MapleTree::from_sorted_with_gaps((0..if cfg!(miri) { 60 } else { 300u64 }).map(|i| (i * 2..=i * 2, v(i))));
        let armed = fault::armed();
        fault::fail_nth_alloc(0);
        match r {
            Err(e) => {
                assert!(!armed);
                assert_eq!(e, Error::NoMemory);
                assert_eq!(fault::live(), live, "partial build leaked");
            }
            Ok(t) => {
                assert!(armed);
                t.validate().unwrap();
                return;
            }
        }
    }
    panic!("a 300-entry build needs fewer than 200 nodes");
}
