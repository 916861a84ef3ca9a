//! The typed write layer both trees share: [`MapleTree`](crate::MapleTree)
//! (values dropped at once) and the concurrent tree's
//! [`WriteGuard`](crate::WriteGuard) (values dropped after the readers'
//! grace period) implement [`WriteTarget`]; the range writes of both, and of
//! both write cursors, are written once here on top of it.
//!
//! Every write starts from a walk: a cursor's own (`Some(path)`, aimed at
//! the first index here, within its leaf when it lies there) or a fresh
//! one (`None`: the normal API, a cursor made, used once and dropped). The
//! result says whether the walk still leads to the leaf holding the first
//! index, so a cursor can go on without walking.

#[allow(unused_imports)]
use crate::prelude::*;

use core::ptr::NonNull;

use crate::{
    error::{Error, InsertError},
    handle::Handle,
    key::Key,
    raw::{Path, RawTree},
    store::Store,
};

/// A range's first and last index, or why it is no range: what the
/// typed layer hands the writes here (each caller converts its own range
/// type, so the conversion is inlined where the range's shape is known).
pub(crate) type Bounds = Result<(u64, u64), Error>;

/// A tree that typed writes go to.
pub(crate) trait WriteTarget<V: Handle> {
    /// Does the write `op` (its entry null, a reserved marker, or a fresh
    /// handle whose ownership passes to the tree on success), starting
    /// from `at` (aimed at `first` here; `None`: a fresh walk), and
    /// disposes of the values the write takes out (at once, or after the
    /// readers' grace period). Returns whether `at` still leads to the leaf
    /// holding `first`. On failure the tree is unchanged and the entry is
    /// handed back.
    ///
    /// # Safety
    ///
    /// `first <= last`; the entry is as described; `split` makes a fresh
    /// handle for the value behind the word it is given; `at` is a walk of
    /// this tree made since its last change (or empty).
    unsafe fn write_words(&mut self, at: Option<&mut Path<'_>>, op: Store<'_>) -> Result<bool, (Error, *mut ())>;

    /// The tree, for the searches an allocation makes before it writes.
    fn raw(&self) -> &RawTree;
}

/// Makes a clone of the value behind `w` (a word of a live value of type
/// `V`) and returns its word.
///
/// # Safety
///
/// `w` is the word of a live `V`, not borrowed mutably meanwhile.
pub(crate) unsafe fn clone_word<V: Handle + Clone>(w: *mut ()) -> *mut () {
    // SAFETY: the caller's contract; the borrow ends before we return.
    let b = unsafe { NonNull::new_unchecked(w) };
    // SAFETY: as above.
    unsafe { V::clone_raw(b) }.into_raw().as_ptr()
}

/// Drops the value behind `word` unless it is null: a clone of a cut
/// value that a failed write made and did not keep.
///
/// # Safety
///
/// `word` is null or a handle of type `V` that nobody else owns.
pub(crate) unsafe fn drop_unused<V: Handle>(word: *mut ()) {
    if let Some(nn) = NonNull::new(word) {
        // SAFETY: the caller's contract.
        drop(unsafe { V::from_raw(nn) });
    }
}

/// The last index of a window of `size` starting at `start` (an
/// allocation's), or `None` if the size is 0 or the window would pass
/// `u64::MAX`.
pub(crate) fn window_last(start: u64, size: u64) -> Option<u64> {
    size.checked_sub(1).and_then(|s| start.checked_add(s))
}

/// The bounds of a range and `value` as a word (a fresh handle); on an
/// invalid range, the value back with the error.
fn range_and_word<V: Handle>(bounds: Bounds, value: V) -> Result<(u64, u64, *mut ()), InsertError<V>> {
    match bounds {
        Ok((first, last)) => Ok((first, last, value.into_raw().as_ptr())),
        Err(cause) => Err(InsertError { value, cause }),
    }
}

/// Hands `word` (a fresh handle the engine did not keep) back as a value.
///
/// # Safety
///
/// `word` is the word of a `V` made by `into_raw` that nothing else owns:
/// the entry of a write that failed, handed back by the engine.
unsafe fn take_back<V: Handle>(word: *mut ()) -> V {
    // SAFETY: the caller's contract; a handle's word is never null.
    unsafe { V::from_raw(NonNull::new_unchecked(word)) }
}

/// Writes `value` over `bounds` as `how` shapes the store (from a plain
/// overwrite of the range with the value's word): true if `at` is still
/// good; on failure the value comes back and nothing has changed.
///
/// # Safety
///
/// `at`, if given, is a walk of `w`'s tree made since its last change
/// (a cursor's, which every write through the cursor keeps current), or
/// empty; what `how` adds is the engine's to use: `insert_only`, or a
/// `split` that makes fresh handles.
unsafe fn write_value<'p, V: Handle, W: WriteTarget<V>>(
    w: &mut W,
    at: Option<&mut Path<'_>>,
    bounds: Bounds,
    value: V,
    how: impl FnOnce(Store<'p>) -> Store<'p>,
) -> Result<bool, InsertError<V>> {
    let (first, last, e) = range_and_word(bounds, value)?;
    // SAFETY: first <= last; `e` is a fresh handle; without a way to
    // split, a write that would cut an entry in two fails and changes
    // nothing; `how` and `at` are as our contract says.
    unsafe { w.write_words(at, how(Store::new(first, last).entry(e))) }
        // SAFETY: the engine hands back the entry it did not keep.
        .map_err(|(cause, e)| InsertError { value: unsafe { take_back(e) }, cause })
}

