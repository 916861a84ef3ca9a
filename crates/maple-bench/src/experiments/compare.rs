//! The tree as a range map against the `BTreeMap` idiom and `rangemap`:
//! load, store, erase, iterate, gap search, and memory.

use std::{collections::BTreeMap, hint::black_box};

use maple_tree::{Handle, MapleSet, MapleTree, U63};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use rangemap::{RangeInclusiveMap, RangeInclusiveSet};

use super::{div, span};
use crate::{
    baselines::SlabValues,
    measure::{alternate, case, Candidate, Timing},
    model::{Cell, Goal, Plot, Section, Table, Unit},
    resident::{self, Build},
    workloads::{
        boxed_strings, btree, btree_gap, btree_gaps, btree_load, btree_next_from, btree_window_sum, maple, name, order,
        random_keys, range, rmap, slab_strings, u, STEP,
    },
    Options,
};

/// One measured operation at one size.
struct Row {
    what: &'static str,
    n: u64,
    maple: Timing,
    btree: Timing,
    rangemap: Option<Timing>,
}

/// One row of the values table: the same `String` values boxed by the
/// tree and in a per-map slab ([`SlabValues`]).
struct SlabRow {
    what: &'static str,
    n: u64,
    boxed: Timing,
    slab: Timing,
}

/// Sums what an iterator yields with a `for` loop, which steps with
/// `next` (`Iterator::sum` would run on the iterator's `fold`).
fn sum_by_next(it: impl Iterator<Item = u64>) -> u64 {
    let mut s = 0u64;
    for v in it {
        s = s.wrapping_add(v);
    }
    s
}

/// Each structure's iteration loop as a function of its own, never
/// inlined: code added elsewhere in this section then cannot change how
/// the loop is compiled (it moved the `BTreeMap` loops by up to 1.7×
/// between builds of the same loops), and every structure gets the same
/// treatment.
macro_rules! own_loops {
    ($($name:ident($arg:ident: $ty:ty) $body:expr;)*) => {$(
        #[inline(never)]
        fn $name($arg: $ty) -> u64 {
            $body
        }
    )*};
}

own_loops! {
    maple_sum(t: &MapleTree<U63>) t.iter().map(|(_, v)| v.get()).sum();
    btree_sum(m: &BTreeMap<u64, (u64, u64)>) m.values().map(|v| v.1).sum();
    rmap_sum(r: &RangeInclusiveMap<u64, u64>) r.iter().map(|(_, v)| *v).sum();
    maple_next(t: &MapleTree<U63>) sum_by_next(t.iter().map(|(_, v)| v.get()));
    btree_next(m: &BTreeMap<u64, (u64, u64)>) sum_by_next(m.values().map(|v| v.1));
    rmap_next(r: &RangeInclusiveMap<u64, u64>) sum_by_next(r.iter().map(|(_, v)| *v));
    maple_rev(t: &MapleTree<U63>) sum_by_next(t.iter().rev().map(|(_, v)| v.get()));
    btree_rev(m: &BTreeMap<u64, (u64, u64)>) sum_by_next(m.values().rev().map(|v| v.1));
    rmap_rev(r: &RangeInclusiveMap<u64, u64>) sum_by_next(r.iter().rev().map(|(_, v)| *v));
    maple_rev_sum(t: &MapleTree<U63>) t.iter().rev().map(|(_, v)| v.get()).sum();
    btree_rev_sum(m: &BTreeMap<u64, (u64, u64)>) m.values().rev().map(|v| v.1).sum();
    rmap_rev_sum(r: &RangeInclusiveMap<u64, u64>) r.iter().rev().map(|(_, v)| *v).sum();
}

/// Adds one to every value of `t` through `values_mut`, and sums them.
fn bump_all(t: &mut MapleTree<Box<u64>>) -> u64 {
    t.values_mut()
        .map(|v| {
            *v += 1;
            *v
        })
        .sum()
}

/// A range map's store on the `BTreeMap<start, (end, value)>` idiom:
/// what `[f, l]` overlaps is trimmed (an entry reaching in from the left
/// keeps its part before `f`, one reaching out to the right its part after
/// `l`, split in two if it does both) and the rest removed, then `[f, l]`
/// is inserted. The job `MapleTree::store_range` does.
fn btree_store<V: Clone>(m: &mut BTreeMap<u64, (u64, V)>, f: u64, l: u64, v: V) {
    if let Some((&s, (e, w))) = m.range(..f).next_back() {
        let (e, w) = (*e, w.clone());
        if e >= f {
            if e > l {
                m.insert(l + 1, (e, w.clone()));
            }
            m.insert(s, (f - 1, w));
        }
    }
    while let Some((&s, &(e, _))) = m.range(f..=l).next() {
        let (_, w) = m.remove(&s).expect("just seen");
        if e > l {
            m.insert(l + 1, (e, w));
            break;
        }
    }
    m.insert(f, (l, v));
}

/// The random-store cases for the values `value` makes, in `order`: the
/// maple tree's `store_range`, the idiom's store ([`btree_store`]),
/// `rangemap`'s `insert`; each round builds a fresh map.
fn store_cases<'a, V>(n: u64, order: &'a [u64], value: impl Fn(u64) -> V + Copy + 'a) -> Vec<Candidate<'a>>
where
    V: Handle + Clone + Eq + 'a,
{
    vec![
        case(n, MapleTree::<V>::new, move |mut t| {
            for &i in order {
                let (f, l) = range(i);
                t.store_range(f..=l, value(i)).expect("store");
            }
            t
        }),
        case(n, BTreeMap::<u64, (u64, V)>::new, move |mut m| {
            for &i in order {
                let (f, l) = range(i);
                btree_store(&mut m, f, l, value(i));
            }
            m
        }),
        case(n, RangeInclusiveMap::<u64, V>::new, move |mut m| {
            for &i in order {
                let (f, l) = range(i);
                m.insert(f..=l, value(i));
            }
            m
        }),
    ]
}

