//! The entry iterators from both ends (`next_back`, `.rev()`, the two ends
//! mixed), differentially against the model: on trees of one leaf up to
//! several levels, built by random stores and by `from_sorted`, with
//! reserved ranges and empty ones between entries, over random windows,
//! each end taking a random share of the entries and then `fold`, `rev`,
//! `count` or `last` taking the rest. Every entry must come exactly once,
//! from the end that asked for it, in that end's order. `iter_mut` from
//! both ends must reach every value once (Miri, which runs this file, sees
//! two `&mut` to one value).

mod common;

use std::{ops::RangeInclusive, sync::Arc};

use common::{shuffle::splitmix64, Model, RESERVED};
use maple_tree::{MapleTree, U63};

type Entry = (u64, u64, u64);

/// A tree and its model: `n` ranges stored in a random order (`sorted`:
/// built by `from_sorted` instead), some of them reserved, with random
/// lengths and empty ranges between most of them.
fn tree(n: u64, seed: u64, sorted: bool, gaps: bool) -> (MapleTree<U63>, Model) {
    let mut st = seed;
    let mut ranges = Vec::new();
    let mut at = splitmix64(&mut st) % 50;
    for i in 0..n {
        let len = splitmix64(&mut st) % 12;
        ranges.push((at, at + len, i));
        // Adjacent to the next one about a third of the time.
        at += len + 1 + (splitmix64(&mut st) % 3).saturating_sub(1) * (splitmix64(&mut st) % 20);
    }
    let mut m = Model::default();
    let t = if sorted {
        for &(f, l, v) in &ranges {
            m.store(f, l, v);
        }
        let items = ranges.iter().map(|&(f, l, v)| (f..=l, U63::new(v).unwrap()));
        if gaps { MapleTree::from_sorted_with_gaps(items) } else { MapleTree::from_sorted(items) }.unwrap()
    } else {
        let mut t = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, (splitmix64(&mut st) % (i as u64 + 1)) as usize);
        }
        for k in order {
            let (f, l, v) = ranges[k];
            if splitmix64(&mut st) % 8 == 0 {
                t.reserve_range(f..=l).unwrap();
                m.store(f, l, RESERVED);
            } else {
                t.store_range(f..=l, U63::new(v).unwrap()).unwrap();
                m.store(f, l, v);
            }
        }
        t
    };
    t.validate().unwrap();
    (t, m)
}

/// The model's entries overlapping `[a, b]`, ascending.
fn expected(m: &Model, a: u64, b: u64) -> Vec<Entry> {
    m.values().into_iter().filter(|&(f, l, _)| l >= a && f <= b).collect()
}

fn entry((r, v): (RangeInclusive<u64>, U63)) -> Entry {
    (*r.start(), *r.end(), v.get())
}

/// What is left of `it`, by the back's own fold (`.rev()` of the iterator
/// itself, folded: its `rfold`; `collect` would step by `next_back`), in
/// ascending order.
fn rfolded(it: maple_tree::Iter<'_, U63>) -> Vec<Entry> {
    let mut got = it.rev().fold(Vec::new(), |mut acc, e| {
        acc.push(entry(e));
        acc
    });
    got.reverse();
    got
}

/// How the rest is taken once each end has taken its share.
#[derive(Clone, Copy, Debug)]
enum Rest {
    Next,
    Fold,
    Rev,
    /// `.rev()` of the iterator itself (not of `by_ref()`), folded: the
    /// back's `rfold`.
    RevFold,
    Count,
    Last,
}

