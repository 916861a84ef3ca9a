//! `MapleSet` against `rangemap::RangeInclusiveSet` (the same random
//! inserts and removes, every query compared after each, keys near 0 and
//! near `u64::MAX`), and its set operations against sets of single
//! indices.

mod common;

use std::collections::BTreeSet;

use common::words;
use maple_tree::{Combined, MapleSet};
use rangemap::RangeInclusiveSet;

fn against_rangemap(base: u64, span: u64, gaps: bool) {
    let what = format!("base {base:#x}, gaps {gaps}");
    let mut theirs: RangeInclusiveSet<u64> = RangeInclusiveSet::new();
    let mut ours = if gaps { MapleSet::with_gaps() } else { MapleSet::new() };
    let mut next = words(0x9e37_79b9_7f4a_7c15 ^ base ^ u64::from(gaps));
    let steps = if cfg!(miri) { 30 } else { 3_000 };
    let top = base + (span - 1);
    for step in 0..steps {
        let first = base + next() % span;
        let last = first.saturating_add(next() % 24).min(top);
        if next() % 3 == 0 {
            theirs.remove(first..=last);
            ours.remove(first..=last).unwrap();
        } else {
            theirs.insert(first..=last);
            let joined = ours.insert(first..=last).unwrap();
            assert_eq!(Some(&joined), theirs.get(&first), "{what} step {step}: the joined range");
        }
        ours.as_tree().validate().unwrap_or_else(|e| panic!("{what} step {step}: {e:?}"));
        let t: Vec<_> = theirs.iter().cloned().collect();
        assert_eq!(ours.iter().collect::<Vec<_>>(), t, "{what} step {step}");
        assert_eq!(ours.iter().rev().collect::<Vec<_>>(), t.iter().rev().cloned().collect::<Vec<_>>(), "{what}");
        assert_eq!(ours.len(), theirs.len(), "{what} step {step}");
        assert_eq!(ours.first(), theirs.first().cloned(), "{what} step {step}");
        assert_eq!(ours.last(), theirs.last().cloned(), "{what} step {step}");
        let lo = first.saturating_sub(8).max(base);
        let hi = last.saturating_add(8).min(top);
        for k in lo..=hi {
            assert_eq!(ours.contains(k), theirs.contains(&k), "{what} step {step} key {k}");
            assert_eq!(ours.get(k).as_ref(), theirs.get(&k), "{what} step {step} key {k}");
        }
        let window = lo..=hi;
        let t: Vec<_> = theirs.overlapping(&window).cloned().collect();
        assert_eq!(ours.range(window.clone()).collect::<Vec<_>>(), t, "{what} step {step}: {window:?}");
        assert_eq!(ours.overlaps(window.clone()), theirs.overlaps(&window), "{what} step {step}");
        let t: Vec<_> = theirs.gaps(&window).collect();
        assert_eq!(ours.gaps(window.clone()).collect::<Vec<_>>(), t, "{what} step {step}: gaps");
    }
    // Collected in any order, the same set.
    let mut shuffled: Vec<_> = theirs.iter().cloned().collect();
    shuffled.reverse();
    let collected: MapleSet = shuffled.into_iter().collect();
    assert_eq!(collected, ours, "{what}: collect");
}

#[test]
fn keys_near_zero() {
    for gaps in [false, true] {
        against_rangemap(0, 2_000, gaps);
    }
}

#[test]
fn keys_near_the_top() {
    for gaps in [false, true] {
        against_rangemap(u64::MAX - 1_999, 2_000, gaps);
    }
}

/// The keys a model set may hold: two windows, at either end of the key
/// space, so that ranges reaching 0 and `u64::MAX` are combined too.
const WINDOW: u64 = 200;

fn key(next: &mut impl FnMut() -> u64) -> u64 {
    let k = next() % WINDOW;
    if next() % 2 == 0 {
        k
    } else {
        u64::MAX - k
    }
}

/// A random set: up to a dozen ranges, touching, overlapping or apart;
/// with the same indices one by one.
/// Collecting the same ranges, in reverse, gives the same set.
fn random_set(next: &mut impl FnMut() -> u64) -> (MapleSet, BTreeSet<u64>) {
    let mut set = MapleSet::new();
    let mut points = BTreeSet::new();
    let mut ranges = Vec::new();
    for _ in 0..next() % 12 {
        let first = key(next);
        let last = first.saturating_add(next() % 20).min(if first < WINDOW { WINDOW - 1 } else { u64::MAX });
        set.insert(first..=last).unwrap();
        points.extend(first..=last);
        ranges.push(first..=last);
    }
    let collected: MapleSet = ranges.into_iter().rev().collect();
    assert_eq!(collected, set, "collected, against inserted one by one");
    (set, points)
}