/// A set of ranges on the `BTreeMap` idiom (start → last): `[f, l]`
/// joined with every range it touches or overlaps. The job
/// `MapleSet::insert` does.
fn btree_set_insert(m: &mut BTreeMap<u64, u64>, mut f: u64, mut l: u64) {
    if let Some((&s, &e)) = m.range(..=f).next_back() {
        if e.saturating_add(1) >= f {
            m.remove(&s);
            (f, l) = (s, l.max(e));
        }
    }
    while let Some((&s, &e)) = m.range(f..=l.saturating_add(1)).next() {
        m.remove(&s);
        l = l.max(e);
    }
    m.insert(f, l);
}

/// A range map's erase of the entry holding `index` on the idiom: the
/// entry starting at or before it, if it reaches it. The job
/// `MapleTree::erase` does.
fn btree_erase(m: &mut BTreeMap<u64, (u64, u64)>, index: u64) -> Option<u64> {
    let (&s, &(e, _)) = m.range(..=index).next_back()?;
    (e >= index).then(|| m.remove(&s).map(|x| x.1)).flatten()
}

/// Sums the bounds of the gaps an iterator yields (the work every gap row
/// times; generic, so that each structure's iterator is inlined as the
/// `BTreeMap` scan is).
fn gap_sum(it: impl Iterator<Item = std::ops::RangeInclusive<u64>>) -> u64 {
    it.map(|g| g.start() + g.end()).fold(0u64, u64::wrapping_add)
}

