//! Differential tests against the simple model in `common`, with
//! `validate()` after every operation, in both tree flavours and in both
//! write modes (in-place when `&mut` allows it, and fresh nodes always).

mod common;

use common::*;
use maple_tree::{Error, FreshNodes, MapleTree, RangeEntry, Writes, U63};
use proptest::prelude::*;
use rand::{rngs::SmallRng, Rng, SeedableRng};

#[derive(Clone, Debug)]
enum Op {
    Store(u64, u64, u64),
    Insert(u64, u64, u64),
    Clear(u64, u64),
    Erase(u64),
    Load(u64),
    Next(u64),
    Prev(u64),
    Gap(u64, u64, u64),
    RGap(u64, u64, u64),
    Alloc(u64, u64, u64, bool),
    CursorWalk(u64, bool),
    Reserve(u64, u64),
    /// `gaps(a..=b)`, read from the front, the back, or alternately.
    Gaps(u64, u64, u8),
    /// `store_range_merging` (values from a small set, so merges happen).
    StoreMerge(u64, u64, u64),
    /// `entry(f..=l)`: fill it if vacant, else check what occupies it and
    /// take it out if `take`.
    Entry(u64, u64, u64, bool),
    /// `empty_area_aligned` / `empty_area_rev_aligned` (min, max, size,
    /// log2 of the alignment, reverse).
    AlignedGap(u64, u64, u64, u32, bool),
    /// `range(a..=b)`: the entries overlapping it, ascending.
    Range(u64, u64),
    /// `first()` and `last()`.
    Ends,
    /// `retain`: keeps the entries whose value is not `k` modulo 3, and
    /// those starting below the key given.
    Retain(u64, u64),
    /// `insert_merge_touching` (0), `insert_merge_overlapping` (1) or
    /// `insert_merge_touching_or_overlapping` (2).
    MergeInsert(u64, u64, u64, u8),
}

