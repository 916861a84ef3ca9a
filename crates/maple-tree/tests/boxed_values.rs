//! Values the tree boxes itself (`u64`, `i64`, `u128`, `f64`, `String`,
//! `Vec<T>`) and `f32` inline: random writes of every kind against a
//! per-index model, `validate()` after every write; every value made is
//! dropped exactly once (counted through `Vec<Counted>`, and checked by
//! Miri's leak check); `get_mut` and `values_mut` change values in place.

use std::{
    fmt::Debug,
    sync::atomic::{AtomicI64, Ordering},
};

mod common;

use common::words;
use maple_tree::{ConcurrentMapleTree, Handle, MapleTree};

const SPAN: u64 = if cfg!(miri) { 50 } else { 600 };

/// Random writes of every kind on a tree of `V` and on a model (one
/// `Option<V>` per key); `owned` turns what a lookup hands out back into
/// a `V` to compare.
fn against_model<V>(what: &str, pick: impl Fn(u64) -> V, owned: impl Fn(V::Borrowed<'_>) -> V)
where
    V: Handle + Clone + PartialEq + Debug,
{
    let mut t: MapleTree<V> = MapleTree::new();
    let mut model: Vec<Option<V>> = vec![None; SPAN as usize];
    let mut next = words(0x243f_6a88_85a3_08d3 ^ what.len() as u64);
    let steps = if cfg!(miri) { 12 } else { 2_000 };
    for step in 0..steps {
        let first = next() % (SPAN - 20);
        let last = first + next() % 12;
        let v = pick(next());
        let span = first as usize..=last as usize;
        match next() % 5 {
            0 => {
                // Cuts an entry in two where it lies inside one: a clone.
                t.store_range(first..=last, v.clone()).unwrap();
                model[span].iter_mut().for_each(|m| *m = Some(v.clone()));
            }
            1 => {
                let free = model[span.clone()].iter().all(Option::is_none);
                assert_eq!(t.insert_range(first..=last, v.clone()).is_ok(), free, "{what} step {step}");
                if free {
                    model[span].iter_mut().for_each(|m| *m = Some(v.clone()));
                }
            }
            2 => {
                t.remove_range(first..=last).unwrap();
                model[span].iter_mut().for_each(|m| *m = None);
            }
            3 => {
                let had = t.get_range_cloned(first);
                assert_eq!(t.erase(first), had.as_ref().map(|(_, v)| v.clone()), "{what} step {step}");
                if let Some((r, _)) = had {
                    model[*r.start() as usize..=*r.end() as usize].iter_mut().for_each(|m| *m = None);
                }
            }
            _ => {
                // A copy of the tree, written to, leaves the tree as it was.
                let mut copy = t.try_dup().unwrap();
                copy.store_range(first..=last, v).unwrap();
            }
        }
        t.validate().unwrap_or_else(|e| panic!("{what} step {step}: {e:?}"));
        for (k, want) in model.iter().enumerate() {
            assert_eq!(t.load(k as u64).map(&owned).as_ref(), want.as_ref(), "{what} step {step} key {k}");
        }
    }
}

#[test]
fn wide_copy_values() {
    against_model("u64", |r| r, |v| v);
    against_model("i64", |r| r as i64, |v| v);
    against_model("usize", |r| r as usize, |v| v);
    against_model("u128", |r| u128::from(r) << 64 | u128::from(!r), |v| v);
    against_model("f64", |r| f64::from_bits(r & !(0x7ff << 52)), |v| v);
    against_model("f32", |r| f32::from_bits(r as u32 & 0x3fff_ffff), |v| v);
}

#[test]
fn owning_values() {
    against_model("String", |r| format!("value {r:x}"), String::clone);
    against_model("Vec<u8>", |r| r.to_le_bytes()[..(r % 9) as usize].to_vec(), Vec::clone);
}

/// A value that counts how many of it are alive.
static LIVE: AtomicI64 = AtomicI64::new(0);

#[derive(Debug, PartialEq)]
struct Counted(u64);

impl Counted {
    fn new(v: u64) -> Counted {
        LIVE.fetch_add(1, Ordering::Relaxed);
        Counted(v)
    }
}

impl Clone for Counted {
    fn clone(&self) -> Counted {
        Counted::new(self.0)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

#[test]
fn every_value_is_dropped_once() {
    against_model("Vec<Counted>", |r| (0..r % 3).map(Counted::new).collect::<Vec<_>>(), Vec::clone);
    assert_eq!(LIVE.load(Ordering::Relaxed), 0, "values alive after every tree is gone");
}

#[test]
fn values_change_in_place() {
    let mut t: MapleTree<String> = MapleTree::new();
    t.insert_range(0..=9, "a".to_string()).unwrap();
    t.insert_range(20..=29, "b".to_string()).unwrap();
    t.get_mut(5).unwrap().push('!');
    for v in t.values_mut() {
        v.push('?');
    }
    assert_eq!(t.iter().map(|(r, v)| (r, v.as_str())).collect::<Vec<_>>(), [(0..=9, "a!?"), (20..=29, "b?")]);
    let mut n: MapleTree<u64> = MapleTree::new();
    n.insert_range(0..=9, u64::MAX).unwrap();
    *n.get_mut(3).unwrap() -= 1;
    assert_eq!(n.load(9), Some(u64::MAX - 1));
}

// (Under Miri with strict provenance, crossbeam-epoch cannot run: the
// concurrent tree has its own Miri run, in ci/miri.sh.)
#[test]
#[cfg_attr(miri, ignore)]
fn the_concurrent_tree_takes_them_too() {
    let t: ConcurrentMapleTree<String> = ConcurrentMapleTree::new();
    t.lock().insert_range(10..=19, "ten".to_string()).unwrap();
    // Cut in two: the right half is a clone.
    t.lock().remove_range(14..=15).unwrap();
    assert_eq!(t.load_with(12, |v| v.cloned()), Some("ten".to_string()));
    assert_eq!(t.load_with(17, |v| v.cloned()), Some("ten".to_string()));
    assert_eq!(t.load_with(14, |v| v.cloned()), None);
}

/// `==`, `Debug` and the merging stores look at boxed values in place
/// (`Handle::with_ref`: under Miri, without claiming the box).
#[test]
fn boxed_values_compare_print_and_merge() {
    let mut a: MapleTree<String> = MapleTree::new();
    let mut b: MapleTree<Box<String>> = MapleTree::new();
    for at in [0u64, 10, 30] {
        a.store_range_merging(at..=at + 9, "x".to_string()).unwrap();
        b.store_range_merging(at..=at + 9, Box::new("x".to_string())).unwrap();
    }
    assert_eq!(a.iter().map(|(r, _)| r).collect::<Vec<_>>(), [0..=19, 30..=39]);
    assert_eq!(b.len(), 2);
    assert_eq!(a.clone(), a);
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    assert!(a.dump().contains("\"x\""));
}
