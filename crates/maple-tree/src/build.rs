//! Bulk building from sorted input in O(n): fill leaves left to right, then
//! each level of internal nodes, every node full except the last of each
//! level (which is on the right-most spine and exempt from minimum fill).

#[allow(unused_imports)]
use crate::prelude::*;

use core::ptr;

use crate::{
    error::{AllocError, Error},
    node::{Item, Kind, NodeRef},
    raw::RawTree,
    sync::Ordering,
};

impl RawTree {
    /// Builds the tree from `(first, last, value word)` triples that must be
    /// ascending and non-overlapping. The tree must be empty. On error the
    /// tree stays empty and every value word is handed to `drop_value`.
    pub(crate) fn build_sorted(
        &mut self,
        entries: impl Iterator<Item = (u64, u64, *mut ())>,
        drop_value: &mut dyn FnMut(*mut ()),
    ) -> Result<(), Error> {
        debug_assert!(self.root_node().is_none());
        let mut items: Vec<Item> = Vec::new();
        let mut next_free: Option<u64> = Some(0); // first index not yet covered
        let mut count = 0usize;
        let mut bad = false;
        for (first, last, v) in entries {
            let ok = !bad && first <= last && next_free.is_some_and(|n| first >= n);
            if !ok {
                bad = true;
                drop_value(v);
                continue;
            }
            let n = next_free.unwrap_or(0);
            if first > n {
                items.push(Item { last: first - 1, slot: ptr::null_mut(), gap: 0 });
            }
            items.push(Item { last, slot: v, gap: 0 });
            count += 1;
            next_free = last.checked_add(1);
        }
        if bad {
            for it in &items {
                if !it.slot.is_null() {
                    drop_value(it.slot);
                }
            }
            return Err(Error::InvalidRange);
        }
        if items.is_empty() {
            return Ok(());
        }
        if next_free.is_some() {
            items.push(Item { last: u64::MAX, slot: ptr::null_mut(), gap: 0 });
        }
        match self.build_levels(&items) {
            Ok((root, height)) => {
                root.set_root_parent();
                self.root.store(root.encode(), Ordering::Release);
                self.height.set(height);
                self.len.set(count);
                Ok(())
            }
            Err(AllocError) => {
                // SAFETY: the tree was empty, so every node its slab has
                // handed out is one of ours, never published; `&mut self`
                // makes us the slab's only user.
                unsafe { self.slab.free_all() };
                for it in &items {
                    if !it.slot.is_null() {
                        drop_value(it.slot);
                    }
                }
                Err(Error::NoMemory)
            }
        }
    }

    /// Builds every level above `leaves` (the leaf level's items); on
    /// failure the nodes made so far are left for the caller to free.
    fn build_levels(&self, leaves: &[Item]) -> Result<(NodeRef<'_>, usize), AllocError> {
        let mut kind = Kind::Leaf;
        let mut height = 0;
        let mut owned: Vec<Item>;
        let mut items = leaves;
        loop {
            height += 1;
            let cap = kind.slots();
            let mut up = Vec::with_capacity(items.len() / (cap - 1) + 1);
            let mut start = 0;
            let mut min = 0u64;
            while start < items.len() {
                let mut end = (start + cap).min(items.len());
                if kind.is_leaf() && end < items.len() && items[end - 1].slot.is_null() {
                    end -= 1;
                }
                // SAFETY: `&mut self`: we are the slab's only user.
                let node = unsafe { self.slab.alloc(kind) }?.fill(&items[start..end]);
                let max = items[end - 1].last;
                let gap = if self.gaps { node.max_gap(min, max) } else { 0 };
                up.push(Item { last: max, slot: node.encode(), gap });
                min = max.wrapping_add(1);
                start = end;
            }
            if kind != Kind::Leaf {
                for it in &up {
                    // SAFETY: fresh node we just filled.
                    let n = unsafe { NodeRef::decode(it.slot) };
                    for c in 0..n.count() {
                        // SAFETY: internal node, used slot.
                        unsafe { n.child(c) }.set_parent(n);
                    }
                }
            }
            if up.len() == 1 {
                // SAFETY: fresh node.
                return Ok((unsafe { NodeRef::decode(up[0].slot) }, height));
            }
            owned = up;
            items = &owned;
            kind = self.inner_kind();
        }
    }
}