fn apply<W: Writes>(t: &mut MapleTree<U63, u64, W>, m: &mut Model, op: &Op, step: usize) {
    let what = format!("step {step}: {op:x?}");
    match *op {
        Op::Store(f, l, x) => expect_store(t.store_range(f..=l, v(x)).map_err(|e| e.cause), m, (f, l, x), &what),
        Op::Insert(f, l, x) => {
            let r = t.insert_range(f..=l, v(x));
            if f > l {
                assert_eq!(r.unwrap_err().cause, Error::InvalidRange, "{what}");
            } else if m.is_free(f, l) {
                r.unwrap();
                m.store(f, l, x);
            } else {
                let e = r.unwrap_err();
                assert_eq!((e.cause, e.value.get()), (Error::Occupied, x), "{what}");
            }
        }
        Op::Clear(f, l) => expect_clear(t.remove_range(f..=l), m, (f, l), &what),
        Op::Erase(i) => {
            let got = t.erase(i).map(|x| x.get());
            let want = m.erase(i).map(|e| e.2);
            assert_eq!(got, want, "{what}");
        }
        Op::Load(i) => {
            assert_eq!(t.load(i).map(|x| x.get()), m.get(i).map(|e| e.2), "{what}");
            let got = t.get_range(i).map(|(r, x)| (*r.start(), *r.end(), x.get()));
            assert_eq!(got, m.get(i), "{what}");
            // The range holding `i`: an entry (a reserved range without its
            // value), or the free run around it.
            let (r, x) = t.range_at(i);
            let want = m.get_any(i).map_or_else(
                || {
                    let run = m.free_runs().into_iter().find(|&(a, b)| a <= i && i <= b).expect("a free run");
                    (run.0, run.1, None)
                },
                |e| (e.0, e.1, (e.2 != RESERVED).then_some(e.2)),
            );
            assert_eq!((*r.start(), *r.end(), x.map(|x| x.get())), want, "{what}: range_at");
        }
        Op::Next(i) => {
            let got = t.next_after(i).map(|(r, x)| (*r.start(), *r.end(), x.get()));
            assert_eq!(got, m.next(i), "{what}");
            // Bounded: the same entry if it starts within the bound.
            for len in [1, 16, 300] {
                let got = t.first_in(i..=i.saturating_add(len)).map(|(r, x)| (*r.start(), *r.end(), x.get()));
                assert_eq!(got, m.next(i).filter(|e| e.0 <= i.saturating_add(len)), "{what}, bound {len}");
            }
        }
        Op::Prev(i) => {
            let got = t.prev_before(i).map(|(r, x)| (*r.start(), *r.end(), x.get()));
            assert_eq!(got, m.prev(i), "{what}");
        }
        Op::Gap(a, b, s) => assert_eq!(t.empty_area(a..=b, s), m.gap(a, b, s, false), "{what}"),
        Op::RGap(a, b, s) => assert_eq!(t.empty_area_rev(a..=b, s), m.gap(a, b, s, true), "{what}"),
        Op::Alloc(a, b, s, rev) => {
            let want = m.gap(a, b, s, rev);
            let got = if rev { t.alloc_range_rev(a..=b, s, v(s)) } else { t.alloc_range(a..=b, s, v(s)) };
            match want {
                Ok(start) => {
                    assert_eq!(got.map_err(|e| e.cause), Ok(start), "{what}");
                    m.store(start, start + (s - 1), s);
                }
                Err(e) => assert_eq!(got.map_err(|e| e.cause), Err(e), "{what}"),
            }
        }
        Op::CursorWalk(i, forward) => cursor_walk(t, m, i, forward, &what),
        Op::Gaps(a, b, how) => gaps(t, m, a, b, how, &what),
        Op::AlignedGap(a, b, size, shift, rev) => {
            let align = 1u64 << shift;
            let got = if rev {
                t.empty_area_rev_aligned(a..=b, size, align)
            } else {
                t.empty_area_aligned(a..=b, size, align)
            };
            assert_eq!(got, m.gap_aligned(a, b, size, align, rev), "{what}");
        }
        Op::Entry(f, l, x, take) => match t.entry(f..=l) {
            Err(e) => assert!(f > l && e == Error::InvalidRange, "{what}"),
            Ok(RangeEntry::Vacant(vac)) => {
                assert!(m.is_free(f, l), "{what}: vacant");
                assert_eq!(vac.range(), f..=l, "{what}");
                assert_eq!(vac.insert(v(x)).unwrap().get(), x, "{what}");
                m.store(f, l, x);
            }
            Ok(RangeEntry::Occupied(occ)) => {
                let (s, e, val) =
                    m.map.range(..=l).filter(|(_, &(e, _))| e >= f).map(|(&s, &(e, v))| (s, e, v)).next().unwrap();
                assert_eq!(occ.range(), s..=e, "{what}");
                assert_eq!(occ.is_reserved(), val == RESERVED, "{what}");
                assert_eq!(occ.get().map(|x| x.get()), (val != RESERVED).then_some(val), "{what}");
                if take {
                    let got = occ.remove().unwrap().map(|x| x.get());
                    assert_eq!(got, (val != RESERVED).then_some(val), "{what}");
                    m.clear(s, e);
                }
            }
        },
        Op::StoreMerge(f, l, x) => {
            let got = t.store_range_merging(f..=l, v(x)).map_err(|e| e.cause);
            if f > l {
                assert_eq!(got, Err(Error::InvalidRange), "{what}");
            } else {
                // A touching neighbour with the same value (not a reserved
                // range) joins the stored range.
                let lo = f.checked_sub(1).and_then(|p| m.get(p)).filter(|e| e.2 == x).map_or(f, |e| e.0);
                let hi = l.checked_add(1).and_then(|n| m.get(n)).filter(|e| e.2 == x).map_or(l, |e| e.1);
                assert_eq!(got, Ok(lo..=hi), "{what}");
                m.store(lo, hi, x);
            }
        }
        Op::MergeInsert(f, l, x, kind) => {
            let (touching, overlapping) = [(true, false), (false, true), (true, true)][usize::from(kind % 3)];
            let got = match kind % 3 {
                0 => t.insert_merge_touching(f..=l, v(x)),
                1 => t.insert_merge_overlapping(f..=l, v(x)),
                _ => t.insert_merge_touching_or_overlapping(f..=l, v(x)),
            };
            let got = got.map_err(|e| (e.cause, e.value.get()));
            if f > l {
                assert_eq!(got, Err((Error::InvalidRange, x)), "{what}");
            } else if !overlapping && !m.is_free(f, l) {
                assert_eq!(got, Err((Error::Occupied, x)), "{what}");
            } else {
                // Widened to the entries (values or reserved ranges) under
                // its ends, then to those beside it.
                let (mut lo, mut hi) = (f, l);
                if overlapping {
                    lo = m.get_any(f).map_or(lo, |e| e.0);
                    hi = m.get_any(l).map_or(hi, |e| e.1);
                }
                if touching {
                    lo = lo.checked_sub(1).and_then(|p| m.get_any(p)).map_or(lo, |e| e.0);
                    hi = hi.checked_add(1).and_then(|n| m.get_any(n)).map_or(hi, |e| e.1);
                }
                assert_eq!(got, Ok(lo..=hi), "{what}");
                m.store(lo, hi, x);
            }
        }
        Op::Ends => {
            let values = m.values();
            let first = t.first().map(|(r, x)| (*r.start(), *r.end(), x.get()));
            let last = t.last().map(|(r, x)| (*r.start(), *r.end(), x.get()));
            assert_eq!((first, last), (values.first().copied(), values.last().copied()), "{what}");
        }
        Op::Retain(k, below) => {
            let mut seen = Vec::new();
            t.retain(|r, x| {
                seen.push((*r.start(), *r.end(), x.get()));
                x.get() % 3 != k || *r.start() < below
            });
            assert_eq!(seen, m.values(), "{what}: every entry asked once, in order");
            for (s, e, x) in m.values() {
                if x % 3 == k && s >= below {
                    m.clear(s, e);
                }
            }
        }
        Op::Range(a, b) => {
            let got: Vec<_> = t.range(a..=b).map(|(r, x)| (*r.start(), *r.end(), x.get())).collect();
            let want: Vec<_> = m.values().into_iter().filter(|&(s, e, _)| e >= a && s <= b).collect();
            assert_eq!(got, want, "{what}");
        }
        Op::Reserve(f, l) => {
            let r = t.reserve_range(f..=l);
            if f > l {
                assert_eq!(r, Err(Error::InvalidRange), "{what}");
            } else if m.is_free(f, l) {
                r.unwrap();
                m.store(f, l, RESERVED);
            } else {
                assert_eq!(r, Err(Error::Occupied), "{what}");
            }
            for i in [f, l] {
                assert_eq!(t.is_reserved(i), m.get_any(i).is_some_and(|e| e.2 == RESERVED), "{what}");
            }
        }
    }
    check(t, m, &what);
}

