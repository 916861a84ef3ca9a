//! Keys other than `u64`: the [`Key`] trait, an order-preserving map from
//! a key type onto the indices `0..=Key::MAX_INDEX` the nodes hold.
//!
//! The engine works on `u64` indices only; a map of any key type converts
//! at its typed layer (the tree's, the set's, the cursors' and iterators'
//! methods), so the nodes, walks and writes are the same for every key
//! type, and for `u64` every conversion is the identity and compiles away.

use core::ops::{Bound, RangeBounds, RangeInclusive};

use crate::error::Error;

/// A key type of a [`MapleTree`](crate::MapleTree) or
/// [`MapleSet`](crate::MapleSet): a one-to-one, order-preserving map onto
/// the indices `0..=MAX_INDEX`.
///
/// Implemented for every integer type up to 64 bits (signed ones shifted so
/// that the lowest value is index 0: `i32::MIN` is 0, `-1` is
/// `0x7fff_ffff`, `0` is `0x8000_0000`), and for `char` (the surrogates,
/// which are no `char`s, are skipped: `'\u{d7ff}'` and `'\u{e000}'` are
/// neighbouring indices). `u64` is the identity.
///
/// A newtype implements it in three lines, with no `unsafe`. The contract
/// is not a safety one, but the map's answers rest on it: `to_index` is
/// strictly increasing with the key's order, never above `MAX_INDEX`, and
/// `from_index` undoes it, for every index in `0..=MAX_INDEX` (every index
/// there is some key's, so an empty range the tree reports always starts
/// and ends at keys).
///
/// ```
/// use maple_tree::{Key, MapleTree};
///
/// /// A page frame number: 52 bits.
/// #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
/// struct Pfn(u64);
///
/// impl Key for Pfn {
///     const MAX_INDEX: u64 = (1 << 52) - 1;
///     fn to_index(self) -> u64 { self.0 }
///     fn from_index(index: u64) -> Self { Pfn(index) }
/// }
///
/// let mut frames: MapleTree<u32, Pfn> = MapleTree::keyed();
/// frames.insert_range(Pfn(0x100)..=Pfn(0x1ff), 7).unwrap();
/// assert_eq!(frames.load(Pfn(0x180)), Some(7));
/// // The last empty range ends at the highest key, not at `u64::MAX`.
/// assert_eq!(frames.range_at(Pfn(0x200)).0, Pfn(0x200)..=Pfn((1 << 52) - 1));
/// ```
pub trait Key: Copy {
    /// The index of the highest key (the lowest key's is 0).
    const MAX_INDEX: u64;

    /// This key's index.
    fn to_index(self) -> u64;

    /// The key whose index is `index` (`index <= MAX_INDEX`).
    fn from_index(index: u64) -> Self;
}

macro_rules! unsigned_key {
    ($($t:ty)*) => {$(
        impl Key for $t {
            const MAX_INDEX: u64 = <$t>::MAX as u64;
            #[inline(always)]
            fn to_index(self) -> u64 {
                self as u64
            }
            #[inline(always)]
            fn from_index(index: u64) -> Self {
                index as $t
            }
        }
    )*};
}

// `usize` is at most 64 bits on every target Rust supports today; a
// 128-bit `usize` fails here, at compile time, rather than wrap.
const _: () = assert!(usize::BITS <= 64);

unsigned_key!(u8 u16 u32 u64 usize);

macro_rules! signed_key {
    ($($t:ty)*) => {$(
        /// Order-preserving: the lowest value is index 0.
        impl Key for $t {
            const MAX_INDEX: u64 = (<$t>::MAX as i64).wrapping_sub(<$t>::MIN as i64) as u64;
            #[inline(always)]
            fn to_index(self) -> u64 {
                (self as i64).wrapping_sub(<$t>::MIN as i64) as u64
            }
            #[inline(always)]
            fn from_index(index: u64) -> Self {
                (index as i64).wrapping_add(<$t>::MIN as i64) as $t
            }
        }
    )*};
}

signed_key!(i8 i16 i32 i64 isize);

/// The first surrogate: `char`s from here up are stored one surrogate
/// block (0x800) lower.
const SURROGATES: u32 = 0xd800;
const SURROGATE_COUNT: u32 = 0x800;

