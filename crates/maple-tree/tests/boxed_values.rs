//! Values the tree boxes itself (`u64`, `i64`, `u128`, `f64`, `String`,
//! `Vec<T>`, and a user's own types through `boxed_value!`) and `f32`
//! inline: random writes of every kind against a
//! per-index model, `validate()` after every write; every value made is
//! dropped exactly once (counted through `Vec<Tracked>`, and checked by
//! Miri's leak check); `get_mut` and `values_mut` change values in place.

use std::fmt::Debug;

mod common;

use common::counted::{live, Tracked};
use maple_tree::{ConcurrentMapleTree, Handle, MapleTree};

const SPAN: u64 = if cfg!(miri) { 50 } else { 600 };

const STEPS: usize = if cfg!(miri) { 12 } else { 2_000 };

/// The shared value model (`common::values`), plain trees.
fn against_model<V>(what: &str, pick: impl Fn(u64) -> V, owned: impl Fn(V::Borrowed<'_>) -> V)
where
    V: Handle + Clone + PartialEq + Debug,
{
    common::values::against_model(what, false, (SPAN, STEPS), pick, owned);
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

/// A user's own types, made values by `boxed_value!`: a struct, one
/// handed out by value, and a generic one.
#[derive(Clone, Debug, PartialEq)]
struct Mapping {
    name: String,
    flags: u32,
    owner: Vec<Tracked>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Wide([u64; 3]);

#[derive(Clone, Debug, PartialEq)]
struct Labelled<T>(T, &'static str);

maple_tree::boxed_value!(Mapping);
maple_tree::boxed_value!(copy Wide);
maple_tree::boxed_value!([T: 'static] Labelled<T>);

#[test]
fn a_users_own_types() {
    let mapping =
        |r: u64| Mapping { name: format!("m{r}"), flags: r as u32, owner: (0..r % 2).map(Tracked::new).collect() };
    against_model("Mapping", mapping, Mapping::clone);
    against_model("Wide", |r| Wide([r, !r, r << 3]), |v| v);
    against_model("Labelled<u8>", |r| Labelled(r as u8, "l"), Labelled::clone);
    assert_eq!(live(), 0, "values alive after every tree is gone");
    // Changed in place, through `get_mut`, `values_mut` and `update`.
    let mut t: MapleTree<Mapping> = MapleTree::new();
    t.insert_range(0..=9, mapping(4)).unwrap();
    t.get_mut(3).unwrap().flags = 7;
    for m in t.values_mut() {
        m.name.push('!');
    }
    t.update(5, |m| m.flags += 1);
    assert_eq!(t.load(0).map(|m| (m.name.as_str(), m.flags)), Some(("m4!", 8)));
}

/// A type that is not `Clone` is a value too: the writes that do not cut
/// an entry in two take it.
#[test]
fn a_value_that_cannot_be_cloned() {
    #[derive(Debug, PartialEq)]
    struct Unique(Tracked);
    maple_tree::boxed_value!(Unique);
    let mut t: MapleTree<Unique> = MapleTree::new();
    t.insert_range(0..=9, Unique(Tracked::new(1))).unwrap();
    t.insert_range(20..=29, Unique(Tracked::new(2))).unwrap();
    assert_eq!(t.erase(25), Some(Unique(Tracked::new(2))));
    assert_eq!(t.load(5), Some(&Unique(Tracked::new(1))));
    drop(t);
    assert_eq!(live(), 0);
}

#[test]
fn every_value_is_dropped_once() {
    against_model("Vec<Tracked>", |r| (0..r % 3).map(Tracked::new).collect::<Vec<_>>(), Vec::clone);
    assert_eq!(live(), 0, "values alive after every tree is gone");
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