/// Walks every range (entries and gaps) from `i` to one end and compares
/// with the model's entries and free runs.
fn cursor_walk<W: Writes>(t: &MapleTree<U63, u64, W>, m: &Model, i: u64, forward: bool, what: &str) {
    let mut want: Vec<(u64, u64, Option<u64>)> =
        m.entries().into_iter().map(|(s, e, x)| (s, e, (x != RESERVED).then_some(x))).collect();
    want.extend(m.free_runs().into_iter().map(|(s, e)| (s, e, None)));
    want.sort();
    let start = want.iter().position(|&(s, e, _)| s <= i && i <= e).unwrap();
    let mut c = t.cursor(i);
    let mut got = vec![(*c.range().start(), *c.range().end(), c.get().map(U63::get))];
    loop {
        let step = if forward { c.next_range() } else { c.prev_range() };
        match step {
            Some((r, x)) => got.push((*r.start(), *r.end(), x.map(U63::get))),
            None => break,
        }
    }
    let expect: Vec<_> = if forward { want[start..].to_vec() } else { want[..=start].iter().rev().cloned().collect() };
    assert_eq!(got, expect, "{what}: cursor walk");
    // Entry-only stepping matches too.
    let mut c = t.cursor(i);
    let mut got = Vec::new();
    while let Some((r, x)) = if forward { c.next() } else { c.prev() } {
        got.push((*r.start(), *r.end(), x.get()));
    }
    let expect: Vec<_> = expect[1..].iter().filter_map(|&(s, e, x)| x.map(|x| (s, e, x))).collect();
    assert_eq!(got, expect, "{what}: cursor next/prev");
}

/// `gaps(a..=b)` against the model's free runs cut to the window, read
/// forwards (`how % 5 == 0`), backwards (1), from both ends in turn (2), by
/// `fold` (3), or by `fold` after a step from each end (4).
fn gaps<W: Writes>(t: &MapleTree<U63, u64, W>, m: &Model, a: u64, b: u64, how: u8, what: &str) {
    let want: Vec<(u64, u64)> = if a > b {
        Vec::new()
    } else {
        m.free_runs().into_iter().filter(|&(s, e)| e >= a && s <= b).map(|(s, e)| (s.max(a), e.min(b))).collect()
    };
    let mut it = t.gaps(a..=b);
    let mut got: Vec<(u64, u64)> = Vec::new();
    match how % 5 {
        0 => got.extend(it.map(|r| (*r.start(), *r.end()))),
        3 => {
            got = it.fold(got, |mut g, r| {
                g.push((*r.start(), *r.end()));
                g
            })
        }
        4 => {
            got.extend(it.next().map(|r| (*r.start(), *r.end())));
            let last = it.next_back().map(|r| (*r.start(), *r.end()));
            got = it.fold(got, |mut g, r| {
                g.push((*r.start(), *r.end()));
                g
            });
            got.extend(last);
        }
        1 => {
            got.extend(it.rev().map(|r| (*r.start(), *r.end())));
            got.reverse();
        }
        _ => {
            let (mut front, mut back) = (Vec::new(), Vec::new());
            while let Some(r) = it.next() {
                front.push((*r.start(), *r.end()));
                match it.next_back() {
                    Some(r) => back.push((*r.start(), *r.end())),
                    None => break,
                }
            }
            assert_eq!(it.next(), None, "{what}: fused");
            back.reverse();
            got = front;
            got.extend(back);
        }
    }
    assert_eq!(
        got,
        want,
        "{what}: gaps({a:#x}..={b:#x}), read {}",
        ["forwards", "backwards", "from both ends", "by fold", "by fold between a step from each end"]
            [(how % 5) as usize]
    );
}

