//! What a call changed: the vocabulary an address space's observer hears
//! after each call ([`AddressSpace::set_observer`]) and
//! [`AddressSpace::diff`] returns, and the sweep that finds it.
//!
//! [`AddressSpace::set_observer`]: crate::AddressSpace::set_observer
//! [`AddressSpace::diff`]: crate::AddressSpace::diff
//!
//! A change is about pages and their attributes, not about how they are
//! cut into VMAs: a merge or a split that leaves every page's attributes
//! as they were is no change. So replaying the changes on a simple map of
//! ranges (an emulator's page table, a translation cache's index)
//! reproduces the space's pages and attributes exactly, whatever the VMA
//! boundaries.

use core::{fmt, ops::Range};

use crate::{
    vma::{Vma, VmaData},
    vma_slab::VmaRef,
};

/// One change to the pages of an address space, with the attributes
/// before and after (read them through [`vma`](Change::vma) and
/// [`old_vma`](Change::old_vma)).
///
/// ```
/// use maple_mm::{AddressSpace, Change, MapFlags, Prot, PAGE_SIZE};
/// use std::sync::{Arc, Mutex};
///
/// let mut mm = AddressSpace::new();
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// mm.set_observer(move |c: &Change| log.lock().unwrap().push(c.to_string()));
/// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
/// mm.mmap(0x10000, 4 * PAGE_SIZE, Prot::RW, anon, None, 0)?;
/// mm.mprotect(0x11000, PAGE_SIZE, Prot::READ)?;
/// assert!(mm.munmap(0x10001, PAGE_SIZE).is_err()); // a failed call: nothing
/// assert_eq!(
///     *seen.lock().unwrap(),
///     [
///         "mapped 10000-14000 rw-p",
///         "changed 11000-12000 rw-p -> r--p",
///     ]
/// );
/// # Ok::<(), maple_mm::Errno>(())
/// ```
#[derive(Clone)]
pub enum Change {
    /// `range` was unmapped and is now mapped.
    Mapped {
        /// The pages.
        range: Range<u64>,
        /// Their attributes.
        new: VmaRef,
    },
    /// `range` was mapped and is now unmapped.
    Unmapped {
        /// The pages.
        range: Range<u64>,
        /// Their attributes before.
        old: VmaRef,
    },
    /// `range` stays mapped with other attributes (protection, flags such
    /// as locks, seals and advice, name, memory policy, or the anon_vma a
    /// first write gives it).
    Changed {
        /// The pages.
        range: Range<u64>,
        /// Their attributes before.
        old: VmaRef,
        /// Their attributes now.
        new: VmaRef,
    },
    /// The pages of `from` moved to `to` (`mremap`) with their attributes
    /// and contents, keeping their file offsets; `from` is now unmapped.
    /// The target was unmapped first (reported as [`Unmapped`](Change::Unmapped)
    /// before this). Changes the move made besides (a grown tail, a merge
    /// giving the pages another anon_vma, what `MREMAP_DONTUNMAP` leaves
    /// at `from`) follow as changes of their own.
    Moved {
        /// Where the pages were.
        from: Range<u64>,
        /// Where they start now.
        to: u64,
    },
}

impl Change {
    /// The pages changed: for a move, where they are now.
    pub fn range(&self) -> Range<u64> {
        match self {
            Change::Mapped { range, .. } | Change::Unmapped { range, .. } | Change::Changed { range, .. } => {
                range.clone()
            }
            Change::Moved { from, to } => *to..*to + (from.end - from.start),
        }
    }

    /// The pages as they are now, if mapped and not moved: their range and
    /// attributes as a [`Vma`] (not necessarily a whole VMA).
    pub fn vma(&self) -> Option<Vma<'_>> {
        match self {
            Change::Mapped { range, new } | Change::Changed { range, new, .. } => {
                Some(Vma { start: range.start, end: range.end, data: new })
            }
            _ => None,
        }
    }

    /// The pages as they were, if they were mapped and did not move.
    pub fn old_vma(&self) -> Option<Vma<'_>> {
        match self {
            Change::Unmapped { range, old } | Change::Changed { range, old, .. } => {
                Some(Vma { start: range.start, end: range.end, data: old })
            }
            _ => None,
        }
    }
}

fn perms(v: Option<Vma<'_>>) -> String {
    v.map_or(String::new(), |v| String::from_utf8_lossy(&v.perms()).into_owned())
}

