//! Stepping through the tree from a walk (a [`Path`], root to leaf):
//! to the next or previous slot, leaf, sibling or cousin, and finding the
//! level where the walk to a neighbouring leaf forks off, without a walk
//! from the root. The writes ask it about a leaf's neighbours, the split
//! and rebuild for a node's siblings, the cursors and the gap iterator
//! step their [`LeafWalk`] with it. (The entry iterators step with their
//! own bounds and masks, in `iter.rs`.)

use crate::{
    node::{slot_bounds, NodeRef},
    raw::{prefetch_beside, LeafWalk, Level, Path},
    sync::Ordering,
};

/// Appends levels below `path`'s last (internal) level, always taking
/// the first (`rightmost == false`) or last slot.
pub(crate) fn descend_edge(path: &mut Path<'_>, rightmost: bool) {
    loop {
        let top = *path.last().expect("descend from a non-empty path");
        if top.node.is_leaf() {
            return;
        }
        let (min, max) = top.slot_range();
        // SAFETY: internal node, used slot `top.off`.
        let node = unsafe { top.node.child(top.off) };
        let off = if rightmost { node.count() - 1 } else { 0 };
        path.push(Level { node, min, max, off });
    }
}

/// Appends levels below `path`'s last (internal) level down to level
/// `depth` (not to the leaves), each on its node's first slot: the left
/// edge of the subtree the last level's slot leads to, as far as `depth`.
pub(crate) fn descend_left_edge_to(path: &mut Path<'_>, depth: usize) {
    while path.len() <= depth {
        let top = path[path.len() - 1];
        let (min, max) = top.slot_range();
        // SAFETY: above level `depth`, so an internal node, at a used slot.
        let node = unsafe { top.node.child(top.off) };
        path.push(Level { node, min, max, off: 0 });
    }
}

/// Moves level `d` of `path` to its node's next (`forward`) or previous
/// sibling under the same parent (level `d - 1`), on its first slot, and
/// returns that level. The levels below `d` are left as they were: the
/// caller truncates or rewrites them. The sibling must exist.
pub(crate) fn sibling_at<'t>(path: &mut Path<'t>, d: usize, forward: bool) -> Level<'t> {
    let p = &mut path[d - 1];
    if forward {
        p.off += 1;
    } else {
        p.off -= 1;
    }
    let (min, max) = p.slot_range();
    // SAFETY: level `d - 1` is above level `d`, so an internal node, and
    // the caller says the slot stepped to is used.
    let node = unsafe { p.node.child(p.off) };
    path[d] = Level { node, min, max, off: 0 };
    path[d]
}

/// Moves `path` to the next leaf slot; false (path unchanged) at the end.
pub(crate) fn step_next(path: &mut Path<'_>) -> bool {
    let mut depth = path.len();
    while depth > 0 {
        let lv = &mut path[depth - 1];
        if lv.node.has_next(lv.off) {
            lv.off += 1;
            path.truncate(depth);
            descend_edge(path, false);
            return true;
        }
        depth -= 1;
    }
    false
}

/// Moves `path` to the previous leaf slot; false (path unchanged) at the start.
pub(crate) fn step_prev(path: &mut Path<'_>) -> bool {
    let mut depth = path.len();
    while depth > 0 {
        let lv = &mut path[depth - 1];
        if lv.off > 0 {
            lv.off -= 1;
            path.truncate(depth);
            descend_edge(path, true);
            return true;
        }
        depth -= 1;
    }
    false
}