fn op(max: u64) -> impl Strategy<Value = Op> {
    let range = (key(max), 0..64u64).prop_map(|(f, len)| (f, f.saturating_add(len)));
    prop_oneof![
        6 => (range.clone(), any::<u32>()).prop_map(|((f, l), x)| Op::Store(f, l, x.into())),
        6 => (range.clone(), any::<u32>()).prop_map(|((f, l), x)| Op::Insert(f, l, x.into())),
        2 => range.clone().prop_map(|(f, l)| Op::Clear(f, l)),
        1 => (key(max), key(max)).prop_map(|(f, l)| Op::Clear(f.min(l), f.max(l))),
        1 => (key(max), key(max)).prop_map(|(f, l)| Op::Store(f, l, 7)),
        3 => key(max).prop_map(Op::Erase),
        2 => key(max).prop_map(Op::Load),
        1 => key(max).prop_map(Op::Next),
        1 => key(max).prop_map(Op::Prev),
        1 => (key(max), key(max), 0..200u64).prop_map(|(a, b, s)| Op::Gap(a, b, s)),
        1 => (key(max), key(max), 0..200u64).prop_map(|(a, b, s)| Op::RGap(a, b, s)),
        1 => (key(max), key(max), 1..50u64, any::<bool>()).prop_map(|(a, b, s, r)| Op::Alloc(a.min(b), a.max(b), s, r)),
        1 => (key(max), any::<bool>()).prop_map(|(i, f)| Op::CursorWalk(i, f)),
        1 => range.clone().prop_map(|(f, l)| Op::Reserve(f, l)),
        1 => (key(max), key(max), any::<u8>()).prop_map(|(a, b, h)| Op::Gaps(a.min(b), a.max(b), h)),
        1 => (key(max), any::<u8>()).prop_map(|(a, h)| Op::Gaps(a, u64::MAX, h)),
        2 => (range.clone(), 0..3u64).prop_map(|((f, l), x)| Op::StoreMerge(f, l, x)),
        2 => (range.clone(), any::<u32>(), any::<bool>()).prop_map(|((f, l), x, t)| Op::Entry(f, l, x.into(), t)),
        2 => (key(max), key(max), 1..40u64, 0..7u32, any::<bool>())
            .prop_map(|(a, b, s, al, r)| Op::AlignedGap(a.min(b), a.max(b), s, al, r)),
        1 => (key(max), key(max)).prop_map(|(a, b)| Op::Range(a.min(b), a.max(b))),
        1 => range.clone().prop_map(|(a, b)| Op::Range(a, b)),
        1 => Just(Op::Ends),
        1 => (0..3u64, key(max)).prop_map(|(k, below)| Op::Retain(k, below)),
        3 => (range.clone(), any::<u32>(), 0..3u8).prop_map(|((f, l), x, k)| Op::MergeInsert(f, l, x.into(), k)),
    ]
}

fn run(ops: &[Op], gaps: bool, fresh: bool) {
    if fresh {
        run_on(MapleTree::<U63, u64, FreshNodes>::fresh(gaps), ops);
    } else {
        run_on(if gaps { MapleTree::with_gaps() } else { MapleTree::new() }, ops);
    }
}

fn run_on<W: Writes>(mut t: MapleTree<U63, u64, W>, ops: &[Op]) {
    let mut m = Model::default();
    for (i, op) in ops.iter().enumerate() {
        apply(&mut t, &mut m, op, i);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 4 } else { 256 }, ..ProptestConfig::default() })]

    #[test]
    fn differential_small_keys(ops in prop::collection::vec(op(600), 1..400), gaps: bool, fresh: bool) {
        run(&ops, gaps, fresh);
    }

    #[test]
    fn differential_wide_keys(ops in prop::collection::vec(op(1 << 40), 1..300), gaps: bool, fresh: bool) {
        run(&ops, gaps, fresh);
    }
}

