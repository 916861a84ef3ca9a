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
    node::{range_len, slot_bounds, NodeRef},
    raw::RawTree,
    sync::Ordering,
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
            Some(root) => self.search::<false>(root, 0, u64::MAX, min, max, size).ok_or(Error::Busy),
        }
    }

    /// Highest `start` with `[start, start + size - 1]` empty and inside
    /// `[min, max]`.
    pub(crate) fn empty_area_rev(&self, min: u64, max: u64, size: u64) -> Result<u64, Error> {
        check_window(min, max, size)?;
        match self.root_node() {
            None => Ok(max - (size - 1)),
            Some(root) => self.search::<true>(root, 0, u64::MAX, min, max, size).ok_or(Error::Busy),
        }
    }

    /// The search below `node` (over `[nmin, nmax]`): its slots that
    /// overlap the window, from the window's near end on, each node's
    /// arrays read directly (one look at the node's kind, not one per
    /// slot), and the scan stopped at the slot that holds the window's far
    /// end or the node's last slot rather than both ends found first.
    #[allow(clippy::too_many_arguments)]
    fn search<const REV: bool>(
        &self,
        node: NodeRef,
        nmin: u64,
        nmax: u64,
        wmin: u64,
        wmax: u64,
        size: u64,
    ) -> Option<u64> {
        let (piv, slots) = node.arrays();
        let leaf = node.is_leaf();
        let gaps = (self.gaps && !leaf).then(|| node.gap_array());
        let mut i = if REV { node.find_scan(wmax.min(nmax)) } else { node.find_scan(wmin.max(nmin)) };
        loop {
            let (lo, hi) = slot_bounds(piv, i, nmin, nmax);
            if leaf {
                let (clo, chi) = (lo.max(wmin), hi.min(wmax));
                if slots[i].load(Ordering::Relaxed).is_null() && clo <= chi && range_len(clo, chi) >= size {
                    return Some(if REV { chi - (size - 1) } else { clo });
                }
            } else if gaps.is_none_or(|g| g[i].load(Ordering::Relaxed) >= size) {
                // SAFETY: internal node, used slot.
                let child = unsafe { node.child(i) };
                if let Some(found) = self.search::<REV>(child, lo, hi, wmin, wmax, size) {
                    return Some(found);
                }
            }
            if REV {
                // The slot holding the window's start (or the node's
                // first) was the last to overlap it.
                if lo <= wmin || i == 0 {
                    return None;
                }
                i -= 1;
            } else {
                // The slot holding the window's end, or the node's last
                // used slot (the only one reaching the node's maximum).
                if hi >= wmax || hi >= nmax {
                    return None;
                }
                i += 1;
            }
        }
    }
}
