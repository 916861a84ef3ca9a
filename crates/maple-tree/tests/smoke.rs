mod common;
use common::*;
use maple_tree::MapleTree;

#[test]
fn sequential_and_reverse() {
    for gaps in [false, true] {
        for rev in [false, true] {
            let mut t = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
            let mut m = Model::default();
            let n = if cfg!(miri) { 24 } else { 1000u64 };
            for i in 0..n {
                let i = if rev { n - i } else { i };
                t.insert_range(i * 10..=i * 10 + 5, v(i)).unwrap();
                m.store(i * 10, i * 10 + 5, i);
                check(&t, &m, &format!("insert {i}"));
            }
            for i in 0..n {
                let i = if rev { n - i } else { i };
                assert_eq!(t.erase(i * 10 + 2).map(|x| x.get()), Some(i));
                m.erase(i * 10);
                check(&t, &m, &format!("erase {i}"));
            }
        }
    }
}

/// `fold` (what `sum`, `for_each`, `count` and friends run on) reads each
/// leaf straight from its arrays instead of stepping: it must hand out
/// exactly what `next` does, for every iterator kind, from any start,
/// after any number of steps, up to any end (ends inside a leaf, on a leaf
/// boundary, on an empty slot, beyond the last entry). The concurrent
/// tree's iterator: `tests/concurrent.rs`.
#[test]
fn folding_matches_stepping() {
    let n: u64 = if cfg!(miri) { 40 } else { 300 };
    // Every third index left empty; the others touching or spaced.
    let entries: Vec<(u64, u64)> =
        (0..n).filter(|i| i % 3 != 0).map(|i| (i * 10, i * 10 + if i % 2 == 0 { 9 } else { 5 })).collect();
    let all_ends = [0, 1, 15, 16, 99, n * 5 + 3, n * 10 - 1, n * 10 + 7, u64::MAX];
    // Under Miri: a start, a leaf's inside, the last entry's end, beyond.
    let ends: &[u64] = if cfg!(miri) { &[0, 99, n * 10 - 1, u64::MAX] } else { &all_ends };
    let steps: &[usize] = if cfg!(miri) { &[0, 2] } else { &[0, 1, 3, 17] };
    for gaps in [false, true] {
        let mut t: MapleTree<Box<u64>> = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
        for &(s, e) in &entries {
            t.insert_range(s..=e, Box::new(s)).unwrap();
        }
        assert!(t.stats().leaves >= if cfg!(miri) { 2 } else { 10 });
        for &a in ends {
            for &b in ends.iter().filter(|&&b| b >= a) {
                for &k in steps {
                    let what = format!("gaps {gaps}, [{a}, {b}], {k} steps");
                    // By `next` alone (what a `for` loop calls).
                    let mut want = Vec::new();
                    for (r, x) in t.range(a..=b) {
                        want.push((*r.start(), *r.end(), *x));
                    }
                    // `k` steps, then `fold`.
                    let mut it = t.range(a..=b);
                    let mut got: Vec<_> = it.by_ref().take(k).map(|(r, x)| (*r.start(), *r.end(), *x)).collect();
                    got = it.fold(got, |mut g, (r, x)| {
                        g.push((*r.start(), *r.end(), *x));
                        g
                    });
                    assert_eq!(got, want, "iter: {what}");
                    let mut it = t.range_cloned(a..=b);
                    let mut got: Vec<_> = it.by_ref().take(k).map(|(r, x)| (*r.start(), *r.end(), *x)).collect();
                    got.extend(it.fold(Vec::new(), |mut g, (r, x)| {
                        g.push((*r.start(), *r.end(), *x));
                        g
                    }));
                    assert_eq!(got, want, "range_cloned: {what}");
                    // Mutably: every value in the range once, whether
                    // stepped to or folded over.
                    let mut it = t.range_mut(a..=b);
                    it.by_ref().take(k).for_each(|(_, x)| *x += 1 << 40);
                    it.fold((), |(), (_, x)| *x += 1 << 40);
                    let mut after = Vec::new();
                    for (r, x) in t.range(a..=b) {
                        after.push((*r.start(), *r.end(), *x - (1 << 40)));
                    }
                    assert_eq!(after, want, "range_mut: {what}");
                    t.range_mut(a..=b).for_each(|(_, x)| *x -= 1 << 40);
                }
            }
        }
    }
}