/// One window `[a, b]` of `t`: `steps` calls, each from the back with
/// probability `back_pct` %, then the rest by `rest`; checks every answer
/// against the model.
fn check(t: &MapleTree<U63>, m: &Model, (a, b): (u64, u64), steps: usize, back_pct: u64, rest: Rest, st: &mut u64) {
    let want = expected(m, a, b);
    let ctx = format!("[{a}, {b}], {steps} steps, {back_pct} % from the back, then {rest:?}");
    let mut it = t.range(a..=b);
    let (mut lo, mut hi) = (0, want.len());
    for _ in 0..steps {
        if splitmix64(st) % 100 < back_pct {
            let got = it.next_back().map(|(r, v)| entry((r, v)));
            let exp = (lo < hi).then(|| want[hi - 1]);
            assert_eq!(got, exp, "next_back, {ctx}");
            hi -= usize::from(exp.is_some());
        } else {
            let got = it.next().map(|(r, v)| entry((r, v)));
            let exp = (lo < hi).then(|| want[lo]);
            assert_eq!(got, exp, "next, {ctx}");
            lo += usize::from(exp.is_some());
        }
    }
    let left = &want[lo..hi];
    match rest {
        Rest::Next => {
            let got: Vec<Entry> = it.by_ref().map(|(r, v)| entry((r, v))).collect::<Vec<_>>();
            assert_eq!(got, left, "{ctx}");
        }
        Rest::Fold => {
            let got = it.fold(Vec::new(), |mut acc, (r, v)| {
                acc.push(entry((r, v)));
                acc
            });
            assert_eq!(got, left, "{ctx}");
            return;
        }
        Rest::Rev => {
            let got: Vec<Entry> = it.by_ref().rev().map(|(r, v)| entry((r, v))).collect();
            let mut want_rev = left.to_vec();
            want_rev.reverse();
            assert_eq!(got, want_rev, "{ctx}");
        }
        Rest::RevFold => {
            assert_eq!(rfolded(it), left, "{ctx}");
            return;
        }
        Rest::Count => {
            assert_eq!(it.count(), left.len(), "{ctx}");
            return;
        }
        Rest::Last => {
            assert_eq!(it.last().map(|(r, v)| entry((r, v))), left.last().copied(), "{ctx}");
            return;
        }
    }
    // Fused, from both ends.
    assert!(it.next().is_none() && it.next_back().is_none() && it.next().is_none(), "{ctx}");
}

#[test]
fn both_ends_against_the_model() {
    let sizes: &[u64] = if cfg!(miri) { &[0, 1, 6, 150] } else { &[0, 1, 6, 40, 300, 3000] };
    let windows = if cfg!(miri) { 4 } else { 150 };
    let rests = [Rest::Next, Rest::Fold, Rest::Rev, Rest::RevFold, Rest::Count, Rest::Last];
    let mut st = 11u64;
    for &n in sizes {
        for (sorted, gaps) in [(false, false), (false, true), (true, false), (true, true)] {
            let (t, m) = tree(n, n * 31 + u64::from(sorted) * 7 + u64::from(gaps), sorted, gaps);
            let top = m.map.last_key_value().map_or(100, |(_, &(l, _))| l + 20);
            for w in 0..windows {
                let (a, b) = match w % 5 {
                    // The whole tree.
                    0 => (0, u64::MAX),
                    // A window that may start and end inside entries.
                    _ => {
                        let (x, y) = (splitmix64(&mut st) % top, splitmix64(&mut st) % top);
                        (x.min(y), x.max(y))
                    }
                };
                let len = expected(&m, a, b).len();
                let steps = (splitmix64(&mut st) % (len as u64 + 3)) as usize;
                let back_pct = [0, 100, 50, 10, 90][(splitmix64(&mut st) % 5) as usize];
                let rest = rests[(splitmix64(&mut st) % rests.len() as u64) as usize];
                check(&t, &m, (a, b), steps, back_pct, rest, &mut st);
            }
            // `.rev()` over everything and every window that starts at 0.
            let all: Vec<Entry> = t.iter().rev().map(|(r, v)| entry((r, v))).collect();
            let mut want = m.values();
            want.reverse();
            assert_eq!(all, want, "rev of {n} ranges");
        }
    }
}

/// Every split of a window's entries between the two ends (the front
/// takes `k`, the back the rest), then both ends asked again in turn: the
/// meeting point falls on every slot, leaf edges included, and neither end
/// may go on past the other once they have met.
#[test]
fn the_ends_meet_anywhere_and_stay_met() {
    let n = if cfg!(miri) { 24 } else { 300 };
    for (sorted, gaps) in [(false, false), (true, true)] {
        let (t, m) = tree(n, 17, sorted, gaps);
        let top = m.map.last_key_value().map_or(0, |(_, &(l, _))| l);
        for (a, b) in [(0, u64::MAX), (top / 5, top - top / 7)] {
            let want = expected(&m, a, b);
            for k in 0..=want.len() {
                let mut it = t.range(a..=b);
                let front: Vec<Entry> = it.by_ref().take(k).map(entry).collect();
                let mut back: Vec<Entry> = (k..want.len()).filter_map(|_| it.next_back().map(entry)).collect();
                back.reverse();
                assert_eq!((&front[..], &back[..]), want.split_at(k), "[{a}, {b}] split at {k}");
                for turn in 0..4 {
                    let more = if turn % 2 == 0 { it.next_back() } else { it.next() };
                    assert!(more.is_none(), "[{a}, {b}] split at {k}: {:?} after the ends met", more.map(entry));
                }
                // The front takes `k`, the back the rest by its own fold
                // (`rfold`), which must stop where the front stands.
                let mut it = t.range(a..=b);
                let front: Vec<Entry> = it.by_ref().take(k).map(entry).collect();
                let back = rfolded(it);
                assert_eq!((&front[..], &back[..]), want.split_at(k), "[{a}, {b}] split at {k}, then rfold");
            }
        }
    }
}

