//! Baselines that are not a crate of their own: the designs our
//! structures replace, rebuilt as their documents describe them.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        RwLock,
    },
};

use maple_mm::swap::SwapExtents;

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
}
