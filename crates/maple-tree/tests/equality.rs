//! `==`, `Hash` and the ordering of trees against the model: equal
//! exactly when they hold the same entries and reserve the same ranges,
//! whatever their history and gap tracking; equal trees hash alike; trees
//! order as their occupied ranges do.

mod common;

use common::{shuffle::splitmix64, Model, RESERVED};
use maple_tree::{MapleTree, U63};

/// One random write (a store, a removal or a reservation) over a small
/// space, to a tree and its model.
fn random_write(t: &mut MapleTree<U63>, m: &mut Model, st: &mut u64) {
    let f = splitmix64(st) % 40;
    let l = f + splitmix64(st) % 6;
    match splitmix64(st) % 5 {
        0 => {
            t.remove_range(f..=l).unwrap();
            m.clear(f, l);
        }
        1 if m.is_free(f, l) => {
            t.reserve_range(f..=l).unwrap();
            m.store(f, l, RESERVED);
        }
        _ => {
            let v = splitmix64(st) % 2;
            t.store_range(f..=l, U63::new(v).unwrap()).unwrap();
            m.store(f, l, v);
        }
    }
}

/// `==` and `Hash` against the model: a tree made by random writes, and a
/// second one holding its content rebuilt in a shuffled order (the other
/// gap-tracking kind), half the time then changed by one more random
/// write: equal exactly when their models are, and equal trees hash alike.
#[test]
fn equality_follows_the_content() {
    use std::hash::{BuildHasher, RandomState};
    let hasher = RandomState::new();
    let rounds = if cfg!(miri) { 6 } else { 300 };
    let mut st = 23u64;
    let (mut equal, mut unequal) = (0, 0);
    for round in 0..rounds {
        let (mut a, mut ma): (MapleTree<U63>, _) =
            (if round % 2 == 0 { MapleTree::new() } else { MapleTree::with_gaps() }, Model::default());
        for _ in 0..(splitmix64(&mut st) % 12) {
            random_write(&mut a, &mut ma, &mut st);
        }
        let mut b: MapleTree<U63> = if round % 2 == 0 { MapleTree::with_gaps() } else { MapleTree::new() };
        let mut mb = Model::default();
        let mut items: Vec<(u64, u64, u64)> = ma.entries();
        for i in (1..items.len()).rev() {
            items.swap(i, (splitmix64(&mut st) % (i as u64 + 1)) as usize);
        }
        for (f, l, v) in items {
            if v == RESERVED {
                b.reserve_range(f..=l).unwrap();
            } else {
                b.insert_range(f..=l, U63::new(v).unwrap()).unwrap();
            }
            mb.store(f, l, v);
        }
        if splitmix64(&mut st) % 2 == 0 {
            random_write(&mut b, &mut mb, &mut st);
        }
        assert_eq!(a == b, ma == mb, "{a:?} against {b:?}");
        // The order is the model's occupied ranges', lexicographically (a
        // reserved range before a value over the same bounds).
        let seq = |m: &Model| -> Vec<(u64, u64, Option<u64>)> {
            m.entries().into_iter().map(|(f, l, v)| (f, l, (v != RESERVED).then_some(v))).collect()
        };
        assert_eq!(a.cmp(&b), seq(&ma).cmp(&seq(&mb)), "{a:?} against {b:?}");
        assert_eq!(a.partial_cmp(&b), Some(a.cmp(&b)));
        assert!(a == a && b == b);
        if ma == mb {
            equal += 1;
            assert_eq!(hasher.hash_one(&a), hasher.hash_one(&b));
        } else {
            unequal += 1;
        }
    }
    // A reserved range and an empty one with the same bounds swap places:
    // same ranges, same count, no values between them differ.
    let swapped = |reserve: u64| {
        let mut t: MapleTree<U63> = MapleTree::new();
        for i in 0..4 {
            t.store_range(i * 10 + 5..=i * 10 + 9, U63::new(i).unwrap()).unwrap();
        }
        t.reserve_range(reserve..=reserve + 4).unwrap();
        t
    };
    assert_ne!(swapped(0), swapped(10));
    // The reserved range at 0 comes before the value at 5.
    assert!(swapped(0) < swapped(10));
    assert_eq!(swapped(10), swapped(10));
    // Both answers were put to the test.
    assert!(cfg!(miri) || (equal > 50 && unequal > 50), "{equal} equal, {unequal} unequal pairs");
}

/// Values that borrow from the caller (not `'static`) compare, hash,
/// print and merge on their own `PartialEq`, `Hash` and `Debug`.
#[test]
fn borrowed_values_compare_hash_print_and_merge() {
    use std::{collections::hash_map::DefaultHasher, hash::Hasher, sync::Arc};
    let text = String::from("alpha beta");
    let (alpha, beta) = (&text[..5], &text[6..]);
    #[derive(Debug, PartialEq, Eq, Hash, PartialOrd)]
    struct Word<'s>(&'s str);
    fn build<'s>(order: &[(u64, &'s str)]) -> MapleTree<Arc<Word<'s>>> {
        let mut t = MapleTree::new();
        for &(at, s) in order {
            t.store_range_merging(at..=at + 9, Arc::new(Word(s))).unwrap();
        }
        t
    }
    let a = build(&[(0, alpha), (10, alpha), (20, beta)]);
    let b = build(&[(20, beta), (10, alpha), (0, alpha)]);
    // The two alphas joined, whatever the order.
    assert_eq!(a.len(), 2);
    assert_eq!(a, b);
    let hash = |t: &MapleTree<Arc<Word<'_>>>| {
        let mut h = DefaultHasher::new();
        std::hash::Hash::hash(t, &mut h);
        h.finish()
    };
    assert_eq!(hash(&a), hash(&b));
    assert_eq!(format!("{a:?}"), r#"{0..=19: Word("alpha"), 20..=29: Word("beta")}"#);
    assert!(a <= b);
}
