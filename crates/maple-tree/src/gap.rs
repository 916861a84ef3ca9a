//! Gap search: the lowest or highest empty window of a given size.
//!
//! Gap-tracking internal nodes record, for every child, the largest empty
//! range below it, so the search descends only into children that can hold
//! the window: O(log n). Plain trees have no such record and the same code
//! degrades to a scan of the leaves that overlap the window.
//!
//! Because adjacent empty ranges are always merged (and empty ranges never
//! cross a node boundary unmerged), every maximal free run is one empty slot,
//! so a leaf needs no joining of neighbouring slots.

#[allow(unused_imports)]
use crate::prelude::*;

use crate::{
    error::Error,
    node::{range_len, NodeRef},
    raw::RawTree,
};

/// Checks the arguments shared by all gap searches.
pub(crate) fn check_window(min: u64, max: u64, size: u64) -> Result<(), Error> {
    if size == 0 || min > max || range_len(min, max) < size {
        return Err(Error::InvalidRange);
    }
    Ok(())
}

impl RawTree {
    /// Lowest `start` with `[start, start + size - 1]` empty and inside
    /// `[min, max]`.
    pub(crate) fn empty_area(&self, min: u64, max: u64, size: u64) -> Result<u64, Error> {
        check_window(min, max, size)?;
        match self.root_node() {
            None => Ok(min),
            Some(root) => self.search(root, 0, u64::MAX, min, max, size, false).ok_or(Error::Busy),
        }
    }

    /// Highest `start` with `[start, start + size - 1]` empty and inside
    /// `[min, max]`.
    pub(crate) fn empty_area_rev(&self, min: u64, max: u64, size: u64) -> Result<u64, Error> {
        check_window(min, max, size)?;
        match self.root_node() {
            None => Ok(max - (size - 1)),
            Some(root) => self.search(root, 0, u64::MAX, min, max, size, true).ok_or(Error::Busy),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn search(&self, node: NodeRef, nmin: u64, nmax: u64, wmin: u64, wmax: u64, size: u64, rev: bool) -> Option<u64> {
        let n = node.count();
        // Only slots overlapping the window are visited.
        let first = node.find_scan(wmin.max(nmin));
        let last = node.find_scan(wmax.min(nmax));
        let mut i = if rev { last } else { first };
        loop {
            let lo = node.slot_min(i, nmin);
            let hi = node.slot_max(i, nmax);
            let (clo, chi) = (lo.max(wmin), hi.min(wmax));
            if node.is_leaf() {
                if node.slot(i).is_null() && clo <= chi && range_len(clo, chi) >= size {
                    return Some(if rev { chi - (size - 1) } else { clo });
                }
            } else if !self.gaps || node.gap(i) >= size {
                // SAFETY: internal node, used slot.
                let child = unsafe { node.child(i) };
                if let Some(found) = self.search(child, lo, hi, wmin, wmax, size, rev) {
                    return Some(found);
                }
            }
            if rev {
                if i == first {
                    return None;
                }
                i -= 1;
            } else {
                if i == last || i + 1 >= n {
                    return None;
                }
                i += 1;
            }
        }
    }
}
