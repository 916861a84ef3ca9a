//! The `rangemap` crate itself as the oracle, written as a user switching
//! over would write it: the same random calls on a
//! `rangemap::RangeInclusiveMap<u64, u32>` and on a `MapleTree<u32>`
//! (`insert` ↔ `store_range_merging`, `remove` ↔ `remove_range`), every
//! query compared after each call, in both tree flavours, with keys near
//! 0 and near `u64::MAX`.

mod common;

use common::words;
use maple_tree::MapleTree;
use rangemap::RangeInclusiveMap;

/// Random calls in a window of `span` keys from `base` (so near either
/// end of the key space).
fn against_rangemap(base: u64, span: u64, gaps: bool) {
    let what = format!("base {base:#x}, gaps {gaps}");
    let mut theirs: RangeInclusiveMap<u64, u32> = RangeInclusiveMap::new();
    let mut ours: MapleTree<u32> = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
    let mut next = words(0x2545_f491_4f6c_dd1d ^ base ^ u64::from(gaps));
    let steps = if cfg!(miri) { 30 } else { 4_000 };
    let top = base + (span - 1);
    for step in 0..steps {
        let first = base + next() % span;
        let last = first.saturating_add(next() % 24).min(top);
        // Few values, so that equal neighbours meet and join.
        let v = (next() % 3) as u32;
        if next() % 4 == 0 {
            theirs.remove(first..=last);
            ours.remove_range(first..=last).unwrap();
        } else {
            theirs.insert(first..=last, v);
            ours.store_range_merging(first..=last, v).unwrap();
        }
        ours.validate().unwrap_or_else(|e| panic!("{what} step {step}: {e:?}"));
        // The same entries: rangemap keeps equal neighbours joined, as
        // merging stores do.
        let t: Vec<_> = theirs.iter().map(|(r, v)| (r.clone(), *v)).collect();
        let o: Vec<_> = ours.iter().collect();
        assert_eq!(o, t, "{what} step {step}");
        assert_eq!(ours.len(), theirs.len(), "{what} step {step}");
        assert_eq!(ours.first(), theirs.first_range_value().map(|(r, v)| (r.clone(), *v)), "{what} step {step}");
        assert_eq!(ours.last(), theirs.last_range_value().map(|(r, v)| (r.clone(), *v)), "{what} step {step}");
        // Point queries, windows and gaps around the call.
        let lo = first.saturating_sub(8).max(base);
        let hi = last.saturating_add(8).min(top);
        for k in lo..=hi {
            assert_eq!(ours.load(k), theirs.get(&k).copied(), "{what} step {step} key {k}");
            assert_eq!(ours.get_range(k), theirs.get_key_value(&k).map(|(r, v)| (r.clone(), *v)), "{what} step {step}");
            assert_eq!(ours.contains(k), theirs.contains_key(&k), "{what} step {step} key {k}");
        }
        let window = lo..=hi;
        let o: Vec<_> = ours.range(window.clone()).collect();
        let t: Vec<_> = theirs.overlapping(&window).map(|(r, v)| (r.clone(), *v)).collect();
        assert_eq!(o, t, "{what} step {step}: overlapping {window:?}");
        assert_eq!(ours.range(window.clone()).next().is_some(), theirs.overlaps(&window), "{what} step {step}");
        let o: Vec<_> = ours.gaps(window.clone()).collect();
        let t: Vec<_> = theirs.gaps(&window).collect();
        assert_eq!(o, t, "{what} step {step}: gaps {window:?}");
    }
}

#[test]
fn keys_near_zero() {
    for gaps in [false, true] {
        against_rangemap(0, 3_000, gaps);
    }
}

#[test]
fn keys_near_the_top() {
    for gaps in [false, true] {
        against_rangemap(u64::MAX - 2_999, 3_000, gaps);
    }
}

/// Collecting: `rangemap`'s `collect` joins equal neighbours as it
/// inserts, as `from_iter_merging` does; the same random pairs (touching,
/// overlapping and apart, in any order) give the same entries.
#[test]
fn collecting_joins_as_rangemap_does() {
    let mut next = words(0x9e37_79b9_7f4a_7c15);
    let rounds = if cfg!(miri) { 5 } else { 300 };
    for round in 0..rounds {
        let pairs: Vec<_> = (0..next() % 60)
            .map(|_| {
                let first = next() % 400;
                (first..=first + next() % 20, (next() % 3) as u32)
            })
            .collect();
        let theirs: RangeInclusiveMap<u64, u32> = pairs.iter().cloned().collect();
        let ours = MapleTree::from_iter_merging(pairs.iter().cloned());
        ours.validate().unwrap();
        let t: Vec<_> = theirs.iter().map(|(r, v)| (r.clone(), *v)).collect();
        let o: Vec<_> = ours.iter().collect();
        assert_eq!(o, t, "round {round}: {pairs:?}");
    }
}