/// The back end first, on an iterator whose front has not walked yet
/// (the front walks on its first call): the back takes `k` entries, then
/// the front the rest, then both ends are asked again. Windows that start
/// inside an entry, inside an empty range, in the middle of a leaf and at
/// index 0 (with entries at `0..=0` and from 1: the back's last entry
/// starts at 0 or 1), on trees of one leaf and of several levels; and the
/// predecessor idiom `range(..=k).next_back()` at every index near an
/// entry.
#[test]
fn the_back_goes_first_anywhere() {
    let n = if cfg!(miri) { 14 } else { 300 };
    for (sorted, gaps) in [(false, false), (true, true)] {
        // (Under Miri the one-leaf trees only for the plain kind.)
        for small in [false, true].into_iter().filter(|&s| !cfg!(miri) || !s || !gaps) {
            let (mut t, mut m) = tree(if small { 5 } else { n }, 23, sorted, gaps);
            // Entries at 0 and from 1, touching.
            for (f, l, v) in [(0, 0, 9001), (1, 2, 9002)] {
                t.store_range(f..=l, U63::new(v).unwrap()).unwrap();
                m.store(f, l, v);
            }
            let top = m.map.last_key_value().map_or(0, |(_, &(l, _))| l);
            let mut windows = vec![(0, u64::MAX), (0, top / 2), (1, top), (2, 2), (3, top - top / 7)];
            // Starting inside entries and inside empty ranges.
            let values = m.values();
            for &(f, l, _) in values.iter().skip(values.len() / 3).take(if cfg!(miri) { 1 } else { 3 }) {
                windows.extend([(f + (l - f) / 2, top), (l + 1, top - 1), (f, l)]);
            }
            for (a, b) in windows {
                let want = expected(&m, a, b);
                // (`k` one past the entries: the back is asked once more
                // before the front walks, and must have nothing.)
                for k in 0..=want.len() + 1 {
                    let mut it = t.range(a..=b);
                    let mut back: Vec<Entry> = (0..k).filter_map(|_| it.next_back().map(entry)).collect();
                    back.reverse();
                    let front: Vec<Entry> = it.by_ref().map(entry).collect();
                    let split = want.len().saturating_sub(k);
                    assert_eq!((&front[..], &back[..]), want.split_at(split), "[{a}, {b}], back took {k}");
                    for turn in 0..4 {
                        let more = if turn % 2 == 0 { it.next_back() } else { it.next() };
                        assert!(more.is_none(), "[{a}, {b}], back took {k}: {:?} after", more.map(entry));
                    }
                    // The same split, the rest by `fold` (which walks the
                    // front first).
                    let mut it = t.range(a..=b);
                    for _ in 0..k {
                        it.next_back();
                    }
                    let folded = it.fold(Vec::new(), |mut acc, e| {
                        acc.push(entry(e));
                        acc
                    });
                    assert_eq!(folded, &want[..split], "[{a}, {b}], back took {k}, then fold");
                    // And by the back's own fold (`rfold`), the front not
                    // walked: it must stop at the window's first entry.
                    // (Under Miri for every other split.)
                    if cfg!(miri) && k % 2 == 1 {
                        continue;
                    }
                    let mut it = t.range(a..=b);
                    for _ in 0..k {
                        it.next_back();
                    }
                    assert_eq!(rfolded(it), &want[..split], "[{a}, {b}], back took {k}, then rfold");
                }
            }
            let step = if cfg!(miri) { 11 } else { 1 };
            for k in (0..top + 2).step_by(step) {
                let got = t.range(..=k).next_back().map(entry);
                assert_eq!(got, expected(&m, 0, k).last().copied(), "range(..={k}).next_back()");
            }
        }
    }
}

#[test]
fn an_invalid_window_yields_nothing_from_either_end() {
    let (t, _) = tree(50, 3, false, false);
    #[allow(clippy::reversed_empty_ranges)]
    let mut it = t.range(40..10);
    assert!(it.next_back().is_none());
    assert!(it.next().is_none());
    let empty: MapleTree<U63> = MapleTree::new();
    assert!(empty.iter().next_back().is_none());
    assert_eq!(empty.iter().rev().count(), 0);
}

