//! `validate()` checks every structural invariant; `dump()` draws the tree.

#[allow(unused_imports)]
use crate::prelude::*;

use core::fmt::Write;

use crate::{
    node::{Kind, NodeRef, PIVOT_UNUSED},
    raw::RawTree,
};

/// A broken invariant, with a description of where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidateError(pub String);

impl core::fmt::Display for ValidateError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "tree invariant broken: {}", self.0)
    }
}

impl core::error::Error for ValidateError {}

struct Checker<'a> {
    tree: &'a RawTree,
    entries: usize,
    /// Was the previous leaf slot (in index order) empty?
    prev_empty: bool,
    leaf_depth: Option<usize>,
}

macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            return Err(ValidateError(format!($($arg)*)));
        }
    };
}

/// Where a node sits, for error messages (formatted only on failure).
struct At<'t>(NodeRef<'t>, u64, u64, usize);

impl core::fmt::Display for At<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?} [{:#x}, {:#x}] depth {}", self.0, self.1, self.2, self.3)
    }
}

impl RawTree {
    /// Checks every invariant of the tree.
    pub(crate) fn validate(&self) -> Result<(), ValidateError> {
        let Some(root) = self.root_node() else {
            ensure!(self.height.get() == 0, "empty tree with height {}", self.height.get());
            ensure!(self.len.get() == 0, "empty tree with len {}", self.len.get());
            return Ok(());
        };
        ensure!(root.parent_info().is_none(), "root {root:?} lacks the root mark");
        ensure!(root.is_leaf() || root.count() > 1, "internal root {root:?} has a single child");
        ensure!(
            !(root.is_leaf() && root.count() == 1 && root.slot(0).is_null()),
            "root leaf holds only an empty range (tree should be empty)"
        );
        let mut c = Checker { tree: self, entries: 0, prev_empty: false, leaf_depth: None };
        c.node(root, 0, u64::MAX, 0)?;
        let (height, len) = (self.height.get(), self.len.get());
        ensure!(c.leaf_depth == Some(height - 1), "height {height} but leaves at depth {:?}", c.leaf_depth);
        ensure!(c.entries == len, "len {len} but {} entries", c.entries);
        Ok(())
    }

    /// Text picture of the tree, one node a line, indented by depth.
    pub(crate) fn dump(&self, out: &mut String, show: &dyn Fn(*mut ()) -> String) {
        let _ = writeln!(
            out,
            "maple tree ({}, height {}, {} entries)",
            if self.gaps { "gaps" } else { "plain" },
            self.height.get(),
            self.len.get()
        );
        if let Some(root) = self.root_node() {
            dump_node(root, 0, u64::MAX, 1, out, show);
        }
    }
}

impl Checker<'_> {
    fn node(&mut self, node: NodeRef<'_>, min: u64, max: u64, depth: usize) -> Result<(), ValidateError> {
        let at = At(node, min, max, depth);
        ensure!(node.parent_word() != node.as_ptr().as_ptr(), "dead node reachable: {at}");
        let kind = node.kind();
        if depth > 0 && !kind.is_leaf() {
            ensure!(kind == self.tree.inner_kind(), "{at}: internal node of the wrong kind");
        }
        let n = node.count();
        let pivs = kind.pivots();
        // Pivots: ascending, inside the bounds, unused ones all PIVOT_UNUSED.
        let mut lo = min;
        for i in 0..n {
            let hi = node.slot_max(i, max);
            if i < n - 1 {
                let p = node.pivot(i);
                ensure!(p >= lo && p < max, "{at}: pivot[{i}] = {p:#x} outside [{lo:#x}, {max:#x})");
                ensure!(i == 0 || p > node.pivot(i - 1), "{at}: pivots not ascending at {i}");
            }
            lo = hi.wrapping_add(1);
        }
        for i in n - 1..pivs {
            ensure!(node.pivot(i) == PIVOT_UNUSED, "{at}: unused pivot[{i}] is set");
        }
        for i in n..kind.slots() {
            ensure!(node.slot(i).is_null(), "{at}: unused slot {i} is not null");
        }
        // Minimum fill, except the root and the right-most spine.
        if depth > 0 && max != u64::MAX {
            ensure!(n >= kind.min_fill(), "{at}: {n} slots, below minimum {}", kind.min_fill());
        }
        if kind.is_leaf() {
            match self.leaf_depth {
                None => self.leaf_depth = Some(depth),
                Some(d) => ensure!(d == depth, "{at}: leaf at depth {depth}, others at {d}"),
            }
            for i in 0..n {
                let empty = node.slot(i).is_null();
                ensure!(!(empty && self.prev_empty), "{at}: adjacent empty ranges at slot {i}");
                self.prev_empty = empty;
                if crate::handle::is_value(node.slot(i)) {
                    self.entries += 1;
                }
            }
            return Ok(());
        }
        for i in 0..n {
            let s = node.slot(i);
            ensure!(!s.is_null(), "{at}: internal slot {i} is null");
            let lo = node.slot_min(i, min);
            let hi = node.slot_max(i, max);
            // SAFETY: internal node, used non-null slot.
            let child = unsafe { node.child(i) };
            match child.parent_info() {
                Some(addr) => ensure!(addr == node.addr(), "{at}: child {i} has parent {addr:#x}"),
                None => ensure!(false, "{at}: child {i} is marked as root"),
            }
            self.node(child, lo, hi, depth + 1)?;
            if kind == Kind::Arange64 {
                let want = child.max_gap(lo, hi);
                ensure!(node.gap(i) == want, "{at}: gap[{i}] = {} but child's largest gap is {want}", node.gap(i));
            }
        }
        if kind == Kind::Arange64 {
            for i in n..kind.slots() {
                ensure!(node.gap(i) == 0, "{at}: unused gap[{i}] is set");
            }
            let g = node.gap_offset();
            ensure!(g < n, "{at}: gap offset {g} beyond count {n}");
            let best = (0..n).map(|i| node.gap(i)).max().unwrap_or(0);
            ensure!(node.gap(g) == best, "{at}: gap offset {g} is not the largest gap");
        }
        Ok(())
    }
}

fn dump_node(node: NodeRef<'_>, min: u64, max: u64, depth: usize, out: &mut String, show: &dyn Fn(*mut ()) -> String) {
    let indent = "  ".repeat(depth);
    let n = node.count();
    let _ = writeln!(out, "{indent}{:?} {:#x}-{:#x} ({n} slots)", node.kind(), min, max);
    for i in 0..n {
        let lo = node.slot_min(i, min);
        let hi = node.slot_max(i, max);
        if node.is_leaf() {
            let s = node.slot(i);
            let v = if s.is_null() { "-".to_string() } else { show(s) };
            let _ = writeln!(out, "{indent}  {lo:#x}-{hi:#x}: {v}");
        } else {
            if node.kind() == Kind::Arange64 {
                let _ = writeln!(out, "{indent}  [{i}] gap {}", node.gap(i));
            }
            // SAFETY: internal node, used slot.
            dump_node(unsafe { node.child(i) }, lo, hi, depth + 1, out, show);
        }
    }
}
