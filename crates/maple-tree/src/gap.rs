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

use arrayvec::ArrayVec;

use crate::{
    error::Error,
    node::{range_len, slot_bounds, NodeRef, MAX_HEIGHT},
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
            Some(root) => self.search::<false>(root, min, max, size).ok_or(Error::Busy),
        }
    }

    /// Highest `start` with `[start, start + size - 1]` empty and inside
    /// `[min, max]`.
    pub(crate) fn empty_area_rev(&self, min: u64, max: u64, size: u64) -> Result<u64, Error> {
        check_window(min, max, size)?;
        match self.root_node() {
            None => Ok(max - (size - 1)),
            Some(root) => self.search::<true>(root, min, max, size).ok_or(Error::Busy),
        }
    }

    /// Where a cyclic allocation of one id in `[lo, hi]` goes (kernel
    /// `mas_alloc_cyclic`): the lowest free id from `next` on, else, once,
    /// from the window's start. Also says whether the search wrapped (or a
    /// previous allocation of `u64::MAX` wrapped `next` to 0). The caller
    /// stores there and then calls [`cyclic_taken`](Self::cyclic_taken).
    pub(crate) fn cyclic_search(&self, lo: u64, hi: u64, next: u64) -> (Result<u64, Error>, bool) {
        let start = next.max(lo);
        let mut found = if start > hi { Err(Error::Busy) } else { self.empty_area(start, hi, 1) };
        let mut wrapped = found.is_ok() && self.cyclic_wrapped.get() != 0;
        if found == Err(Error::Busy) && start > lo {
            wrapped = true;
            found = self.empty_area(lo, (start - 1).min(hi), 1);
        }
        (found, wrapped)
    }

    /// Records that id `id` was allocated cyclically: `*next` becomes the
    /// id after it (0 after `max`, the last index of the key type), and a
    /// wrap to 0 is remembered for the next search.
    pub(crate) fn cyclic_taken(&self, id: u64, next: &mut u64, max: u64) {
        *next = if id >= max { 0 } else { id + 1 };
        self.cyclic_wrapped.set(usize::from(*next == 0));
    }

    /// The search: from the root down, in each node the slots that overlap
    /// the window from its near end on, into the first child whose largest
    /// gap is big enough; back up to the next slot of the parent when a
    /// child holds no fit inside the window (its gap lay outside it). Each
    /// node's arrays are read directly (one look at its kind, not one per
    /// slot), a node's scan stops at the slot holding the window's far end
    /// or at its last slot, and the way back up is a small stack of resume
    /// points rather than recursion (a call per level cost the kernel's
    /// first-fit search a third of its time).
    fn search<'t, const REV: bool>(&'t self, root: NodeRef<'t>, wmin: u64, wmax: u64, size: u64) -> Option<u64> {
        // Resume points: an internal node, its bounds, and the slot whose
        // child is being searched.
        let mut up: ArrayVec<(NodeRef<'t>, u64, u64, usize), MAX_HEIGHT> = ArrayVec::new();
        let (mut node, mut nmin, mut nmax) = (root, 0, u64::MAX);
        let mut i = first_slot::<REV>(node, nmin, nmax, wmin, wmax);
        loop {
            let (piv, slots) = node.arrays();
            let leaf = node.is_leaf();
            let gaps = (self.gaps && !leaf).then(|| node.gap_array());
            // Scan this node from slot `i`; `true` once a child is entered.
            let entered = loop {
                let (lo, hi) = slot_bounds(piv, i, nmin, nmax);
                if leaf {
                    let (clo, chi) = (lo.max(wmin), hi.min(wmax));
                    if slots[i].load(Ordering::Relaxed).is_null() && clo <= chi && range_len(clo, chi) >= size {
                        return Some(if REV { chi - (size - 1) } else { clo });
                    }
                } else if gaps.is_none_or(|g| g[i].load(Ordering::Relaxed) >= size) {
                    up.push((node, nmin, nmax, i));
                    // SAFETY: internal node, used slot.
                    node = unsafe { node.child(i) };
                    (nmin, nmax) = (lo, hi);
                    break true;
                }
                if last_in_window::<REV>(i, lo, hi, nmax, wmin, wmax) {
                    break false;
                }
                i = if REV { i - 1 } else { i + 1 };
            };
            if entered {
                i = first_slot::<REV>(node, nmin, nmax, wmin, wmax);
                continue;
            }
            // This node holds no fit: on in the nearest parent with slots
            // left in the window (none left anywhere: no fit at all).
            loop {
                let (p, pmin, pmax, pi) = up.pop()?;
                let (lo, hi) = slot_bounds(p.arrays().0, pi, pmin, pmax);
                if !last_in_window::<REV>(pi, lo, hi, pmax, wmin, wmax) {
                    (node, nmin, nmax) = (p, pmin, pmax);
                    i = if REV { pi - 1 } else { pi + 1 };
                    break;
                }
            }
        }
    }
}

/// The slot of `node` (over `[nmin, nmax]`) where a search of the window
/// `[wmin, wmax]` starts: the one holding the window's near end. A forward
/// search whose window covers the node's start begins at slot 0 without a
/// count (every node of a search from index 0).
#[inline(always)]
fn first_slot<const REV: bool>(node: NodeRef<'_>, nmin: u64, nmax: u64, wmin: u64, wmax: u64) -> usize {
    match REV {
        true => node.find(wmax.min(nmax)),
        false if wmin <= nmin => 0,
        false => node.find(wmin),
    }
}

/// True if slot `i` (over `[lo, hi]`, in a node whose maximum is `nmax`)
/// is the last a search of the window `[wmin, wmax]` visits in its node:
/// backwards, the slot holding the window's start or the node's first;
/// forwards, the slot holding the window's end or the node's last (the
/// only one reaching the node's maximum).
#[inline(always)]
fn last_in_window<const REV: bool>(i: usize, lo: u64, hi: u64, nmax: u64, wmin: u64, wmax: u64) -> bool {
    if REV {
        lo <= wmin || i == 0
    } else {
        hi >= wmax || hi >= nmax
    }
}