impl fmt::Display for Change {
    /// One line: the kind, the range in hex (as the maps file writes it),
    /// and the permissions before and after.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.range();
        match self {
            Change::Mapped { .. } => write!(f, "mapped {:x}-{:x} {}", r.start, r.end, perms(self.vma())),
            Change::Unmapped { .. } => write!(f, "unmapped {:x}-{:x} {}", r.start, r.end, perms(self.old_vma())),
            Change::Changed { .. } => {
                write!(f, "changed {:x}-{:x} {} -> {}", r.start, r.end, perms(self.old_vma()), perms(self.vma()))
            }
            Change::Moved { from, to } => write!(f, "moved {:x}-{:x} to {:x}", from.start, from.end, to),
        }
    }
}

impl fmt::Debug for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Mapped { range, new } => {
                f.debug_struct("Mapped").field("range", range).field("new", &Vma::at(range, new)).finish()
            }
            Change::Unmapped { range, old } => {
                f.debug_struct("Unmapped").field("range", range).field("old", &Vma::at(range, old)).finish()
            }
            Change::Changed { range, old, new } => f
                .debug_struct("Changed")
                .field("range", range)
                .field("old", &Vma::at(range, old))
                .field("new", &Vma::at(range, new))
                .finish(),
            Change::Moved { from, to } => f.debug_struct("Moved").field("from", from).field("to", to).finish(),
        }
    }
}

impl<'a> Vma<'a> {
    fn at(range: &Range<u64>, data: &'a VmaData) -> Vma<'a> {
        Vma { start: range.start, end: range.end, data }
    }
}

/// Told every change a call made to an address space, in order, once the
/// call has made them all (see
/// [`AddressSpace::set_observer`](crate::AddressSpace::set_observer)). Any
/// `FnMut(&Change)` is one.
pub trait Observer: Send {
    /// One change.
    fn change(&mut self, change: &Change);
}

impl<F: FnMut(&Change) + Send> Observer for F {
    fn change(&mut self, change: &Change) {
        self(change)
    }
}

/// An address space's observer and what the call under way has moved.
pub(crate) struct Events {
    /// In a mutex only so that an address space stays `Sync` with an
    /// observer that is only `Send`: reached through `&mut`, never locked.
    observer: std::sync::Mutex<Box<dyn Observer>>,
    /// Ranges moved by the call under way, in order: `(start, end, to)`.
    pub(crate) moves: Vec<(u64, u64, u64)>,
    /// The call's writes to the tree, in order (`None` for a removal):
    /// the old entries with these applied are the new ones, without a
    /// second walk.
    pub(crate) writes: smallvec::SmallVec<[(u64, u64, Option<VmaRef>); 4]>,
    /// How deep in nested calls: only the outermost reports.
    pub(crate) depth: u32,
}

impl Events {
    pub(crate) fn new(observer: Box<dyn Observer>) -> Events {
        Events {
            observer: std::sync::Mutex::new(observer),
            moves: Vec::new(),
            writes: smallvec::SmallVec::new(),
            depth: 0,
        }
    }

