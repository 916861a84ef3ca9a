//! A write cursor used for many writes in a row: it keeps its walk through
//! writes that stay in its leaf (no re-walk) and walks again after the
//! others. After every step its position and value are checked against
//! the model, and after each run of steps the tree is validated and
//! compared whole.

mod common;

use common::*;
use maple_tree::{CursorMut, MapleTree, U63};
use rand::{rngs::SmallRng, Rng, SeedableRng};

/// The range of the model containing `i`, empty ranges included, with its
/// value.
fn model_range(m: &Model, i: u64) -> (u64, u64, Option<u64>) {
    if let Some((s, e, x)) = m.get_any(i) {
        return (s, e, Some(x));
    }
    let lo = m.map.range(..i).next_back().map_or(0, |(_, &(e, _))| e + 1);
    let hi = m.map.range(i..).next().map_or(u64::MAX, |(&s, _)| s - 1);
    (lo, hi, None)
}

fn at(c: &CursorMut<'_, U63>) -> (u64, u64, Option<u64>) {
    let r = c.range();
    (*r.start(), *r.end(), c.get().map(U63::get))
}

fn run(gaps: bool, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut t: MapleTree<U63> = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
    let mut m = Model::default();
    let span = 4000u64;
    let rounds = if cfg!(miri) { 12 } else { 400 };
    for round in 0..rounds {
        let mut c = t.cursor_mut(rng.gen_range(0..span));
        for step in 0..10 {
            let what = format!("gaps {gaps}, round {round}, step {step}");
            let (lo, _, _) = at(&c);
            // Mostly near the cursor (the same leaf), sometimes anywhere.
            let f = if rng.gen_bool(0.8) {
                lo.saturating_add(rng.gen_range(0..40)).min(span)
            } else {
                rng.gen_range(0..span)
            };
            let l = f + rng.gen_range(0..12);
            let x = (round * 10 + step) as u64;
            let expect_at = match rng.gen_range(0..8) {
                0 => {
                    let ok = c.insert_range(f..=l, v(x)).is_ok();
                    assert_eq!(ok, m.is_free(f, l), "{what}: insert {f}..={l}");
                    if ok {
                        m.store(f, l, x);
                        f
                    } else {
                        lo
                    }
                }
                1 => {
                    c.store_range(f..=l, v(x)).unwrap();
                    m.store(f, l, x);
                    f
                }
                2 => {
                    c.remove_range(f..=l).unwrap();
                    m.clear(f, l);
                    f
                }
                3 => {
                    let (s, e, old) = model_range(&m, lo);
                    let got = c.replace(v(x)).unwrap().map(|o| o.get());
                    assert_eq!(got, old, "{what}: replace");
                    m.store(s, e, x);
                    lo
                }
                4 => {
                    let (s, e, old) = model_range(&m, lo);
                    assert_eq!(c.erase().map(|o| o.get()), old, "{what}: erase");
                    if old.is_some() {
                        m.clear(s, e);
                    }
                    lo
                }
                5 => {
                    let hi = model_range(&m, lo).1;
                    let want = m.map.range(hi.saturating_add(1)..).next().filter(|_| hi < u64::MAX);
                    let got = c.next().map(|(r, x)| (*r.start(), *r.end(), x.get()));
                    assert_eq!(got, want.map(|(&s, &(e, x))| (s, e, x)), "{what}: next");
                    got.map_or(lo, |g| g.0)
                }
                6 => {
                    let got = c.prev_range().map(|(r, _)| *r.start());
                    assert_eq!(got, (lo > 0).then(|| model_range(&m, lo - 1).0), "{what}: prev_range");
                    got.unwrap_or(lo)
                }
                _ => {
                    let got = c.next_range().map(|(r, _)| *r.start());
                    let hi = model_range(&m, lo).1;
                    assert_eq!(got, (hi < u64::MAX).then(|| hi + 1), "{what}: next_range");
                    got.unwrap_or(lo)
                }
            };
            assert_eq!(at(&c), model_range(&m, expect_at), "{what}: where the cursor stands");
        }
        check(&t, &m, &format!("gaps {gaps}, round {round}"));
    }
}

#[test]
fn a_cursor_writes_many_times_in_a_row() {
    run(false, 1);
    run(true, 2);
}

/// `extend` stores each pair from the walk the tree kept from the last
/// write (stale after a write that replaced nodes, good after one that
/// stayed in its leaf or failed): whatever the order, the tree it builds
/// holds what the model holds after the same stores. Orders: ascending
/// touching, ascending with holes, overlapping (each pair cuts the last),
/// descending, scattered, with inverted ranges (skipped) in between.
#[test]
fn extend_builds_what_a_store_loop_builds() {
    let n: u64 = if cfg!(miri) { 24 } else { 3000 };
    let mut rng = SmallRng::seed_from_u64(8);
    let scattered: Vec<u64> = (0..n).map(|_| rng.gen_range(0..n)).collect();
    let orders: [(&str, Vec<(u64, u64)>); 6] = [
        ("touching", (0..n).map(|i| (i * 10, i * 10 + 9)).collect()),
        ("holes", (0..n).map(|i| (i * 16, i * 16 + 9)).collect()),
        ("overlapping", (0..n).map(|i| (i * 4, i * 4 + 9)).collect()),
        ("descending", (0..n).rev().map(|i| (i * 16, i * 16 + 9)).collect()),
        ("scattered", scattered.iter().map(|&i| (i * 7, i * 7 + rng.gen_range(0..20))).collect()),
        ("inverted", (0..n).map(|i| if i % 5 == 0 { (i * 8 + 3, i * 8) } else { (i * 8, i * 8 + 5) }).collect()),
    ];
    for gaps in [false, true] {
        for (name, pairs) in &orders {
            let value = |k: usize| U63::new(k as u64).unwrap();
            let mut want = Model::default();
            for (k, &(s, e)) in pairs.iter().enumerate() {
                if s <= e {
                    want.store(s, e, k as u64);
                }
            }
            let mut got = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
            got.extend(pairs.iter().enumerate().map(|(k, &(s, e))| (s..=e, value(k))));
            check(&got, &want, &format!("{name}, gaps {gaps}"));
        }
    }
}

/// Cursors and borrowing iterators hold their tree only until their last
/// use, as a plain borrow does: the tree is written, read and handed on
/// while they are still in scope. (This test is whether it compiles: a
/// walk that carried the tree's lifetime and had drop glue would hold the
/// borrow to the end of the scope.)
#[test]
fn cursors_hold_their_tree_until_their_last_use_only() {
    let mut t: MapleTree<U63> = (0..40u64).map(|i| (i * 10..=i * 10 + 4, U63::new(i).unwrap())).collect();
    let mut c = t.cursor_mut(0);
    c.replace(U63::new(7).unwrap()).unwrap();
    let r = t.cursor(15);
    assert_eq!(r.range(), 15..=19);
    let mut it = t.iter();
    assert_eq!(it.next().map(|(_, v)| v.get()), Some(7));
    t.store_range(0..=4, U63::new(1).unwrap()).unwrap();
    assert_eq!(t.load(2).map(U63::get), Some(1));
}