impl LeafWalk<'_> {
    /// Moves to the next slot; false (unmoved) at the end.
    #[inline]
    pub(crate) fn next(&mut self) -> bool {
        match self.path.last_mut() {
            None => false,
            Some(lv) if lv.node.has_next(lv.off) => {
                lv.off += 1;
                true
            }
            Some(_) => step_next(&mut self.path),
        }
    }

    /// Moves to the first slot of the next leaf; false (unmoved) at the end.
    pub(crate) fn next_leaf(&mut self) -> bool {
        self.step_leaf(true)
    }

    /// Moves to the last slot of the previous leaf; false (unmoved) at the
    /// start.
    pub(crate) fn prev_leaf(&mut self) -> bool {
        self.step_leaf(false)
    }

    /// [`next_leaf`](Self::next_leaf) (`forward`) or
    /// [`prev_leaf`](Self::prev_leaf).
    #[inline(always)]
    fn step_leaf(&mut self, forward: bool) -> bool {
        // The common case: the leaf wanted is a sibling under the same
        // parent.
        if self.step_to_sibling(forward) {
            return true;
        }
        let Some(leaf) = self.path.pop() else {
            return false;
        };
        let stepped = if forward { step_next(&mut self.path) } else { step_prev(&mut self.path) };
        if !stepped {
            self.path.push(leaf);
        }
        stepped
    }

    /// [`next_leaf`](Self::next_leaf) (`forward`) or
    /// [`prev_leaf`](Self::prev_leaf) to a leaf under the same parent: only
    /// the walk's last two levels change. False (unmoved) if the leaf is
    /// its parent's last (first), or the root.
    #[inline(always)]
    pub(crate) fn step_to_sibling(&mut self, forward: bool) -> bool {
        let n = self.path.len();
        if n < 2 {
            return false;
        }
        let p = self.path[n - 2];
        let off = if forward { p.node.has_next(p.off).then(|| p.off + 1) } else { p.off.checked_sub(1) };
        let Some(off) = off else { return false };
        let (piv, slots) = p.node.arrays();
        let (min, max) = slot_bounds(piv, off, p.min, p.max);
        // SAFETY: slot `off` of the internal node `p` is used (the one
        // before it has a successor, or it comes before a used slot), so
        // it holds an encoded live child.
        let node = unsafe { NodeRef::decode(slots[off].load(Ordering::Acquire)) };
        self.path[n - 2].off = off;
        let first = if forward { 0 } else { node.count() - 1 };
        self.path[n - 1] = Level { node, min, max, off: first };
        true
    }

    /// Moves to the previous slot; false (unmoved) at the start.
    #[inline]
    pub(crate) fn prev(&mut self) -> bool {
        match self.path.last_mut() {
            None => false,
            Some(lv) if lv.off > 0 => {
                lv.off -= 1;
                true
            }
            Some(_) => step_prev(&mut self.path),
        }
    }
}

/// For [`RawTree::empty_before`] and [`RawTree::empty_after`]: if the
/// range in the next leaf (`forward`) or the previous one, beside the slot
/// `path` points at, is empty, moves `path` onto it and returns its far
/// end. The walk steps there (up to the first level with a slot on that
/// side, down the edge) instead of walking from the root; out of line, as
/// most writes never get here.
#[inline(never)]
pub(crate) fn empty_across(path: &mut Path<'_>, forward: bool) -> Option<u64> {
    let leaf = path.len() - 1;
    // Most often the neighbour holds an entry and nothing moves.
    let (d, true) = edge_neighbour(path, forward)? else {
        return None;
    };
    path[d].off = if forward { path[d].off + 1 } else { path[d].off - 1 };
    path.truncate(d + 1);
    descend_edge(path, !forward);
    let (lo, hi) = path[leaf].leaf_range();
    Some(if forward { hi } else { lo })
}