    pub(crate) fn tell(&mut self, changes: &[Change]) {
        // (A panic in an observer poisons nothing the space relies on.)
        let observer = self.observer.get_mut().unwrap_or_else(|p| p.into_inner());
        for c in changes {
            observer.change(c);
        }
    }
}

/// A piece of a space: `[start, end)` and its attributes.
pub(crate) type Piece = (u64, u64, VmaRef);

/// The changes of one call: most calls make one or two.
pub(crate) type Changes = smallvec::SmallVec<[Change; 2]>;

/// The same attributes, everything a VMA records compared by value (two
/// records made apart but equal are no change; two opens of one file, at
/// the same offsets, are the same pages).
pub(crate) fn same_attrs(a: &VmaData, b: &VmaData) -> bool {
    if core::ptr::eq(a, b) {
        // One record (a piece the call left alone).
        return true;
    }
    let backing = match (a.backing.file(), b.backing.file()) {
        (None, None) => true,
        (Some(x), Some(y)) => {
            core::ptr::eq(x, y)
                || (x.same_file(y)
                    && (x.path.as_str(), x.writable, x.sysv_shm) == (y.path.as_str(), y.writable, y.sysv_shm))
        }
        _ => false,
    };
    a.flags == b.flags
        && backing
        && a.off_base == b.off_base
        && a.name == b.name
        && a.anon == b.anon
        && a.policy == b.policy
        && crate::vma::same_extra(&a.extra, &b.extra)
}

/// Appends `c`, joined to the last change where the two are one: the
/// same kind, touching, with the same attributes.
fn push(out: &mut Changes, c: Change) {
    if let (Some(last), Some(r)) = (out.last_mut(), range_of(&c)) {
        let joined = match (last, &c) {
            (Change::Mapped { range, new }, Change::Mapped { new: n, .. }) if range.end == r.start => {
                same_attrs(new, n).then_some(range)
            }
            (Change::Unmapped { range, old }, Change::Unmapped { old: o, .. }) if range.end == r.start => {
                same_attrs(old, o).then_some(range)
            }
            (Change::Changed { range, old, new }, Change::Changed { old: o, new: n, .. }) if range.end == r.start => {
                (same_attrs(old, o) && same_attrs(new, n)).then_some(range)
            }
            _ => None,
        };
        if let Some(range) = joined {
            range.end = r.end;
            return;
        }
    }
    out.push(c);
}

fn range_of(c: &Change) -> Option<Range<u64>> {
    match c {
        Change::Moved { .. } => None,
        _ => Some(c.range()),
    }
}

/// The changes that turn `before` into `after`, appended to `out`: both
/// sorted, their pieces not overlapping.
pub(crate) fn diff_into(before: &[Piece], after: &[Piece], out: &mut Changes) {
    let (mut i, mut j) = (0, 0);
    let Some(mut pos) = [before.first(), after.first()].into_iter().flatten().map(|p| p.0).min() else {
        return;
    };
    loop {
        while before.get(i).is_some_and(|p| p.1 <= pos) {
            i += 1;
        }
        while after.get(j).is_some_and(|p| p.1 <= pos) {
            j += 1;
        }
        // What holds `pos` on each side, and where that next changes.
        let (b, b_next) = holding(before.get(i), pos);
        let (a, a_next) = holding(after.get(j), pos);
        let Some(next) = [b_next, a_next].into_iter().flatten().min() else { return };
        let range = pos..next;
        match (b, a) {
            (None, None) => {}
            (None, Some(n)) => push(out, Change::Mapped { range, new: n.clone() }),
            (Some(o), None) => push(out, Change::Unmapped { range, old: o.clone() }),
            (Some(o), Some(n)) => {
                if !same_attrs(o, n) {
                    push(out, Change::Changed { range, old: o.clone(), new: n.clone() });
                }
            }
        }
        pos = next;
    }
}

/// The attributes at `pos` given the first piece not ending at or before
/// it, and where that next changes.
fn holding(p: Option<&Piece>, pos: u64) -> (Option<&VmaRef>, Option<u64>) {
    match p {
        Some(p) if p.0 <= pos => (Some(&p.2), Some(p.1)),
        Some(p) => (None, Some(p.0)),
        None => (None, None),
    }
}

/// `pieces` cut to `[lo, hi)`.
pub(crate) fn clip(pieces: &[Piece], lo: u64, hi: u64) -> Vec<Piece> {
    pieces.iter().filter(|p| p.0 < hi && p.1 > lo).map(|(s, e, d)| ((*s).max(lo), (*e).min(hi), d.clone())).collect()
}

/// `pieces` (sorted, apart) with `[s, e)` written over: holding `v`, or
/// emptied for `None`.
pub(crate) fn overwrite<A: smallvec::Array<Item = Piece>>(
    pieces: &mut smallvec::SmallVec<A>,
    s: u64,
    e: u64,
    mut v: Option<VmaRef>,
) {
    let mut out = smallvec::SmallVec::<A>::new();
    let put = |out: &mut smallvec::SmallVec<A>, v: &mut Option<VmaRef>| {
        if let Some(v) = v.take() {
            out.push((s, e, v));
        }
    };
    for (ps, pe, d) in pieces.drain(..) {
        if pe <= s {
            out.push((ps, pe, d));
            continue;
        }
        if ps < s {
            out.push((ps, s, d.clone()));
        }
        put(&mut out, &mut v);
        if pe > e {
            out.push((e.max(ps), pe, d));
        }
    }
    put(&mut out, &mut v);
    *pieces = out;
}

/// `pieces` less `[lo, hi)`: the parts outside it.
pub(crate) fn cut_out(pieces: &[Piece], lo: u64, hi: u64) -> Vec<Piece> {
    let mut out = Vec::with_capacity(pieces.len() + 1);
    for (s, e, d) in pieces {
        if *e <= lo || *s >= hi {
            out.push((*s, *e, d.clone()));
            continue;
        }
        if *s < lo {
            out.push((*s, lo, d.clone()));
        }
        if *e > hi {
            out.push((hi, *e, d.clone()));
        }
    }
    out
}
