//! Differential test of `ConcurrentMapleTree`'s whole API (guarded reads,
//! the writer guard, the write cursor, `with_mut`) against the reference
//! model, single-threaded, with `validate()` after every step. The races
//! themselves are in `concurrent.rs` and the loom models.

mod common;

use common::{expect_clear, expect_insert, expect_store, key, v, Model, RESERVED};
use maple_tree::{ConcurrentMapleTree, U63};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Store(u64, u64, u64),
    Insert(u64, u64, u64),
    Clear(u64, u64),
    Erase(u64),
    Load(u64),
    Gap(u64, u64, u64),
    Alloc(u64, u64, u64, bool),
    Reserve(u64, u64),
    /// Write cursor at the index: replace the next entry's value.
    CursorReplace(u64, u64),
    /// Write cursor at the index: erase the range it stands on.
    CursorErase(u64),
    /// The same store, through `with_mut`.
    WithMut(u64, u64, u64),
    Reclaim,
}

fn apply(t: &mut ConcurrentMapleTree<U63>, m: &mut Model, op: &Op, what: &str) {
    match *op {
        Op::Store(f, l, x) => expect_store(t.lock().store_range(f..=l, v(x)).map_err(|e| e.cause), m, (f, l, x), what),
        Op::Insert(f, l, x) => {
            expect_insert(t.lock().insert_range(f..=l, v(x)).map_err(|e| e.cause), m, (f, l, x), what)
        }
        Op::Clear(f, l) => expect_clear(t.lock().remove_range(f..=l), m, (f, l), what),
        Op::Erase(i) => {
            let got = t.lock().erase(i).unwrap();
            let want = m.erase(i).is_some();
            assert_eq!(got, want, "{what}");
        }
        Op::Load(i) => {
            let g = t.pin();
            let want = m.get(i);
            assert_eq!(t.load(i, &g).map(U63::get), want.map(|e| e.2), "{what}");
            let got = t.get_range(i, &g).map(|(r, x)| (*r.start(), *r.end(), x.get()));
            assert_eq!(got, want, "{what}");
            assert_eq!(t.load_cloned(i).map(U63::get), want.map(|e| e.2), "{what}");
            assert_eq!(t.load_with(i, |x| x.map(U63::get)), want.map(|e| e.2), "{what}");
            let c = t.cursor(i, &g);
            assert!(c.range().contains(&i), "{what}");
            assert_eq!(c.get().map(U63::get), want.map(|e| e.2), "{what}");
        }
        Op::Gap(a, b, s) => assert_eq!(t.empty_area(a..=b, s), m.gap(a, b, s, false), "{what}"),
        Op::Alloc(a, b, s, rev) => {
            let want = m.gap(a, b, s, rev);
            let got = if rev { t.lock().alloc_range_rev(a..=b, s, v(s)) } else { t.lock().alloc_range(a..=b, s, v(s)) };
            assert_eq!(got.map_err(|e| e.cause), want, "{what}");
            if let Ok(start) = want {
                m.store(start, start + (s - 1), s);
            }
        }
        Op::Reserve(f, l) => {
            let r = t.lock().reserve_range(f..=l);
            if f <= l && m.is_free(f, l) {
                r.unwrap();
                m.store(f, l, RESERVED);
            } else {
                assert!(r.is_err(), "{what}");
            }
        }
        Op::CursorReplace(i, x) => {
            let mut w = t.lock();
            let mut c = w.cursor(i);
            let next = c.next().map(|(r, _)| (*r.start(), *r.end()));
            // `next` moves past the range containing `i` (entry or empty)
            // to the first entry after it.
            let cur_end = match m.get_any(i) {
                Some(e) => e.1,
                None => m.free_runs().into_iter().find(|r| r.0 <= i && i <= r.1).expect("i is somewhere").1,
            };
            let want_next = m.values().into_iter().find(|e| e.0 > cur_end).map(|e| (e.0, e.1));
            assert_eq!(next, want_next, "{what}: write cursor next");
            if let Some((s, e)) = next {
                c.replace(v(x)).unwrap();
                assert_eq!(c.range(), s..=e, "{what}");
                m.store(s, e, x);
            }
        }
        Op::CursorErase(i) => {
            let mut w = t.lock();
            let mut c = w.cursor(i);
            let got = c.erase().unwrap();
            let want = m.erase(i).is_some();
            assert_eq!(got, want, "{what}");
            assert!(c.get().is_none() && c.range().contains(&i), "{what}");
        }
        Op::WithMut(f, l, x) => {
            expect_store(t.with_mut(|mt| mt.store_range(f..=l, v(x)).map_err(|e| e.cause)), m, (f, l, x), what)
        }
        Op::Reclaim => t.lock().reclaim(),
    }
    if let Err(e) = t.validate() {
        panic!("{what}: {e}");
    }
    let g = t.pin();
    let got: Vec<_> = t.iter(&g).map(|(r, x)| (*r.start(), *r.end(), x.get())).collect();
    assert_eq!(got, m.values(), "{what}: contents");
    assert_eq!(t.len(), got.len(), "{what}: len");
}

fn op(max: u64) -> impl Strategy<Value = Op> {
    let range = (key(max), 0..64u64).prop_map(|(f, len)| (f, f.saturating_add(len)));
    prop_oneof![
        6 => (range.clone(), any::<u32>()).prop_map(|((f, l), x)| Op::Store(f, l, x.into())),
        6 => (range.clone(), any::<u32>()).prop_map(|((f, l), x)| Op::Insert(f, l, x.into())),
        2 => range.clone().prop_map(|(f, l)| Op::Clear(f, l)),
        1 => (key(max), key(max)).prop_map(|(f, l)| Op::Clear(f.min(l), f.max(l))),
        3 => key(max).prop_map(Op::Erase),
        2 => key(max).prop_map(Op::Load),
        1 => (key(max), key(max), 0..100u64).prop_map(|(a, b, s)| Op::Gap(a.min(b), a.max(b), s)),
        1 => (key(max), key(max), 1..50u64, any::<bool>()).prop_map(|(a, b, s, r)| Op::Alloc(a.min(b), a.max(b), s, r)),
        1 => range.clone().prop_map(|(f, l)| Op::Reserve(f, l)),
        2 => (key(max), any::<u32>()).prop_map(|(i, x)| Op::CursorReplace(i, x.into())),
        1 => key(max).prop_map(Op::CursorErase),
        2 => (range, any::<u32>()).prop_map(|((f, l), x)| Op::WithMut(f, l, x.into())),
        1 => Just(Op::Reclaim),
    ]
}

proptest! {
    // Under Miri: two short cases, and no failure file (Miri's isolation
    // has no file system).
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 2 } else { 128 },
        failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
        ..ProptestConfig::default()
    })]

    #[test]
    fn concurrent_api_matches_the_model(ops in prop::collection::vec(op(600), 1..if cfg!(miri) { 40 } else { 300 }), gaps: bool) {
        let mut t = if gaps { ConcurrentMapleTree::with_gaps() } else { ConcurrentMapleTree::new() };
        let mut m = Model::default();
        for (i, op) in ops.iter().enumerate() {
            apply(&mut t, &mut m, op, &format!("step {i}: {op:x?}"));
        }
    }
}