/// The range beside the leaf at the end of `path` (after it if `forward`,
/// else before it), which lies in the next (previous) leaf: the level of
/// `path` whose node holds the bound between the two leaves (the parent's
/// for a sibling), and whether that range is empty; `None` at the edge of
/// the index space (or in a root leaf). Found by stepping up to that level
/// and down the other side's edge, without touching `path`. The in-leaf
/// lane asks it about an erase at either edge of its leaf (which stays in
/// the leaf when the neighbour holds an entry, and gives its range to the
/// next leaf when that one starts empty), the general path through
/// [`empty_across`].
#[inline]
pub(crate) fn edge_neighbour(path: &Path<'_>, forward: bool) -> Option<(usize, bool)> {
    let leaf = path.len() - 1;
    let d = fork_level(path, leaf, forward)?;
    let off = if forward { path[d].off + 1 } else { path[d].off - 1 };
    // SAFETY: `path[d]` is above the leaf level, so a live internal node,
    // and `off` a used slot (`has_next`, or one before a used one).
    let mut node = unsafe { path[d].node.child(off) };
    for _ in d + 1..leaf {
        let edge = if forward { 0 } else { node.count() - 1 };
        // SAFETY: above the leaf level, so internal; a used slot.
        node = unsafe { node.child(edge) };
    }
    let edge = if forward { 0 } else { node.count() - 1 };
    Some((d, node.as_leaf().expect("all leaves are one level").slot(edge).is_null()))
}

/// For a walk whose leaf is the last child of its parent but not the
/// tree's last leaf, so that the next leaf is a cousin: the lowest level
/// with a slot after the walk's, where the walk to that cousin forks off.
/// `None` for a leaf with a next sibling, the tree's last leaf, and a
/// root leaf or a leaf under the root (which have no cousins).
pub(crate) fn cousin_fork(path: &Path<'_>) -> Option<usize> {
    let leaf = path.len().checked_sub(1)?;
    if leaf < 2 || path[leaf].max == u64::MAX || path[leaf - 1].node.has_next(path[leaf - 1].off) {
        return None;
    }
    fork_level(path, leaf - 1, true)
}

/// The lowest level of `path` above `below` with a slot after (`forward`)
/// or before the walk's: where the walk to the next (or previous) leaf
/// forks off. `None` at the tree's edge.
pub(crate) fn fork_level(path: &Path<'_>, below: usize, forward: bool) -> Option<usize> {
    (0..below).rev().find(|&d| if forward { path[d].node.has_next(path[d].off) } else { path[d].off > 0 })
}

/// The walk to the first leaf under slot `path[d].off + 1`: the next leaf
/// after `path`'s, where the two walks fork at level `d` (a level of
/// `path` above its leaf whose slot has a next one).
pub(crate) fn walk_to_next_leaf<'t>(path: &Path<'t>, d: usize) -> Path<'t> {
    let mut next: Path<'t> = path[..=d].iter().copied().collect();
    let stepped = step_next(&mut next);
    debug_assert!(stepped, "level {d} has a next slot");
    next
}

/// The siblings (same parent) of the node `parent`'s slot leads to: the
/// next one (none where that node ends the tree, `spine`: the rebuild
/// never looks right of the right-most spine) and the previous one.
pub(crate) fn siblings<'t>(parent: Level<'t>, spine: bool) -> (Option<NodeRef<'t>>, Option<NodeRef<'t>>) {
    let right = (!spine && parent.node.has_next(parent.off)).then(|| {
        // SAFETY: `parent` is an internal node (it has a level below) and
        // `has_next` says slot `off + 1` is used.
        unsafe { parent.node.child(parent.off + 1) }
    });
    let left = (parent.off > 0).then(|| {
        // SAFETY: as above; slot `off - 1` is used, as `off` is.
        unsafe { parent.node.child(parent.off - 1) }
    });
    (right, left)
}

/// Asks the CPU to start loading the siblings (same parent) of the leaf
/// at the end of `lpath`.
#[inline]
pub(crate) fn prefetch_siblings(lpath: &Path<'_>) {
    if let [.., p, _leaf] = lpath.as_slice() {
        // SAFETY: a walk's level above the leaf: a live internal node, at a
        // used slot; `has_next` says whether the next one is used.
        unsafe { prefetch_beside(p.node.arrays().1, p.off, p.node.has_next(p.off)) };
    }
}