/// `insert_range` of both trees and cursors: true if `at` is still good.
///
/// # Safety
///
/// `at`, if given, is a walk of `w`'s tree made since its last change
/// (a cursor's, which every write through the cursor keeps current), or
/// empty.
pub(crate) unsafe fn insert_range<V: Handle, W: WriteTarget<V>>(
    w: &mut W,
    at: Option<&mut Path<'_>>,
    bounds: Bounds,
    value: V,
) -> Result<bool, InsertError<V>> {
    // SAFETY: our contract; an insert cuts nothing.
    unsafe { write_value(w, at, bounds, value, Store::insert_only) }
}

/// `store_range` of both trees and cursors: true if `at` is still good.
///
/// # Safety
///
/// As for [`insert_range`].
pub(crate) unsafe fn store_range<V: Handle + Clone, W: WriteTarget<V>>(
    w: &mut W,
    at: Option<&mut Path<'_>>,
    bounds: Bounds,
    value: V,
) -> Result<bool, InsertError<V>> {
    // SAFETY: the engine passes words of live values of this tree, which
    // the writer's exclusive access keeps from being borrowed mutably.
    let mut clone = |w, _, _, _| unsafe { clone_word::<V>(w) };
    // SAFETY: our contract; `clone` makes fresh handles.
    unsafe { write_value(w, at, bounds, value, |s| s.split(&mut clone)) }
}

/// Stores `value` over a range that takes every entry it reaches whole
/// (the merging inserts widen theirs to do so): nothing is cut in two,
/// so no clone is needed. True if `at` is still good.
///
/// # Safety
///
/// As for [`insert_range`].
pub(crate) unsafe fn store_whole<V: Handle, W: WriteTarget<V>>(
    w: &mut W,
    at: Option<&mut Path<'_>>,
    bounds: Bounds,
    value: V,
) -> Result<bool, InsertError<V>> {
    // SAFETY: our contract; a write that would cut an entry fails.
    unsafe { write_value(w, at, bounds, value, |s| s) }
}

/// `remove_range` of both trees and cursors: true if `at` is still good.
///
/// # Safety
///
/// As for [`insert_range`].
pub(crate) unsafe fn remove_range<V: Handle + Clone, W: WriteTarget<V>>(
    w: &mut W,
    at: Option<&mut Path<'_>>,
    bounds: Bounds,
) -> Result<bool, Error> {
    let (first, last) = bounds?;
    // SAFETY: as in `store_range`.
    let mut clone = |w, _, _, _| unsafe { clone_word::<V>(w) };
    // SAFETY: first <= last; null is no handle; `clone` and `at` as in
    // `store_range`.
    unsafe { w.write_words(at, Store::new(first, last).split(&mut clone)) }.map_err(|(c, _)| c)
}

/// `alloc_range` (`highest` false) and `alloc_range_rev` of both trees:
/// stores `value` in the lowest (highest) empty window of `size` inside
/// `window` and returns its start.
#[inline]
pub(crate) fn alloc_range<V: Handle, W: WriteTarget<V>>(
    w: &mut W,
    window: Bounds,
    size: u64,
    value: V,
    highest: bool,
) -> Result<u64, InsertError<V>> {
    let found =
        window.and_then(
            |(a, b)| {
                if highest {
                    w.raw().empty_area_rev(a, b, size)
                } else {
                    w.raw().empty_area(a, b, size)
                }
            },
        );
    alloc_at(w, found, size, value)
}

/// `alloc_cyclic` of both trees: one id in `window`, searching upwards
/// from `*next` and wrapping once; the id and whether the search wrapped.
/// Past the key type's last key, `*next` wraps to the first.
pub(crate) fn alloc_cyclic<K: Key, V: Handle, W: WriteTarget<V>>(
    w: &mut W,
    window: Bounds,
    next: &mut K,
    value: V,
) -> Result<(K, bool), InsertError<V>> {
    let (lo, hi) = match window {
        Ok(b) => b,
        Err(cause) => return Err(InsertError { value, cause }),
    };
    let (found, wrapped) = w.raw().cyclic_search(lo, hi, next.to_index());
    let id = alloc_at(w, found, 1, value)?;
    let mut n = 0;
    w.raw().cyclic_taken(id, &mut n, K::MAX_INDEX);
    *next = K::from_index(n);
    Ok((K::from_index(id), wrapped))
}

/// Stores `value` over the `size` indices from the start a search
/// `found`, or hands it back with the search's error.
#[inline]
fn alloc_at<V: Handle, W: WriteTarget<V>>(
    w: &mut W,
    found: Result<u64, Error>,
    size: u64,
    value: V,
) -> Result<u64, InsertError<V>> {
    let start = match found {
        Ok(s) => s,
        Err(cause) => return Err(InsertError { value, cause }),
    };
    let Some(last) = window_last(start, size) else {
        return Err(InsertError { value, cause: Error::InvalidRange });
    };
    // SAFETY: no walk is given.
    unsafe { insert_range(w, None, Ok((start, last)), value) }.map(|_| start)
}
