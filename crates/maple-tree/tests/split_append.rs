//! `split_off` and `append` against the per-range model: random trees
//! (values and reserved ranges, near 0 and near `u64::MAX`), split at
//! random points (inside entries, on their edges, at 0 and `u64::MAX`)
//! and joined back; both flavours; `validate()` on every tree made.

mod common;

use common::{check, words, Model, RESERVED};
use maple_tree::{MapleTree, U63};

/// A random tree and its model: stores and reservations in a window
/// from `base`.
fn random_tree(next: &mut impl FnMut() -> u64, base: u64, gaps: bool) -> (MapleTree<U63>, Model) {
    let mut t: MapleTree<U63> = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
    let mut m = Model::default();
    for i in 0..next() % 60 {
        let first = base.saturating_add(next() % 1_000);
        let last = first.saturating_add(next() % 30);
        if next() % 8 == 0 {
            if m.is_free(first, last) {
                t.reserve_range(first..=last).unwrap();
                m.store(first, last, RESERVED);
            }
        } else {
            t.store_range(first..=last, U63::new_truncate(i)).unwrap();
            m.store(first, last, i);
        }
    }
    (t, m)
}

/// The model's reserved ranges, each one range of the tree.
fn reserved(t: &MapleTree<U63>, m: &Model, what: &str) {
    for (s, e, v) in m.entries() {
        if v == RESERVED {
            assert!(t.is_reserved(s) && t.is_reserved(e), "{what}: reserved {s}..={e}");
            assert_eq!(t.range_at(s).0, s..=e, "{what}: reserved {s}..={e}");
        }
    }
}

#[test]
fn split_off_keeps_the_front_and_moves_the_back() {
    let mut next = words(0x0051_1700);
    let rounds = if cfg!(miri) { 4 } else { 600 };
    for round in 0..rounds {
        for (base, gaps) in [(0, false), (0, true), (u64::MAX - 1_029, round % 2 == 0)] {
            let (mut t, m) = random_tree(&mut next, base, gaps);
            let at = match next() % 6 {
                0 => 0,
                1 => u64::MAX,
                // An entry's first or last index, or just past it.
                2 | 3 => m.entries().get((next() % 60) as usize).map_or(base, |e| {
                    if next() % 2 == 0 {
                        e.0
                    } else {
                        e.1.saturating_add(1)
                    }
                }),
                _ => base.saturating_add(next() % 1_040),
            };
            let what = format!("round {round}, base {base:#x}, gaps {gaps}, at {at}");
            let right = t.split_off(at);
            assert_eq!(right.tracks_gaps(), gaps, "{what}: flavour");
            let (mut low, mut high) = (m.clone(), m.clone());
            if at > 0 {
                high.clear(0, at - 1);
            }
            low.clear(at, u64::MAX);
            check(&t, &low, &format!("{what}: the front"));
            check(&right, &high, &format!("{what}: the back"));
            reserved(&t, &low, &what);
            reserved(&right, &high, &what);
        }
    }
}

#[test]
fn append_stores_the_other_tree_over_this_one() {
    let mut next = words(0x00a9_9e4d);
    let rounds = if cfg!(miri) { 4 } else { 600 };
    for round in 0..rounds {
        let gaps = round % 2 == 0;
        let base = if round % 3 == 0 { u64::MAX - 1_029 } else { 0 };
        let (mut a, mut ma) = random_tree(&mut next, base, gaps);
        let (mut b, mb) = random_tree(&mut next, base, !gaps);
        let what = format!("round {round}");
        a.append(&mut b);
        assert!(b.is_empty(), "{what}: the other tree is left empty");
        b.validate().unwrap();
        for (s, e, v) in mb.entries() {
            ma.store(s, e, v);
        }
        check(&a, &ma, &what);
        reserved(&a, &ma, &what);
    }
}

#[test]
fn splitting_and_appending_give_the_tree_back() {
    let mut next = words(0x5e77);
    for round in 0..if cfg!(miri) { 3 } else { 300 } {
        let (mut t, m) = random_tree(&mut next, 0, round % 2 == 0);
        let at = next() % 1_040;
        let mut back = t.split_off(at);
        t.append(&mut back);
        // The same indices and values; an entry the split cut stays two.
        let mut want = m.clone();
        if let Some((s, e, v)) = m.get_any(at).filter(|&(s, _, _)| s < at) {
            want.store(s, at - 1, v);
            want.store(at, e, v);
        }
        check(&t, &want, &format!("round {round}, at {at}"));
    }
}
