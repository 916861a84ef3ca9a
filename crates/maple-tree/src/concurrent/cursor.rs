//! The concurrent tree's write cursor.

use core::{
    fmt,
    ops::{RangeBounds, RangeInclusive},
    ptr::NonNull,
};

use super::WriteGuard;
use crate::{
    cursor::{range_write_methods, read_methods, Pos},
    error::{Error, InsertError},
    handle::{is_value, Handle},
    key::Key,
    raw::RawTree,
};

impl<'a, V: Handle + Send + Sync + 'static, K: Key> WriteGuard<'a, V, K> {
    /// A write cursor at the range containing `index`.
    pub fn cursor(&mut self, index: K) -> WriteCursor<'_, 'a, V, K> {
        WriteCursor::new(self, index.to_index())
    }
}

/// A write cursor on a [`ConcurrentMapleTree`](crate::ConcurrentMapleTree),
/// made by [`WriteGuard::cursor`]: the read methods of [`CursorMut`](crate::CursorMut), and
/// writes published for concurrent readers. Values a write takes out are
/// dropped after the readers that may see them are gone, so the writes
/// return whether something was removed rather than the value.
///
/// ```
/// use maple_tree::{ConcurrentMapleTree, U63};
/// let t = ConcurrentMapleTree::<U63>::new();
/// let mut w = t.lock();
/// w.insert_range(10..=19, U63::from(1u32)).unwrap();
/// w.insert_range(30..=39, U63::from(2u32)).unwrap();
/// let mut c = w.cursor(0);
/// // Double every value, walking entry by entry.
/// while let Some((_, v)) = c.next() {
///     let doubled = U63::from(v.get() as u32 * 2);
///     c.replace(doubled).unwrap();
/// }
/// drop(w);
/// assert_eq!(t.load_with(35, |v| v.map(U63::get)), Some(4));
/// ```
pub struct WriteCursor<'w, 'a, V: Handle + Send + Sync + 'static, K: Key = u64> {
    guard: &'w mut WriteGuard<'a, V, K>,
    /// A walk of the tree as it is: the tree changes only through this
    /// cursor while it holds the guard, and every write through it keeps
    /// the walk current (`settle`).
    pos: Pos<'w>,
}

impl<'w, 'a, V: Handle + Send + Sync + 'static, K: Key> WriteCursor<'w, 'a, V, K> {
    pub(crate) fn new(guard: &'w mut WriteGuard<'a, V, K>, index: u64) -> Self {
        // SAFETY: a walk of the tree just made under the writer lock; the
        // tree changes only through this cursor, which keeps it current.
        let pos = unsafe { Pos::seek(guard.raw(), index).rebind() };
        WriteCursor { guard, pos }
    }

    fn parts(&mut self) -> (&RawTree, &mut Pos<'w>) {
        (self.guard.raw(), &mut self.pos)
    }

    fn borrow(&self, raw: *mut ()) -> Option<V::Borrowed<'_>> {
        if !is_value(raw) {
            return None;
        }
        // SAFETY: we hold the writer lock, and nodes and values reachable
        // from the tree are freed only by the writer, during a later write,
        // which needs `&mut self` and so ends this borrow first.
        Some(unsafe { V::borrow(NonNull::new_unchecked(raw)) })
    }

    read_methods!('_, K);

    fn reseek(&mut self, index: u64) {
        // SAFETY: as in `new`.
        self.pos = unsafe { Pos::seek(self.guard.raw(), index).rebind() };
    }

    /// Stores `value` over exactly the current range (entry or empty
    /// range). Replacing one entry by another is one word written in place:
    /// it never allocates, and readers see the old or the new value.
    pub fn replace(&mut self, value: V) -> Result<(), InsertError<V>> {
        // An entry replaced by an entry: one word, where the cursor is.
        // SAFETY: the cursor's walk was made under the guard's lock and
        // kept current by every write through the cursor.
        let Err(value) = (unsafe { self.guard.replace_here(&self.pos.walk.path, value) }) else { return Ok(()) };
        let (lo, hi, _) = self.pos.current();
        let res = self.guard.store_exact(lo, hi, value);
        self.reseek(lo);
        res
    }

    /// Removes the entry (or reserved range) the cursor is on; it then
    /// stands on the empty range that replaced it. Returns whether a value
    /// was removed.
    pub fn erase(&mut self) -> Result<bool, Error> {
        let (lo, hi, v) = self.pos.current();
        if v.is_null() {
            return Ok(false);
        }
        self.guard.clear_exact(lo, hi)?;
        self.reseek(lo);
        Ok(is_value(v))
    }

    range_write_methods!(guard, WriteGuard, K);
}

impl<V: Handle + Send + Sync + 'static, K: Key + fmt::Debug> fmt::Debug for WriteCursor<'_, '_, V, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteCursor").field("range", &self.range()).finish_non_exhaustive()
    }
}