pub(super) fn run(opts: &Options, progress: &mut dyn FnMut(&str)) -> Section {
    let mut s = Section::new("compare", "Maple tree vs `BTreeMap` and `rangemap`");
    let mut rows = Vec::new();
    let mut slab_rows = Vec::new();
    for &n in &opts.sizes {
        let reps = opts.reps;
        let lookups = opts.loops(200_000.0, 1000);
        let keys = random_keys(n, lookups, n);
        let (asc, shuffled) = (order(n, false), order(n, true));

        progress(&format!("compare: load, n = {n}"));
        let t = maple(n, false);
        let m = btree(n);
        let r = rmap(n);
        let sum = |f: &dyn Fn(u64) -> u64| keys.iter().map(|&k| f(k)).sum::<u64>();
        let tm = alternate(
            reps,
            vec![
                case(lookups, || (), |()| sum(&|k| t.load(k).map_or(0, U63::get))),
                case(lookups, || (), |()| sum(&|k| btree_load(&m, k).unwrap_or(0))),
                case(lookups, || (), |()| sum(&|k| r.get(&k).copied().unwrap_or(0))),
            ],
        );
        rows.push(Row { what: "load (random)", n, maple: tm[0], btree: tm[1], rangemap: Some(tm[2]) });

        // Short range queries at the same keys: the entry at or after a
        // key, the entry at or before it (a predecessor: the last range
        // starting at or before it), and a window of eight ranges summed.
        progress(&format!("compare: range queries, n = {n}"));
        let tm = alternate(
            reps,
            vec![
                case(lookups, || (), |()| sum(&|k| t.range(k..).next().map_or(0, |(_, v)| v.get()))),
                case(lookups, || (), |()| sum(&|k| btree_next_from(&m, k).unwrap_or(0))),
                case(lookups, || (), |()| sum(&|k| r.overlapping(&(k..=u64::MAX)).next().map_or(0, |(_, v)| *v))),
            ],
        );
        rows.push(Row {
            what: "next from a key (range(k..).next())",
            n,
            maple: tm[0],
            btree: tm[1],
            rangemap: Some(tm[2]),
        });
        let tm = alternate(
            reps,
            vec![
                case(lookups, || (), |()| sum(&|k| t.range(..=k).next_back().map_or(0, |(_, v)| v.get()))),
                case(lookups, || (), |()| sum(&|k| m.range(..=k).next_back().map_or(0, |(_, v)| v.1))),
            ],
        );
        // (`rangemap` has no such query: its `overlapping(0..=k)` from
        // the back steps down from the map's last range.)
        rows.push(Row {
            what: "last at or before a key (range(..=k).next_back())",
            n,
            maple: tm[0],
            btree: tm[1],
            rangemap: None,
        });
        let w = 8 * STEP;
        let tm = alternate(
            reps,
            vec![
                case(lookups, || (), |()| sum(&|k| t.range(k..k + w).map(|(_, v)| v.get()).sum())),
                case(lookups, || (), |()| sum(&|k| btree_window_sum(&m, k, k + w - 1))),
                case(lookups, || (), |()| sum(&|k| r.overlapping(&(k..=k + w - 1)).map(|(_, v)| *v).sum())),
            ],
        );
        rows.push(Row {
            what: "window of 8 ranges (per window)",
            n,
            maple: tm[0],
            btree: tm[1],
            rangemap: Some(tm[2]),
        });

        progress(&format!("compare: iterate, n = {n}"));
        let tm = alternate(
            reps,
            vec![
                case(n, || (), |()| maple_sum(&t)),
                case(n, || (), |()| btree_sum(&m)),
                case(n, || (), |()| rmap_sum(&r)),
            ],
        );
        rows.push(Row { what: "iterate", n, maple: tm[0], btree: tm[1], rangemap: Some(tm[2]) });

        // The same through `next`, as a `for` loop does (`sum` above runs on
        // `fold`, which each structure may implement its own way).
        progress(&format!("compare: iterate by next, n = {n}"));
        let tm = alternate(
            reps,
            vec![
                case(n, || (), |()| maple_next(&t)),
                case(n, || (), |()| btree_next(&m)),
                case(n, || (), |()| rmap_next(&r)),
            ],
        );
        rows.push(Row { what: "iterate (for loop)", n, maple: tm[0], btree: tm[1], rangemap: Some(tm[2]) });

        // From the last entry down (`DoubleEndedIterator`), by a `for` loop.
        progress(&format!("compare: iterate backwards, n = {n}"));
        let tm = alternate(
            reps,
            vec![
                case(n, || (), |()| maple_rev(&t)),
                case(n, || (), |()| btree_rev(&m)),
                case(n, || (), |()| rmap_rev(&r)),
            ],
        );
        rows.push(Row { what: "iterate backwards (rev)", n, maple: tm[0], btree: tm[1], rangemap: Some(tm[2]) });

        // The same by `sum`, which runs on each structure's `rfold`.
        progress(&format!("compare: iterate backwards by sum, n = {n}"));
        let tm = alternate(
            reps,
            vec![
                case(n, || (), |()| maple_rev_sum(&t)),
                case(n, || (), |()| btree_rev_sum(&m)),
                case(n, || (), |()| rmap_rev_sum(&r)),
            ],
        );
        rows.push(Row { what: "iterate backwards (rev, sum)", n, maple: tm[0], btree: tm[1], rangemap: Some(tm[2]) });

        progress(&format!("compare: iterate mutably, n = {n}"));
        // Boxed values (what `iter_mut` serves) against `values_mut`.
        let mut tb: MapleTree<Box<u64>> = MapleTree::from_sorted((0..n).map(|i| {
            let (f, l) = range(i);
            (f..=l, Box::new(i))
        }))
        .expect("sorted");
        let mut mb = btree(n);
        let tm = alternate(
            reps,
            vec![
                case(n, || (), |()| bump_all(&mut tb)),
                case(
                    n,
                    || (),
                    |()| {
                        mb.values_mut()
                            .map(|v| {
                                v.1 += 1;
                                v.1
                            })
                            .sum::<u64>()
                    },
                ),
            ],
        );
        rows.push(Row { what: "iterate mutably (values_mut)", n, maple: tm[0], btree: tm[1], rangemap: None });

        // The same with the `BTreeMap`'s values boxed too: what is left is
        // the two traversals (the row above adds the box's indirection,
        // which the maple tree's pointer-sized slots need and the idiom's
        // inline values do not).
        progress(&format!("compare: iterate mutably, both boxed, n = {n}"));
        let mut mbb: BTreeMap<u64, (u64, Box<u64>)> = (0..n)
            .map(|i| {
                let (f, l) = range(i);
                (f, (l, Box::new(i)))
            })
            .collect();
        let tm = alternate(
            reps,
            vec![
                case(n, || (), |()| bump_all(&mut tb)),
                case(
                    n,
                    || (),
                    |()| {
                        mbb.values_mut()
                            .map(|v| {
                                *v.1 += 1;
                                *v.1
                            })
                            .sum::<u64>()
                    },
                ),
            ],
        );
        drop(mbb);
        rows.push(Row {
            what: "iterate mutably (values_mut), both boxed",
            n,
            maple: tm[0],
            btree: tm[1],
            rangemap: None,
        });

        for (what, order) in [("store (ascending)", &asc), ("store (random)", &shuffled)] {
            progress(&format!("compare: {what}, n = {n}"));
            let tm = alternate(
                reps,
                vec![
                    case(n, MapleTree::<U63>::new, |mut t| {
                        for &i in order {
                            let (f, l) = range(i);
                            t.store_range(f..=l, u(i)).expect("store");
                        }
                        t
                    }),
                    case(n, BTreeMap::<u64, (u64, u64)>::new, |mut m| {
                        for &i in order {
                            let (f, l) = range(i);
                            m.insert(f, (l, i));
                        }
                        m
                    }),
                    case(n, RangeInclusiveMap::<u64, u64>::new, |mut m| {
                        for &i in order {
                            let (f, l) = range(i);
                            m.insert(f..=l, i);
                        }
                        m
                    }),
                    case(n, BTreeMap::<u64, (u64, u64)>::new, |mut m| {
                        for &i in order {
                            let (f, l) = range(i);
                            btree_store(&mut m, f, l, i);
                        }
                        m
                    }),
                ],
            );
            // The idiom doing a range map's job is the comparison; the bare
            // insert (which would corrupt the map on an overlap) is its
            // lower bound.
            rows.push(Row { what, n, maple: tm[0], btree: tm[3], rangemap: Some(tm[2]) });
            let bare = if what == "store (ascending)" {
                "store (ascending), bare BTreeMap insert"
            } else {
                "store (random), bare BTreeMap insert"
            };
            rows.push(Row { what: bare, n, maple: tm[0], btree: tm[1], rangemap: None });
        }

        progress(&format!("compare: erase, n = {n}"));
        let tm = alternate(
            reps,
            vec![
                case(
                    n,
                    || maple(n, false),
                    |mut t| {
                        for &i in &shuffled {
                            black_box(t.erase(i * STEP));
                        }
                        t
                    },
                ),
                case(
                    n,
                    || btree(n),
                    |mut m| {
                        for &i in &shuffled {
                            black_box(m.remove(&(i * STEP)));
                        }
                        m
                    },
                ),
                case(
                    n,
                    || rmap(n),
                    |mut m| {
                        for &i in &shuffled {
                            let (f, l) = range(i);
                            m.remove(f..=l);
                        }
                        m
                    },
                ),
                case(
                    n,
                    || btree(n),
                    |mut m| {
                        for &i in &shuffled {
                            black_box(btree_erase(&mut m, i * STEP));
                        }
                        m
                    },
                ),
            ],
        );
        rows.push(Row { what: "erase (random)", n, maple: tm[0], btree: tm[3], rangemap: Some(tm[2]) });
        rows.push(Row { what: "erase (random), bare BTreeMap remove", n, maple: tm[0], btree: tm[1], rangemap: None });

        progress(&format!("compare: gap search, n = {n}"));
        let mut rng = SmallRng::seed_from_u64(n);
        let hole = rng.gen_range(n / 4..n / 2 + 1);
        let mut tg = maple(n, true);
        let mut mg = btree(n);
        for k in hole..hole + 5 {
            tg.erase(k * STEP);
            mg.remove(&(k * STEP));
        }
        assert_eq!(tg.empty_area(.., 64).ok(), btree_gap(&mg, 64), "the gap baselines agree");
        let searches = opts.loops(20_000.0, 100);
        let scans = if n > 100_000 { 20 } else { (2_000_000 / n).clamp(20, 2000) };
        let tm = alternate(
            reps,
            vec![
                case(
                    searches,
                    || (),
                    |()| (0..searches).map(|_| tg.empty_area(.., black_box(64)).unwrap_or(0)).sum::<u64>(),
                ),
                case(scans, || (), |()| (0..scans).map(|_| btree_gap(&mg, black_box(64)).unwrap_or(0)).sum::<u64>()),
            ],
        );
        rows.push(Row { what: "gap search (lowest fit)", n, maple: tm[0], btree: tm[1], rangemap: None });

        progress(&format!("compare: gaps in a window, n = {n}"));
        // A window of 100 entries in the middle: 100 gaps (one after every
        // entry), per gap.
        let (a, b) = ((n / 2) * STEP, (n / 2 + 100) * STEP - 1);
        let tw = maple(n, true);
        let k = tw.gaps(a..=b).count() as u64;
        let windows = opts.loops(2_000.0, 10);
        let tm = alternate(
            reps,
            vec![
                case(windows * k, || (), |()| (0..windows).map(|_| gap_sum(tw.gaps(black_box(a)..=b))).sum::<u64>()),
                case(windows * k, || (), |()| (0..windows).map(|_| btree_gaps(&m, black_box(a), b)).sum::<u64>()),
                case(windows * k, || (), |()| (0..windows).map(|_| gap_sum(r.gaps(&(black_box(a)..=b)))).sum::<u64>()),
            ],
        );
        rows.push(Row { what: "gaps in a window (per gap)", n, maple: tm[0], btree: tm[1], rangemap: Some(tm[2]) });

        // Sparse: the ranges touch (`[i*16, i*16+15]`) except for ten
        // erased ones; the window is the whole tree. Per window.
        let touching = |i: u64| (i * STEP, i * STEP + STEP - 1);
        let holes: Vec<u64> = (1..=10).map(|j| j * n / 11).collect();
        let keep = |i: &u64| !holes.contains(i);
        let ts = MapleTree::from_sorted_with_gaps((0..n).filter(keep).map(|i| {
            let (f, l) = touching(i);
            (f..=l, u(i))
        }))
        .expect("sorted");
        let ms: BTreeMap<u64, (u64, u64)> = (0..n).filter(keep).map(|i| (touching(i).0, (touching(i).1, i))).collect();
        let rs: RangeInclusiveMap<u64, u64> = (0..n).filter(keep).map(|i| (touching(i).0..=touching(i).1, i)).collect();
        let end = n * STEP - 1;
        let sparse = opts.loops(200.0, 3);
        let tm = alternate(
            reps,
            vec![
                case(sparse, || (), |()| (0..sparse).map(|_| gap_sum(ts.gaps(black_box(0)..=end))).sum::<u64>()),
                case(sparse, || (), |()| (0..sparse).map(|_| btree_gaps(&ms, black_box(0), end)).sum::<u64>()),
                case(sparse, || (), |()| (0..sparse).map(|_| gap_sum(rs.gaps(&(black_box(0)..=end)))).sum::<u64>()),
            ],
        );
        rows.push(Row {
            what: "10 gaps among all ranges (per window)",
            n,
            maple: tm[0],
            btree: tm[1],
            rangemap: Some(tm[2]),
        });

        // Other values: `u32` stored inline, `u64` and `String` in a box
        // the tree makes (the idiom and `rangemap` hold them inline in
        // their entries).
        progress(&format!("compare: other values, n = {n}"));
        let items = |i: u64| (range(i).0..=range(i).1, i);
        let t32: MapleTree<u32> = MapleTree::from_sorted((0..n).map(|i| (items(i).0, i as u32))).expect("sorted");
        let m32: BTreeMap<u64, (u64, u32)> = (0..n).map(|i| (range(i).0, (range(i).1, i as u32))).collect();
        let r32: RangeInclusiveMap<u64, u32> = (0..n).map(|i| (items(i).0, i as u32)).collect();
        let at32 = |m: &BTreeMap<u64, (u64, u32)>, k: u64| {
            m.range(..=k).next_back().filter(|(_, v)| v.0 >= k).map(|(_, v)| v.1)
        };
        let tm = alternate(
            reps,
            vec![
                case(lookups, || (), |()| sum(&|k| t32.load(k).map_or(0, u64::from))),
                case(lookups, || (), |()| sum(&|k| at32(&m32, k).map_or(0, u64::from))),
                case(lookups, || (), |()| sum(&|k| r32.get(&k).map_or(0, |&v| u64::from(v)))),
            ],
        );
        rows.push(Row {
            what: "load (random), u32 values (inline)",
            n,
            maple: tm[0],
            btree: tm[1],
            rangemap: Some(tm[2]),
        });
        // Every value changed in place: the maple tree's
        // `for_each_value_mut` (the `values_mut` of values stored in the
        // slot) against the idiom's `values_mut`, and `for_each_mut`, which
        // hands out each range too, against the idiom's `iter_mut`;
        // `rangemap` has no mutable access.
        let (mut t32, mut m32) = (t32, m32);
        let tm = alternate(
            reps,
            vec![
                case(n, || (), |()| t32.for_each_value_mut(|v| *v = v.wrapping_add(1))),
                case(n, || (), |()| m32.values_mut().for_each(|v| v.1 = v.1.wrapping_add(1))),
            ],
        );
        rows.push(Row {
            what: "iterate mutably, u32 values (inline; for_each_value_mut)",
            n,
            maple: tm[0],
            btree: tm[1],
            rangemap: None,
        });
        let tm = alternate(
            reps,
            vec![
                case(n, || (), |()| t32.for_each_mut(|r, v| *v = v.wrapping_add(*r.start() as u32))),
                case(n, || (), |()| m32.iter_mut().for_each(|(k, v)| v.1 = v.1.wrapping_add(*k as u32))),
            ],
        );
        rows.push(Row {
            what: "iterate mutably with ranges, u32 values (inline; for_each_mut)",
            n,
            maple: tm[0],
            btree: tm[1],
            rangemap: None,
        });
        drop((t32, m32, r32));

        let t64: MapleTree<u64> = MapleTree::from_sorted((0..n).map(items)).expect("sorted");
        let tm = alternate(
            reps,
            vec![
                case(lookups, || (), |()| sum(&|k| t64.load(k).unwrap_or(0))),
                case(lookups, || (), |()| sum(&|k| btree_load(&m, k).unwrap_or(0))),
                case(lookups, || (), |()| sum(&|k| r.get(&k).copied().unwrap_or(0))),
            ],
        );
        rows.push(Row {
            what: "load (random), u64 values (boxed)",
            n,
            maple: tm[0],
            btree: tm[1],
            rangemap: Some(tm[2]),
        });
        drop(t64);
        let tm = alternate(reps, store_cases(n, &shuffled, |i| i));
        rows.push(Row {
            what: "store (random), u64 values (boxed)",
            n,
            maple: tm[0],
            btree: tm[1],
            rangemap: Some(tm[2]),
        });

        let names: Vec<String> = (0..n).map(name).collect();
        let ts: MapleTree<String> =
            MapleTree::from_sorted((0..n).map(|i| (items(i).0, names[i as usize].clone()))).expect("sorted");
        let ms: BTreeMap<u64, (u64, String)> =
            (0..n).map(|i| (range(i).0, (range(i).1, names[i as usize].clone()))).collect();
        let rs: RangeInclusiveMap<u64, String> = (0..n).map(|i| (items(i).0, names[i as usize].clone())).collect();
        let len = |s: Option<&String>| s.map_or(0, |s| s.len() as u64);
        let tm = alternate(
            reps,
            vec![
                case(lookups, || (), |()| sum(&|k| len(ts.load(k)))),
                case(
                    lookups,
                    || (),
                    |()| sum(&|k| len(ms.range(..=k).next_back().filter(|(_, v)| v.0 >= k).map(|(_, v)| &v.1))),
                ),
                case(lookups, || (), |()| sum(&|k| len(rs.get(&k)))),
            ],
        );
        rows.push(Row { what: "load (random), String values", n, maple: tm[0], btree: tm[1], rangemap: Some(tm[2]) });
        drop((ts, ms, rs));
        let tm = alternate(reps, store_cases(n, &shuffled, |i| names[i as usize].clone()));
        rows.push(Row { what: "store (random), String values", n, maple: tm[0], btree: tm[1], rangemap: Some(tm[2]) });

        // The same values in a per-map slab (the slot holds an index into
        // one `Vec`), the other way to hold values of any type; both maps
        // built by inserts in a random order, as a program's would be.
        progress(&format!("compare: values boxed or in a slab, n = {n}"));
        let (ts, ss) = (boxed_strings(&shuffled), slab_strings(&shuffled));
        let tm = alternate(
            reps,
            vec![
                case(lookups, || (), |()| sum(&|k| len(ts.load(k)))),
                case(lookups, || (), |()| sum(&|k| len(ss.load(k)))),
            ],
        );
        slab_rows.push(SlabRow { what: "load (random)", n, boxed: tm[0], slab: tm[1] });
        let tm = alternate(
            reps,
            vec![
                case(n, || (), |()| ts.iter().map(|(_, v)| v.len() as u64).sum::<u64>()),
                case(n, || (), |()| ss.values().map(|v| v.len() as u64).sum::<u64>()),
            ],
        );
        slab_rows.push(SlabRow { what: "iterate", n, boxed: tm[0], slab: tm[1] });
        drop((ts, ss));
        let tm = alternate(
            reps,
            vec![
                case(n, MapleTree::<String>::new, |mut t| {
                    for &i in &shuffled {
                        let (f, l) = range(i);
                        t.insert_range(f..=l, names[i as usize].clone()).expect("ranges apart");
                    }
                    t
                }),
                case(n, SlabValues::<String>::new, |mut t| {
                    for &i in &shuffled {
                        let (f, l) = range(i);
                        t.insert_range(f..=l, names[i as usize].clone()).expect("ranges apart");
                    }
                    t
                }),
            ],
        );
        slab_rows.push(SlabRow { what: "insert (random)", n, boxed: tm[0], slab: tm[1] });
        drop(names);

        // A set of ranges: inserts join what they touch (here nothing:
        // the ranges lie apart), lookups ask whether an index is in.
        progress(&format!("compare: sets, n = {n}"));
        let tm = alternate(
            reps,
            vec![
                case(n, MapleSet::new, |mut t| {
                    for &i in &shuffled {
                        let (f, l) = range(i);
                        t.insert(f..=l).expect("insert");
                    }
                    t
                }),
                case(n, BTreeMap::<u64, u64>::new, |mut m| {
                    for &i in &shuffled {
                        let (f, l) = range(i);
                        btree_set_insert(&mut m, f, l);
                    }
                    m
                }),
                case(n, RangeInclusiveSet::<u64>::new, |mut m| {
                    for &i in &shuffled {
                        let (f, l) = range(i);
                        m.insert(f..=l);
                    }
                    m
                }),
            ],
        );
        rows.push(Row { what: "set insert (random)", n, maple: tm[0], btree: tm[1], rangemap: Some(tm[2]) });
        let set: MapleSet = (0..n).map(|i| range(i).0..=range(i).1).collect();
        let mset: BTreeMap<u64, u64> = (0..n).map(range).collect();
        let rset: RangeInclusiveSet<u64> = (0..n).map(|i| range(i).0..=range(i).1).collect();
        let tm = alternate(
            reps,
            vec![
                case(lookups, || (), |()| sum(&|k| u64::from(set.contains(k)))),
                case(
                    lookups,
                    || (),
                    |()| sum(&|k| u64::from(mset.range(..=k).next_back().is_some_and(|(_, &e)| e >= k))),
                ),
                case(lookups, || (), |()| sum(&|k| u64::from(rset.contains(&k)))),
            ],
        );
        rows.push(Row { what: "set contains (random)", n, maple: tm[0], btree: tm[1], rangemap: Some(tm[2]) });
    }

    s.text(format!(
        "Ranges `[i*16, i*16+9]`; ns per operation (median of {} alternating rounds); a ratio > 1 means the maple tree is faster. The `BTreeMap` baseline is `BTreeMap<u64, (u64, V)>` with `range(..=i).next_back()`; its gap search is a linear scan. `iterate` sums the values with `Iterator::sum` (which runs on each structure's `fold`), `iterate (for loop)` steps with `next`, `iterate backwards (rev)` with `next_back` from the last entry down, `iterate backwards (rev, sum)` by `sum` over `.rev()` (which runs on `rfold`). `iterate mutably` adds one to every value through `values_mut`: the maple tree's values are boxed (a slot holds a pointer), the idiom's inline, and in the `both boxed` row the `BTreeMap`'s are boxed too, which leaves the two traversals. The range queries run at the lookups' keys: the first range ending at or after the key (the `BTreeMap` idiom looks at the range starting at or before it, then the next), the last range starting at or before it (`range(..=k).next_back()`; `rangemap` has no such query: its `overlapping(0..=k)` from the back steps down from the map's last range), and the ranges overlapping a window of `8 × 16` indices from it, summed. The value rows at the end store `u32` values inline in the slot (changed in place through `for_each_value_mut`, the `values_mut` of values stored in the slot, and through `for_each_mut`, which hands out each range too, against the idiom's `iter_mut`), and `u64` and `String` values in a box the tree makes (one allocation per entry; the `BTreeMap` and `rangemap` hold them in their entries); the set rows time `MapleSet` against `rangemap::RangeInclusiveSet` and a `BTreeMap<start, last>` that joins what an insert touches. A store, as a range map's must, trims or splits whatever the new range overlaps (the idiom: look at the entry starting before it and those starting inside it, then insert), and an erase takes the entry holding an index (the idiom: `range(..=k).next_back()`, then `remove`); the `bare BTreeMap insert` and `remove` rows time the idiom without that work (a bare `insert` corrupts the map on an overlap), a lower bound no range map reaches. `store` rounds build a fresh map each and drop it after the clock stops, as a program that rebuilds its maps does: each structure builds in memory the last round gave back (the global allocator keeps a dropped `BTreeMap`'s nodes in its heap, the maple tree's thread keeps up to 64 MiB of node chunks).",
        opts.reps
    ));
    let mut tab = Table::new(
        "compare",
        2,
        &[
            "operation",
            "ranges",
            "maple ns",
            "BTreeMap ns",
            "rangemap ns",
            "vs BTreeMap",
            "vs rangemap",
            "maple spread",
        ],
    );
    for r in &rows {
        tab.row(vec![
            Cell::text(r.what),
            Cell::num(r.n as f64, Unit::Count),
            Cell::num(r.maple.ns(), Unit::Ns),
            Cell::num(r.btree.ns(), Unit::Ns),
            r.rangemap.map_or(Cell::Empty, |d| Cell::num(d.ns(), Unit::Ns)),
            Cell::num(div(r.btree.ns(), r.maple.ns()), Unit::Times),
            r.rangemap.map_or(Cell::Empty, |d| Cell::num(div(d.ns(), r.maple.ns()), Unit::Times)),
            Cell::num(r.maple.spread(), Unit::Percent),
        ]);
    }
    s.table(tab);

    progress("compare: values boxed or in a slab, memory");
    s.text("Values of any type, two ways: `String` values boxed by the tree (`MapleTree<String>`: the slot holds a pointer to a box the tree makes, one allocation per value) and the same values in a per-map slab (`SlabValues`, `baselines.rs`: the slot holds an index into one `Vec` of values, whose erased places the next inserts take), both built by inserts in a random order; ns per operation. `iterate` sums the values' lengths. Resident bytes per range are measured as in the memory table (a fresh process; at 100 K ranges and more), the strings' own heap included in both. \"box / slab\" > 1: the slab is faster or smaller.");
    let mut vt =
        Table::new("values", 2, &["operation", "ranges", "boxed", "slab", "box / slab", "boxed spread", "slab spread"]);
    for r in &slab_rows {
        vt.row(vec![
            Cell::text(r.what),
            Cell::num(r.n as f64, Unit::Count),
            Cell::num(r.boxed.ns(), Unit::Ns),
            Cell::num(r.slab.ns(), Unit::Ns),
            Cell::num(div(r.boxed.ns(), r.slab.ns()), Unit::Times),
            Cell::num(r.boxed.spread(), Unit::Percent),
            Cell::num(r.slab.spread(), Unit::Percent),
        ]);
    }
    for &n in opts.sizes.iter().filter(|&&n| n >= 100_000) {
        let boxed = resident::measure(Build::StringsBoxed, n).map(|r| r.per_range);
        let slab = resident::measure(Build::StringsSlab, n).map(|r| r.per_range);
        let bytes = |b: Option<f64>| b.map_or_else(|| Cell::text("–"), |b| Cell::num(b, Unit::Bytes));
        vt.row(vec![
            Cell::text("resident bytes per range"),
            Cell::num(n as f64, Unit::Count),
            bytes(boxed),
            bytes(slab),
            boxed.zip(slab).map_or(Cell::Empty, |(b, s)| Cell::num(div(b, s), Unit::Times)),
            Cell::Empty,
            Cell::Empty,
        ]);
    }
    s.table(vt);
    for what in ["load (random)", "store (random)", "erase (random)", "iterate"] {
        let id = format!("compare-{}", what.split(' ').next().unwrap_or(what));
        let mut p = Plot::new(&id, &format!("{what}: ns per operation"), "ranges", "ns per operation").log(true, true);
        let pts = |f: &dyn Fn(&Row) -> Option<Timing>| -> Vec<(f64, f64)> {
            rows.iter().filter(|r| r.what == what).filter_map(|r| f(r).map(|t| (r.n as f64, t.ns()))).collect()
        };
        p.series("maple", pts(&|r| Some(r.maple)));
        p.series("BTreeMap", pts(&|r| Some(r.btree)));
        p.series("rangemap", pts(&|r| r.rangemap));
        s.plot(p);
    }

    progress("compare: memory");
    // A red-black tree of n nodes is at least ⌈log2(n+1)⌉ levels deep and
    // at most twice that; the maple tree series' rbtree of 1000 VMAs was 10 deep, its
    // maple tree 5.
    let mut mem = Table::new(
        "memory",
        2,
        &[
            "ranges",
            "flavour",
            "height",
            "rbtree height (best–worst)",
            "nodes",
            "bytes per range",
            "chunk bytes per range",
            "resident bytes per range",
            "in huge pages",
        ],
    );
    let rb = |n: u64| {
        let h = (n as f64 + 1.0).log2().ceil();
        Cell::text(format!("{h:.0}–{:.0}", 2.0 * h))
    };
    let mut resident_after = Vec::new();
    for &n in &opts.sizes {
        let rows = [
            ("plain (bulk)", Build::Bulk),
            ("gaps (bulk)", Build::BulkGaps),
            ("gaps (ascending inserts)", Build::Ascending),
            ("gaps (random inserts)", Build::Random),
        ];
        for (name, build) in rows {
            let Some(st) = build.tree(&build.order(n)).map(|t| t.stats()) else {
                continue;
            };
            // Below 100 K ranges the growth is a handful of pages, which
            // page granularity and the allocator's own pages swamp.
            let measured = if n >= 100_000 { resident::measure(build, n) } else { None };
            let resident = measured.map(|r| r.per_range);
            if name.ends_with("inserts)") {
                resident_after.push((n, name, resident));
            }
            mem.row(vec![
                Cell::num(n as f64, Unit::Count),
                Cell::text(name),
                Cell::num(st.height as f64, Unit::Count),
                rb(n),
                Cell::num((st.leaves + st.internal) as f64, Unit::Count),
                Cell::num(st.bytes_per_entry(), Unit::Bytes),
                Cell::num(st.held_bytes as f64 / st.entries.max(1) as f64, Unit::Bytes),
                resident.map_or_else(|| Cell::text("–"), |b| Cell::num(b, Unit::Bytes)),
                measured.map_or_else(|| Cell::text("–"), |r| Cell::num(100.0 * r.huge_share, Unit::Percent)),
            ]);
        }
    }
    s.text("Height and memory. \"bytes per range\": nodes × 256 over ranges; \"chunk bytes\": the 4 KiB chunks the tree holds for its nodes (16 nodes each, free cells and one spare chunk included) with their share of their blocks' header chunks (1/170); \"resident\": measured, the growth of the resident set (`VmRSS`) while a fresh `maple` process builds the same tree, so everything the tree costs is in it (on systems where node blocks come from the global allocator, its pages too; not measured below 100 K ranges, where a few pages swamp it); \"in huge pages\": the part of that growth the kernel maps with huge pages (`AnonHugePages`; a big tree's full 2 MiB node blocks, see docs/DESIGN.md, \"Huge pages\"; 0 % where the system has none). The maple tree series' claim: a maple tree is shorter than the rbtree it replaced (1000 VMAs: rbtree 10 levels, maple tree 5); the rbtree column is the range any red-black tree of that size must fall in.");
    s.table(mem);
    let at_1m = |what: &str| resident_after.iter().find(|(n, w, _)| *n >= 1_000_000 && *w == what).and_then(|r| r.2);
    let largest = |what: &str| {
        resident_after
            .iter()
            .rfind(|(_, w, _)| *w == what)
            .and_then(|r| r.2)
            .map_or("–".into(), |b| format!("{b:.1}"))
    };
    s.goal(Goal::new(
        "resident memory per range at 1 M ranges ≤ 45 bytes after random inserts, ≤ 37 after ascending ones",
        format!(
            "{} random, {} ascending (at {} ranges)",
            largest("gaps (random inserts)"),
            largest("gaps (ascending inserts)"),
            opts.sizes.last().copied().unwrap_or(0)
        ),
        match (at_1m("gaps (random inserts)"), at_1m("gaps (ascending inserts)")) {
            (Some(r), Some(a)) => Some(r <= 45.0 && a <= 37.0),
            _ => None,
        },
    ));

    let ratios = |what: &str, min_n: u64| -> Vec<f64> {
        rows.iter().filter(|r| r.what == what && r.n >= min_n).map(|r| div(r.btree.ns(), r.maple.ns())).collect()
    };
    let big = 100_000;
    let measured = opts.sizes.iter().any(|&n| n >= big);
    let goal = |what: &str, ops: &[&str], at_least: f64| {
        let rs: Vec<f64> = ops.iter().flat_map(|o| ratios(o, big)).collect();
        Goal::new(
            format!("{what} ≥ {at_least}× the BTreeMap idiom at ≥ 100 K ranges"),
            if rs.is_empty() { "not measured at this size".into() } else { span(&rs, 2, "×") },
            measured.then(|| rs.iter().all(|&r| r >= at_least)),
        )
    };
    s.goal(goal("random lookups", &["load (random)"], 1.5));
    s.goal(goal(
        "stores (ascending and random; the idiom trims or splits what a store overlaps, as ours does)",
        &["store (ascending)", "store (random)"],
        1.0,
    ));
    s.goal(goal("erases (of the entry holding an index)", &["erase (random)"], 1.0));
    s.goal(goal("iteration (by sum and by for loop)", &["iterate", "iterate (for loop)"], 0.8));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The idiom's store and erase do the maple tree's job: the same
    /// contents after every step of a random sequence with overlaps.
    #[test]
    fn the_idiom_does_the_same_job() {
        let mut rng = SmallRng::seed_from_u64(3);
        let mut t = MapleTree::<U63>::new();
        let mut m = BTreeMap::<u64, (u64, u64)>::new();
        for i in 0..3000u64 {
            let f = rng.gen_range(0..500u64);
            let l = f + rng.gen_range(0..40u64);
            if rng.gen_ratio(1, 3) {
                let k = rng.gen_range(0..540u64);
                assert_eq!(t.erase(k).map(|v| v.get()), btree_erase(&mut m, k), "erase {k}");
            } else {
                t.store_range(f..=l, u(i)).unwrap();
                btree_store(&mut m, f, l, i);
            }
            let a: Vec<_> = t.iter().map(|(r, v)| (*r.start(), *r.end(), v.get())).collect();
            let b: Vec<_> = m.iter().map(|(&s, &(e, v))| (s, e, v)).collect();
            assert_eq!(a, b, "step {i}");
        }
    }

    /// The idiom's set insert does `MapleSet::insert`'s job.
    #[test]
    fn the_set_idiom_does_the_same_job() {
        let mut rng = SmallRng::seed_from_u64(4);
        let mut t = MapleSet::new();
        let mut m = BTreeMap::<u64, u64>::new();
        for i in 0..3000u64 {
            let f = rng.gen_range(0..2000u64);
            let l = f + rng.gen_range(0..12u64);
            t.insert(f..=l).unwrap();
            btree_set_insert(&mut m, f, l);
            let a: Vec<_> = t.iter().map(|r| (*r.start(), *r.end())).collect();
            let b: Vec<_> = m.iter().map(|(&s, &e)| (s, e)).collect();
            assert_eq!(a, b, "step {i}");
        }
    }
}
