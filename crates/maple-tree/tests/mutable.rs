//! `get_mut`, `iter_mut`, `range_mut` and `values_mut` on boxed values,
//! differentially against the model, with `validate()` after every step.
//! Each value is a `Box<u64>`: a wrong pointer, a double visit or a missed
//! entry shows as a value the model does not have (and Miri, which runs
//! this file, sees any aliasing of `&mut`).

mod common;

use common::Model;
use maple_tree::MapleTree;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Store(u64, u64, u64),
    Clear(u64, u64),
    Reserve(u64, u64),
    GetMut(u64, u64),
    RangeMut(u64, u64, u64),
    ValuesMut(u64),
    /// `values_mut`: `front` values by `next`, `back` by `next_back`, then
    /// the rest by `fold`, each increased by the amount.
    ValuesMutEnds(u64, usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let range = (0u64..800, 0u64..60).prop_map(|(f, len)| (f, f + len));
    prop_oneof![
        4 => (range.clone(), 0u64..1000).prop_map(|((f, l), v)| Op::Store(f, l, v)),
        1 => range.clone().prop_map(|(f, l)| Op::Clear(f, l)),
        1 => range.clone().prop_map(|(f, l)| Op::Reserve(f, l)),
        3 => (0u64..900, 1u64..100).prop_map(|(i, d)| Op::GetMut(i, d)),
        2 => (0u64..900, 0u64..900, 1u64..100).prop_map(|(a, b, d)| Op::RangeMut(a.min(b), a.max(b), d)),
        1 => (1u64..100).prop_map(Op::ValuesMut),
        1 => (1u64..100, 0usize..30, 0usize..30).prop_map(|(d, f, b)| Op::ValuesMutEnds(d, f, b)),
    ]
}

fn contents(t: &MapleTree<Box<u64>>) -> Vec<(u64, u64, u64)> {
    t.iter().map(|(r, v)| (*r.start(), *r.end(), *v)).collect()
}

fn run(ops: &[Op], gaps: bool) {
    let mut t: MapleTree<Box<u64>> = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
    let mut m = Model::default();
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Store(f, l, v) => {
                t.store_range(f..=l, Box::new(v)).unwrap();
                m.store(f, l, v);
            }
            Op::Clear(f, l) => {
                t.remove_range(f..=l).unwrap();
                m.clear(f, l);
            }
            Op::Reserve(f, l) => {
                if m.is_free(f, l) {
                    t.reserve_range(f..=l).unwrap();
                    m.store(f, l, common::RESERVED);
                }
            }
            Op::GetMut(i, d) => {
                let got = t.get_mut(i).map(|v| {
                    *v += d;
                    *v
                });
                let want = m.get(i).map(|(s, e, v)| {
                    m.map.insert(s, (e, v + d));
                    v + d
                });
                assert_eq!(got, want, "step {step}: {op:?}");
            }
            Op::RangeMut(a, b, d) => {
                let mut seen = Vec::new();
                for (r, v) in t.range_mut(a..=b) {
                    *v += d;
                    seen.push((*r.start(), *r.end()));
                }
                let want: Vec<(u64, u64)> =
                    m.values().into_iter().filter(|&(s, e, _)| e >= a && s <= b).map(|(s, e, _)| (s, e)).collect();
                assert_eq!(seen, want, "step {step}: {op:?}");
                for (s, _) in want {
                    let (e, v) = m.map[&s];
                    m.map.insert(s, (e, v + d));
                }
            }
            Op::ValuesMut(d) => {
                t.values_mut().for_each(|v| *v += d);
                for (s, e, v) in m.values() {
                    m.map.insert(s, (e, v + d));
                }
            }
            Op::ValuesMutEnds(d, front, back) => {
                let mut it = t.values_mut();
                let mut n = 0;
                for _ in 0..front {
                    if let Some(v) = it.next() {
                        *v += d;
                        n += 1;
                    }
                }
                for _ in 0..back {
                    if let Some(v) = it.next_back() {
                        *v += d;
                        n += 1;
                    }
                }
                n += it.fold(0, |k, v| {
                    *v += d;
                    k + 1
                });
                let want = m.values().into_iter().filter(|e| e.2 != common::RESERVED).count();
                assert_eq!(n, want, "step {step}: {op:?}: values handed out");
                for (s, e, v) in m.values() {
                    if v != common::RESERVED {
                        m.map.insert(s, (e, v + d));
                    }
                }
            }
        }
        t.validate().unwrap_or_else(|e| panic!("step {step}: {op:?}: {e}"));
        assert_eq!(contents(&t), m.values(), "step {step}: {op:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 3 } else { 200 },
        // Miri's isolation has no working directory to keep failures in.
        failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutable_access_matches_the_model(ops in prop::collection::vec(op(), 1..if cfg!(miri) { 40 } else { 300 }), gaps: bool) {
        run(&ops, gaps);
    }
}

#[test]
fn an_invalid_range_yields_nothing() {
    let mut t: MapleTree<Box<u64>> = MapleTree::new();
    t.insert_range(0..=9, Box::new(1)).unwrap();
    #[allow(clippy::reversed_empty_ranges)]
    let n = t.range_mut(5..2).count();
    assert_eq!(n, 0);
    assert_eq!(t.range_mut(9..=9).count(), 1);
}

/// `values_mut` over a tree of several levels, from both ends and then by
/// `fold` (which reads whole leaves under a parent straight from its
/// arrays): every value once.
#[test]
fn values_mut_over_several_levels() {
    let n = if cfg!(miri) { 300 } else { 5000 };
    let mut t: MapleTree<Box<u64>> = MapleTree::new();
    for i in 0..n {
        t.insert_range(i * 10..=i * 10 + 4, Box::new(i)).unwrap();
    }
    assert!(t.height() >= if cfg!(miri) { 2 } else { 3 });
    for (front, back) in [(0, 0), (1, 0), (0, 1), (17, 5), (40, 260)] {
        let mut it = t.values_mut();
        let mut seen: Vec<u64> = Vec::new();
        for _ in 0..front {
            seen.extend(it.next().map(|v| *v));
        }
        for _ in 0..back {
            seen.extend(it.next_back().map(|v| *v));
        }
        seen.extend(it.fold(Vec::new(), |mut all, v| {
            *v += n;
            all.push(*v - n);
            *v -= n;
            all
        }));
        seen.sort_unstable();
        assert_eq!(seen, (0..n).collect::<Vec<_>>(), "front {front}, back {back}");
    }
}
