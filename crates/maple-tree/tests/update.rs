//! `update`, `for_each_mut` and `for_each_value_mut`: values changed
//! where they are stored, for inline values, handles and the values the tree boxes itself, checked
//! against the entries as read before the change; a closure that panics
//! leaves every value owned once.

use std::panic::{catch_unwind, AssertUnwindSafe};

mod common;

use common::counted::{live, Tracked};
use maple_tree::MapleTree;
use rand::{rngs::SmallRng, Rng, SeedableRng};

/// The entries, read through the iterator.
fn entries<V: Clone + maple_tree::Handle>(t: &MapleTree<V>) -> Vec<(u64, u64, V)>
where
    for<'a> V::Borrowed<'a>: Into<V>,
{
    t.iter().map(|(r, v)| (*r.start(), *r.end(), v.into())).collect()
}

/// Random stores and erases of `u32` values (stored inline), each
/// followed by an `update` at a random index or a `for_each_mut` over the
/// whole tree, against the entries read before it with the same change
/// applied; `validate()` after every step.
#[test]
fn inline_values_change_as_the_entries_say() {
    let steps = if cfg!(miri) { 60 } else { 3000 };
    for gaps in [false, true] {
        let mut rng = SmallRng::seed_from_u64(61);
        let mut t: MapleTree<u32> = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
        for step in 0..steps {
            let f = rng.gen_range(0..2000u64);
            let l = f + rng.gen_range(0..20);
            if rng.gen_bool(0.8) {
                t.store_range(f..=l, rng.gen()).unwrap();
            } else {
                t.remove_range(f..=l).unwrap();
            }
            if step % 3 == 0 {
                t.reserve_range(l + 1..=l + 1).ok();
            }
            let mut want = entries(&t);
            if step % 50 == 0 {
                t.for_each_mut(|r, v| *v = v.wrapping_mul(3) ^ *r.start() as u32);
                for (s, _, v) in &mut want {
                    *v = v.wrapping_mul(3) ^ *s as u32;
                }
            } else if step % 50 == 25 {
                t.for_each_value_mut(|v| *v = v.rotate_left(5) ^ 0x5a);
                for (_, _, v) in &mut want {
                    *v = v.rotate_left(5) ^ 0x5a;
                }
            } else {
                let k = rng.gen_range(0..2030u64);
                let got = t.update(k, |v| {
                    *v = v.wrapping_add(7);
                    *v
                });
                let e = want.iter_mut().find(|(s, e, _)| *s <= k && k <= *e);
                let expect = e.map(|(_, _, v)| {
                    *v = v.wrapping_add(7);
                    *v
                });
                assert_eq!(got, expect, "gaps {gaps}, step {step}: update at {k}");
            }
            t.validate().unwrap_or_else(|e| panic!("gaps {gaps}, step {step}: {e:?}"));
            assert_eq!(entries(&t), want, "gaps {gaps}, step {step}");
        }
    }
}

/// Handles replaced by the closure (a new box for the old): the old one
/// is dropped, the new one owned by the tree, and dropping the tree drops
/// each value once. A `String`, which the tree boxes itself, comes back
/// changed.
#[test]
#[allow(clippy::replace_box)] // replacing the handle is what is tested
fn handles_may_be_replaced_and_boxed_values_change() {
    {
        let mut t: MapleTree<Box<Tracked>> =
            (0..300u64).map(|i| (i * 8..=i * 8 + 3, Box::new(Tracked::new(i)))).collect();
        t.for_each_mut(|_, v| *v = Box::new(Tracked::new(v.0 + 1000)));
        assert_eq!(live(), 300);
        t.for_each_value_mut(|v| *v = Box::new(Tracked::new(v.0 - 1000)));
        t.for_each_value_mut(|v| *v = Box::new(Tracked::new(v.0 + 1000)));
        assert_eq!(live(), 300);
        assert_eq!(t.update(17, |v| v.0), Some(1002));
        assert!(t.iter().map(|(_, v)| v.0).eq(1000..1300));
        t.validate().unwrap();
    }
    assert_eq!(live(), 0);
    let mut s: MapleTree<String> = MapleTree::new();
    s.insert_range(5..=9, "map".to_string()).unwrap();
    s.update(7, |v| v.push_str("le")).unwrap();
    s.for_each_mut(|_, v| v.push('!'));
    s.for_each_value_mut(|v| v.push('?'));
    assert_eq!(s.load(5).map(String::as_str), Some("maple!?"));
}

/// A closure that panics part way: the entries before are changed, the
/// one it panicked on keeps whatever it had when it panicked, the rest are
/// as they were; the tree is whole and every value is dropped once.
#[test]
#[allow(clippy::replace_box)] // replacing the handle is what is tested
fn a_closure_that_panics_leaves_every_value_owned_once() {
    {
        let mut t: MapleTree<Box<Tracked>> =
            (0..100u64).map(|i| (i * 8..=i * 8 + 3, Box::new(Tracked::new(i)))).collect();
        let res = catch_unwind(AssertUnwindSafe(|| {
            t.for_each_mut(|_, v| {
                if v.0 == 40 {
                    *v = Box::new(Tracked::new(4000));
                    panic!("at 40");
                }
                v.0 += 1000;
            })
        }));
        assert!(res.is_err());
        t.validate().unwrap();
        let got: Vec<u64> = t.iter().map(|(_, v)| v.0).collect();
        let want: Vec<u64> = (0..100)
            .map(|i| {
                if i < 40 {
                    i + 1000
                } else if i == 40 {
                    4000
                } else {
                    i
                }
            })
            .collect();
        assert_eq!(got, want);
        assert_eq!(live(), 100);
        let res = catch_unwind(AssertUnwindSafe(|| {
            t.for_each_value_mut(|v| {
                if v.0 == 60 {
                    *v = Box::new(Tracked::new(60));
                    panic!("at 60");
                }
            })
        }));
        assert!(res.is_err());
        t.validate().unwrap();
        assert!(t.iter().map(|(_, v)| v.0).eq(want.iter().copied()));
        assert_eq!(live(), 100);
        let res = catch_unwind(AssertUnwindSafe(|| t.update(8 * 50, |_| panic!("in update"))));
        assert!(res.is_err());
        assert_eq!(t.load(8 * 50).map(|v| v.0), Some(50));
        assert_eq!(live(), 100);
    }
    assert_eq!(live(), 0);
}
