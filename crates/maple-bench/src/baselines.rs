//! Baselines that are not a crate of their own: the designs our
//! structures replace, rebuilt as their documents describe them.

use std::{
    collections::BTreeMap,
    ops::RangeInclusive,
    sync::{
        atomic::{AtomicUsize, Ordering},
        RwLock,
    },
};

use maple_mm::swap::SwapExtents;
use maple_tree::{MapleTree, U63};

/// The old swap-extent design: extents in a list, walked from a
/// one-entry "current extent" cache that every lookup reads and writes
/// (Linux before 2019).
#[derive(Debug)]
pub struct ListCache {
    list: Vec<(u64, u64, u64)>,
    cur: AtomicUsize,
}

impl ListCache {
    /// From extents in page order.
    pub fn new(map: &SwapExtents) -> ListCache {
        ListCache { list: map.iter().collect(), cur: AtomicUsize::new(0) }
    }

    /// The block of `page` (walks forward from the cached extent).
    pub fn map(&self, page: u64) -> Option<u64> {
        let n = self.list.len();
        let mut i = self.cur.load(Ordering::Relaxed).min(n.saturating_sub(1));
        for _ in 0..n {
            let (s, len, b) = self.list[i];
            if s <= page && page < s + len {
                self.cur.store(i, Ordering::Relaxed);
                return Some(b + (page - s));
            }
            i += 1;
            if i == n {
                i = 0;
            }
        }
        None
    }
}

/// The ordered-map design (the kernel's rbtree, here `BTreeMap` behind an
/// `RwLock`).
#[derive(Debug)]
pub struct Ordered(RwLock<BTreeMap<u64, (u64, u64)>>);

impl Ordered {
    /// From extents in page order.
    pub fn new(map: &SwapExtents) -> Ordered {
        Ordered(RwLock::new(map.iter().map(|(s, n, b)| (s, (n, b))).collect()))
    }

    /// The block of `page`.
    pub fn map(&self, page: u64) -> Option<u64> {
        let m = self.0.read().unwrap_or_else(|p| p.into_inner());
        m.range(..=page).next_back().and_then(|(&s, &(n, b))| (page < s + n).then(|| b + (page - s)))
    }
}

/// Values of any type in one slab per map, the tree's slot holding the
/// value's index: the design the maple tree's own boxing of values
/// (`MapleTree<String>`, one box per value) is measured against. A value
/// lives in a `Vec`; an erased one leaves its place to the next insert.
#[derive(Debug)]
pub struct SlabValues<V> {
    tree: MapleTree<U63>,
    values: Vec<Option<V>>,
    free: Vec<u64>,
}

impl<V> Default for SlabValues<V> {
    fn default() -> Self {
        SlabValues { tree: MapleTree::new(), values: Vec::new(), free: Vec::new() }
    }
}

impl<V> SlabValues<V> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `value` over `range` if nothing is there; else hands it
    /// back.
    pub fn insert_range(&mut self, range: RangeInclusive<u64>, value: V) -> Result<(), V> {
        let at = self.free.last().copied().unwrap_or(self.values.len() as u64);
        let index = U63::new(at).expect("fewer than 2^63 values");
        if self.tree.insert_range(range, index).is_err() {
            return Err(value);
        }
        if at == self.values.len() as u64 {
            self.values.push(Some(value));
        } else {
            self.free.pop();
            self.values[at as usize] = Some(value);
        }
        Ok(())
    }

    /// The value of the entry holding `index`.
    pub fn load(&self, index: u64) -> Option<&V> {
        let at = self.tree.load(index)?.get();
        self.values[at as usize].as_ref()
    }

    /// Removes the entry holding `index` and returns its value.
    pub fn erase(&mut self, index: u64) -> Option<V> {
        let at = self.tree.erase(index)?.get();
        self.free.push(at);
        self.values[at as usize].take()
    }

    /// The values in the order of their ranges.
    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.tree.iter().filter_map(|(_, at)| self.values[at.get() as usize].as_ref())
    }

    pub fn len(&self) -> usize {
        self.tree.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_old_designs_answer_like_the_tree() {
        let map = crate::workloads::swap_extents(300, 8);
        let (list, ordered) = (ListCache::new(&map), Ordered::new(&map));
        for p in (0..map.pages() + 10).rev() {
            assert_eq!(list.map(p), map.map(p).ok(), "page {p}");
            assert_eq!(ordered.map(p), map.map(p).ok(), "page {p}");
        }
    }

    /// The slab map holds what a tree of the same values holds, through
    /// inserts (some refused), erases (whose places the next inserts
    /// take) and lookups.
    #[test]
    fn slab_values_hold_what_a_tree_of_strings_holds() {
        let mut slab = SlabValues::new();
        let mut tree: MapleTree<String> = MapleTree::new();
        let mut x = 7u64;
        for step in 0..3000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let k = (x >> 33) % 500;
            let (f, l) = (k * 10, k * 10 + (x >> 20) % 12);
            if step % 3 == 2 {
                assert_eq!(slab.erase(f), tree.erase(f), "step {step}");
            } else {
                let v = format!("v{step}");
                assert_eq!(
                    slab.insert_range(f..=l, v.clone()).is_ok(),
                    tree.insert_range(f..=l, v).is_ok(),
                    "step {step}"
                );
            }
            assert_eq!(slab.load(f + 3), tree.load(f + 3), "step {step}");
        }
        assert_eq!(slab.len(), tree.len());
        assert!(slab.values().eq(tree.iter().map(|(_, v)| v)));
    }
}
