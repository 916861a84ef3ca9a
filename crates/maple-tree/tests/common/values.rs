//! Random writes of every kind on a tree of some value type and on a
//! model holding one `Option<V>` per key: what the value tests
//! (`inline_values.rs`, `boxed_values.rs`) run for each type.

use std::fmt::Debug;

use maple_tree::{Handle, MapleTree};

use super::words;

/// Writes (stores, inserts, removals, merging stores, erases, and writes
/// to a copy, which must leave the tree as it was) over keys `0..span`,
/// `steps` of them, on a plain or gap-tracking tree of `V`; after each,
/// the tree validated and every key and entry compared with the model.
/// `pick` makes a value from a random word; `owned` turns what a lookup
/// hands out back into a `V`. Ends with a copy of the tree compared.
pub fn against_model<V>(
    what: &str,
    gaps: bool,
    (span, steps): (u64, usize),
    pick: impl Fn(u64) -> V,
    owned: impl Fn(V::Borrowed<'_>) -> V,
) where
    V: Handle + Clone + PartialEq + Debug,
{
    let what = format!("{what}, gaps {gaps}");
    let mut t: MapleTree<V> = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
    let mut model: Vec<Option<V>> = vec![None; span as usize];
    let mut next = words(0x9e37_79b9_7f4a_7c15 ^ what.len() as u64);
    for step in 0..steps {
        let first = next() % (span - 20);
        let last = first + next() % 12;
        let v = pick(next());
        let keys = first as usize..=last as usize;
        match next() % 6 {
            0 => {
                // Cuts an entry in two where it lies inside one: a clone.
                t.store_range(first..=last, v.clone()).unwrap();
                model[keys].iter_mut().for_each(|m| *m = Some(v.clone()));
            }
            1 => {
                let free = model[keys.clone()].iter().all(Option::is_none);
                assert_eq!(t.insert_range(first..=last, v.clone()).is_ok(), free, "{what} step {step}");
                if free {
                    model[keys].iter_mut().for_each(|m| *m = Some(v.clone()));
                }
            }
            2 => {
                t.remove_range(first..=last).unwrap();
                model[keys].iter_mut().for_each(|m| *m = None);
            }
            3 => {
                t.store_range_merging(first..=last, v.clone()).unwrap();
                model[keys].iter_mut().for_each(|m| *m = Some(v.clone()));
            }
            4 => {
                let had = t.get_range_cloned(first);
                assert_eq!(t.erase(first), had.as_ref().map(|(_, v)| v.clone()), "{what} step {step}");
                if let Some((r, _)) = had {
                    model[*r.start() as usize..=*r.end() as usize].iter_mut().for_each(|m| *m = None);
                }
            }
            _ => {
                let mut copy = t.try_dup().unwrap();
                copy.store_range(first..=last, v).unwrap();
            }
        }
        t.validate().unwrap_or_else(|e| panic!("{what} step {step}: {e:?}"));
        for (k, want) in model.iter().enumerate() {
            assert_eq!(t.load(k as u64).map(&owned).as_ref(), want.as_ref(), "{what} step {step} key {k}");
        }
        // Every entry holds what the model has under all its keys.
        for (r, v) in t.iter() {
            let v = owned(v);
            for k in r {
                assert_eq!(model[k as usize].as_ref(), Some(&v), "{what} step {step} key {k}");
            }
        }
    }
    let copy = t.try_dup().unwrap();
    assert!(copy.iter().map(|(r, v)| (r, owned(v))).eq(t.iter().map(|(r, v)| (r, owned(v)))), "{what}: copy");
}