/// `range(a..=b)` for every end `b` (so every leaf's bound, where the scan
/// of a leaf must stop, and the ends of entries and gaps) from a few
/// starts, in a tree of several levels, against a filter of the full
/// iteration.
#[test]
fn range_iteration_stops_at_every_bound() {
    let n = if cfg!(miri) { 40 } else { 1200 };
    for gaps in [false, true] {
        let items = (0..n).map(|i| (i * 16..=i * 16 + 9, v(i)));
        let t = if gaps { MapleTree::from_sorted_with_gaps(items) } else { MapleTree::from_sorted(items) }.unwrap();
        assert!(t.height() >= if cfg!(miri) { 2 } else { 3 });
        let all = entries(&t);
        // Every slot ends at an entry's end or just before an entry's start.
        let ends: Vec<u64> = all.iter().flat_map(|&(s, e, _)| [s.saturating_sub(1), s, e, e + 1]).collect();
        for a in [0, 5, 10, 16 * 7 + 3, 16 * (n / 2)] {
            for &b in ends.iter().filter(|&&b| b >= a) {
                let got: Vec<_> = t.range(a..=b).map(|(r, x)| (*r.start(), *r.end(), x.get())).collect();
                let from = all.partition_point(|e| e.1 < a);
                let to = all.partition_point(|e| e.0 <= b);
                assert_eq!(got, all[from..to.max(from)], "range({a}..={b}), gaps {gaps}");
            }
        }
    }
}

/// Long random sequences reaching height >= 4, validated after every op.
#[test]
fn long_random_sequences_reach_height_4() {
    for (seed, gaps, fresh) in [(1u64, true, false), (2, false, false), (3, true, true)] {
        if fresh {
            long_random_sequence(MapleTree::<U63, u64, FreshNodes>::fresh(gaps), seed);
        } else {
            long_random_sequence(if gaps { MapleTree::with_gaps() } else { MapleTree::new() }, seed);
        }
    }
}

fn long_random_sequence<W: Writes>(mut t: MapleTree<U63, u64, W>, seed: u64) {
    let n = if cfg!(miri) { 60 } else { 9000 };
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut m = Model::default();
    let mut max_height = 0;
    for step in 0..n {
        let grow = step < n * 2 / 3;
        let f = rng.gen_range(0..200_000u64) * 8;
        let len = rng.gen_range(0..12u64);
        let op = match rng.gen_range(0..10) {
            0..=5 if grow => Op::Insert(f, f + len, step as u64),
            0..=5 => Op::Erase(f),
            6 => Op::Store(f, f + len * 40, step as u64),
            7 => Op::Clear(f, f + len * 20),
            8 => Op::Gap(f, f + 5000, len + 1),
            _ => Op::RGap(f, f + 5000, len + 1),
        };
        // Validate each step, but compare contents every 16 (O(n) each).
        apply_fast(&mut t, &mut m, &op, step);
        max_height = max_height.max(t.height());
    }
    check(&t, &m, "end");
    if !cfg!(miri) {
        assert!(max_height >= 4, "height only reached {max_height}");
    }
}

fn apply_fast<W: Writes>(t: &mut MapleTree<U63, u64, W>, m: &mut Model, op: &Op, step: usize) {
    if step % 16 == 0 {
        apply(t, m, op, step);
        return;
    }
    let validate = |t: &MapleTree<U63, u64, W>| {
        if let Err(e) = t.validate() {
            panic!("step {step} {op:x?}: {e}");
        }
    };
    match *op {
        Op::Insert(f, l, x) => {
            let free = m.is_free(f, l);
            assert_eq!(t.insert_range(f..=l, v(x)).is_ok(), free);
            if free {
                m.store(f, l, x);
            }
        }
        Op::Erase(i) => assert_eq!(t.erase(i).map(|x| x.get()), m.erase(i).map(|e| e.2)),
        Op::Store(f, l, x) => {
            t.store_range(f..=l, v(x)).unwrap();
            m.store(f, l, x);
        }
        Op::Clear(f, l) => {
            t.remove_range(f..=l).unwrap();
            m.clear(f, l);
        }
        Op::Gap(a, b, s) => assert_eq!(t.empty_area(a..=b, s), m.gap(a, b, s, false)),
        Op::RGap(a, b, s) => assert_eq!(t.empty_area_rev(a..=b, s), m.gap(a, b, s, true)),
        _ => unreachable!(),
    }
    validate(t);
    assert_eq!(t.len(), m.map.len(), "step {step}");
}