/// `char`s in order, the surrogate block skipped: every index in
/// `0..=MAX_INDEX` is a `char`.
impl Key for char {
    const MAX_INDEX: u64 = (char::MAX as u32 - SURROGATE_COUNT) as u64;
    #[inline]
    fn to_index(self) -> u64 {
        let c = self as u32;
        u64::from(if c >= SURROGATES { c - SURROGATE_COUNT } else { c })
    }
    #[inline]
    fn from_index(index: u64) -> Self {
        let i = u32::try_from(index).unwrap_or(u32::MAX);
        let c = if i >= SURROGATES { i.saturating_add(SURROGATE_COUNT) } else { i };
        // Every index up to `MAX_INDEX` is a `char`; past it (a broken
        // contract elsewhere) the highest one stands in, without a panic.
        char::from_u32(c).unwrap_or(char::MAX)
    }
}

/// `range`'s first and last index (an open end is the key type's first
/// or last key); an empty or reversed range is [`Error::InvalidRange`].
/// Inlined into each caller, where the range's shape is known: for a
/// `u64` range it is the engine's own conversion.
#[inline(always)]
pub(crate) fn inclusive<K: Key>(range: &impl RangeBounds<K>) -> Result<(u64, u64), Error> {
    let first = match range.start_bound() {
        Bound::Included(k) => k.to_index(),
        Bound::Excluded(k) => k.to_index().checked_add(1).ok_or(Error::InvalidRange)?,
        Bound::Unbounded => 0,
    };
    let last = match range.end_bound() {
        Bound::Included(k) => k.to_index(),
        Bound::Excluded(k) => k.to_index().checked_sub(1).ok_or(Error::InvalidRange)?,
        Bound::Unbounded => K::MAX_INDEX,
    };
    if first > last {
        return Err(Error::InvalidRange);
    }
    Ok((first, last))
}

/// The indices `[lo, hi]` of an entry (or of a range cut to a window of
/// keys) as keys.
#[inline(always)]
pub(crate) fn span<K: Key>(lo: u64, hi: u64) -> RangeInclusive<K> {
    K::from_index(lo)..=K::from_index(hi)
}

/// The indices `[lo, hi]` as keys, `hi` cut to the last key: an empty
/// range the tree reports runs to `u64::MAX`, past the last key of a
/// narrower type.
#[inline(always)]
pub(crate) fn keys<K: Key>(lo: u64, hi: u64) -> RangeInclusive<K> {
    K::from_index(lo)..=K::from_index(hi.min(K::MAX_INDEX))
}

/// Whether an index lies past the last key (only the empty range after
/// the last one can).
#[inline(always)]
pub(crate) fn past_last<K: Key>(index: u64) -> bool {
    index > K::MAX_INDEX
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<K: Key + PartialEq + core::fmt::Debug>(k: K) {
        assert_eq!(K::from_index(k.to_index()), k);
        assert!(k.to_index() <= K::MAX_INDEX);
    }

    #[test]
    fn integer_keys_keep_order_and_fill_their_range() {
        for k in [i8::MIN, -1, 0, 1, i8::MAX] {
            round_trip(k);
        }
        assert_eq!((i8::MIN.to_index(), i8::MAX.to_index(), i8::MAX_INDEX), (0, 255, 255));
        assert_eq!(i64::MIN.to_index(), 0);
        assert_eq!(i64::MAX.to_index(), u64::MAX);
        assert_eq!(i64::MAX_INDEX, u64::MAX);
        assert!((-1i64).to_index() < 0i64.to_index());
        assert_eq!((-1i32).to_index(), 0x7fff_ffff);
        for k in [u32::MIN, 7, u32::MAX] {
            round_trip(k);
        }
        assert_eq!(u16::MAX_INDEX, 0xffff);
        round_trip(isize::MIN);
        round_trip(usize::MAX);
    }

    #[test]
    fn chars_skip_the_surrogates() {
        for c in ['\0', 'a', '\u{d7ff}', '\u{e000}', char::MAX] {
            round_trip(c);
        }
        assert_eq!('\u{d7ff}'.to_index() + 1, '\u{e000}'.to_index());
        assert_eq!(char::MAX.to_index(), char::MAX_INDEX);
        for i in [0, 0xd7ff, 0xd800, char::MAX_INDEX] {
            assert_eq!(char::from_index(i).to_index(), i);
        }
        assert_eq!(char::from_index(u64::MAX), char::MAX);
    }

    #[test]
    fn an_open_end_stops_at_the_last_key() {
        assert_eq!(inclusive::<u8>(&(3..)), Ok((3, 255)));
        assert_eq!(inclusive::<i8>(&(..0)), Ok((0, 127)));
        assert_eq!(inclusive::<i8>(&(..i8::MIN)), Err(Error::InvalidRange));
        assert_eq!(inclusive::<u8>(&(Bound::Excluded(255), Bound::Unbounded)), Err(Error::InvalidRange));
        assert_eq!(keys::<u8>(250, u64::MAX), 250..=255);
    }
}