/// The ranges of a set of single indices (runs of consecutive ones).
fn runs(points: &BTreeSet<u64>) -> Vec<std::ops::RangeInclusive<u64>> {
    let mut out: Vec<std::ops::RangeInclusive<u64>> = Vec::new();
    for &p in points {
        match out.last_mut() {
            Some(r) if r.end().checked_add(1) == Some(p) => *r = *r.start()..=p,
            _ => out.push(p..=p),
        }
    }
    out
}

#[test]
fn set_operations_hold_the_indices_they_should() {
    let mut next = words(0x5eed_0f5e);
    let rounds = if cfg!(miri) { 20 } else { 3_000 };
    for round in 0..rounds {
        let (a, pa) = random_set(&mut next);
        let (b, pb) = random_set(&mut next);
        let what = format!("round {round}: {a:?} and {b:?}");
        assert_eq!(a.iter().collect::<Vec<_>>(), runs(&pa), "{what}: the sets themselves");
        let union: BTreeSet<u64> = pa.union(&pb).copied().collect();
        let inter: BTreeSet<u64> = pa.intersection(&pb).copied().collect();
        let diff: BTreeSet<u64> = pa.difference(&pb).copied().collect();
        let sym: BTreeSet<u64> = pa.symmetric_difference(&pb).copied().collect();
        assert_eq!(a.union(&b).collect::<Vec<_>>(), runs(&union), "{what}: union");
        assert_eq!(a.intersection(&b).collect::<Vec<_>>(), runs(&inter), "{what}: intersection");
        assert_eq!(a.difference(&b).collect::<Vec<_>>(), runs(&diff), "{what}: difference");
        assert_eq!(a.symmetric_difference(&b).collect::<Vec<_>>(), runs(&sym), "{what}: symmetric difference");
        for (set, want) in [(&a | &b, &union), (&a & &b, &inter), (&a - &b, &diff), (&a ^ &b, &sym)] {
            set.as_tree().validate().unwrap();
            assert_eq!(set.iter().collect::<Vec<_>>(), runs(want), "{what}: operator");
        }
        // The complement: apart from the set, together the whole space.
        let not_a = !&a;
        not_a.as_tree().validate().unwrap();
        assert!(a.is_disjoint(&not_a), "{what}: complement");
        assert_eq!((&a | &not_a).iter().collect::<Vec<_>>(), [0..=u64::MAX], "{what}: complement");
        assert_eq!(!&not_a, a, "{what}: complement twice");
        assert_eq!(a.is_subset(&b), pa.is_subset(&pb), "{what}: subset");
        assert_eq!(a.is_superset(&b), pa.is_superset(&pb), "{what}: superset");
        assert_eq!(a.is_disjoint(&b), pa.is_disjoint(&pb), "{what}: disjoint");
        // Equal sets are equal however they were built.
        let rebuilt: MapleSet = runs(&pa).into_iter().rev().collect();
        assert_eq!(rebuilt, a, "{what}: rebuilt");
        // Split anywhere and appended back, the same set (the cut range
        // joins again); owned, the same ranges from either end.
        let at = key(&mut next);
        let (mut low, mut high) = (a.clone(), MapleSet::new());
        let mut back = low.split_off(at);
        assert!(low.iter().all(|r| *r.end() < at) && back.iter().all(|r| *r.start() >= at), "{what}: split at {at}");
        high.append(&mut back);
        assert!(back.is_empty());
        low.append(&mut high);
        assert_eq!(low, a, "{what}: split at {at} and appended");
        assert_eq!(a.clone().into_iter().rev().collect::<Vec<_>>(), runs(&pa).into_iter().rev().collect::<Vec<_>>());
    }
}

#[test]
fn combined_takes_any_sorted_ranges() {
    let odd = Combined::new([0..=0, 2..=2, 4..=4], [1..=3], |a, b| a || b);
    assert_eq!(odd.collect::<Vec<_>>(), [0..=4]);
    let top = Combined::new([u64::MAX - 1..=u64::MAX], [0..=u64::MAX], |a, b| b && !a);
    assert_eq!(top.collect::<Vec<_>>(), [0..=u64::MAX - 2]);
    let none = Combined::new(Vec::<std::ops::RangeInclusive<u64>>::new(), Vec::new(), |a, b| a || b);
    assert_eq!(none.count(), 0);
}

#[test]
fn bad_ranges_change_nothing() {
    let mut s = MapleSet::new();
    s.insert(5..=9).unwrap();
    #[allow(clippy::reversed_empty_ranges)]
    {
        assert_eq!(s.insert(9..=5), Err(maple_tree::Error::InvalidRange));
        assert_eq!(s.remove(9..=5), Err(maple_tree::Error::InvalidRange));
    }
    assert_eq!(s.insert(3..3), Err(maple_tree::Error::InvalidRange));
    assert_eq!(s.iter().collect::<Vec<_>>(), [5..=9]);
    // Collecting and extending skip them.
    #[allow(clippy::reversed_empty_ranges)]
    let c: MapleSet = [9..=5, 1..=2].into_iter().collect();
    assert_eq!(format!("{c:?}"), "{1..=2}");
}