#[test]
fn iter_mut_from_both_ends_reaches_each_value_once() {
    let n = if cfg!(miri) { 60 } else { 2000 };
    let mut st = 5u64;
    for pct in [0, 30, 50, 100] {
        let mut t: MapleTree<Box<u64>> = MapleTree::new();
        for i in 0..n {
            t.store_range(i * 10..=i * 10 + 3, Box::new(i)).unwrap();
        }
        let mut it = t.iter_mut();
        loop {
            let got = if splitmix64(&mut st) % 100 < pct { it.next_back() } else { it.next() };
            let Some((r, v)) = got else { break };
            assert_eq!(*r.start(), *v * 10);
            *v += 1_000_000;
        }
        assert!(it.next_back().is_none());
        let values: Vec<u64> = t.iter().map(|(_, v)| *v).collect();
        assert_eq!(values, (0..n).map(|i| i + 1_000_000).collect::<Vec<_>>(), "{pct} % from the back");
        // A window's values by the back's own fold (`rfold`), after a
        // step from each end: each of the rest once, from the top down.
        let (a, b) = (n * 3, n * 7 + 5);
        let mut it = t.range_mut(a..=b);
        let first = it.next().map(|(r, _)| *r.start());
        let last = it.next_back().map(|(r, _)| *r.start());
        let seen = it.rev().fold(Vec::new(), |mut seen, (r, v)| {
            assert_eq!(*r.start(), (*v - 1_000_000) * 10);
            *v += 1_000_000;
            seen.push(*r.start());
            seen
        });
        let want: Vec<u64> = (0..n).map(|i| i * 10).filter(|&s| s + 3 >= a && s <= b).collect();
        assert_eq!(first, want.first().copied());
        assert_eq!(last, want.last().copied());
        assert_eq!(seen, want[1..want.len() - 1].iter().rev().copied().collect::<Vec<_>>(), "{pct} %");
        let twice = t.iter().filter(|(_, v)| **v >= 2_000_000).count();
        assert_eq!(twice, want.len() - 2, "{pct} %");
    }
}

#[test]
fn range_cloned_from_the_back() {
    let mut t: MapleTree<Arc<u64>> = MapleTree::new();
    for i in 0..100u64 {
        t.store_range(i * 4..=i * 4 + 1, Arc::new(i)).unwrap();
    }
    let last: Vec<u64> = t.range_cloned(..=200).rev().take(3).map(|(_, v)| *v).collect();
    assert_eq!(last, [50, 49, 48]);
    let (r, v) = t.range_cloned(..).next_back().unwrap();
    assert_eq!((r, *v, Arc::strong_count(&v)), (396..=397, 99, 2));
}

/// The ends of the key space: entries at `0..=0` (or starting at 0) and
/// ending at `u64::MAX`, where an index past what an end handed out would
/// leave `u64`. The front takes `k` entries, the back the rest, then both
/// are asked again; and the other way round (the back first); on a tree
/// of one leaf and on one of several levels, with and without an empty
/// range at each end.
#[test]
fn the_ends_meet_at_the_ends_of_the_key_space() {
    // (Under Miri, 20: three leaves, two levels.)
    let ns: &[u64] = if cfg!(miri) { &[3, 20] } else { &[3, 40, 400] };
    for &n in ns {
        for (at_zero, at_max) in [(true, true), (true, false), (false, true), (false, false)] {
            let mut t: MapleTree<U63> = MapleTree::new();
            let mut m = Model::default();
            let lo = u64::from(!at_zero);
            let step = u64::MAX / (n + 2);
            let mut ranges = vec![(lo, lo + 2)];
            ranges.extend((1..n).map(|i| (i * step, i * step + 9)));
            ranges.push((u64::MAX - 5, u64::MAX - u64::from(!at_max)));
            for (i, &(f, l)) in ranges.iter().enumerate() {
                t.store_range(f..=l, U63::new(i as u64).unwrap()).unwrap();
                m.store(f, l, i as u64);
            }
            assert!(n < 20 || t.height() >= 2, "n {n}: several leaves");
            let want = expected(&m, 0, u64::MAX);
            for k in 0..=want.len() {
                // The front first.
                let mut it = t.iter();
                let front: Vec<Entry> = it.by_ref().take(k).map(entry).collect();
                let mut back: Vec<Entry> = std::iter::from_fn(|| it.next_back().map(entry)).collect();
                back.reverse();
                assert_eq!((&front[..], &back[..]), want.split_at(k), "n {n}, front first, split at {k}");
                assert!(it.next().is_none() && it.next_back().is_none(), "n {n}: more after the ends met");
                // The back first.
                let mut it = t.iter();
                let mut back: Vec<Entry> = it.by_ref().rev().take(want.len() - k).map(entry).collect();
                back.reverse();
                let front: Vec<Entry> = it.by_ref().map(entry).collect();
                assert_eq!((&front[..], &back[..]), want.split_at(k), "n {n}, back first, split at {k}");
                assert!(it.next_back().is_none() && it.next().is_none(), "n {n}: more after the ends met");
            }
        }
    }
}
