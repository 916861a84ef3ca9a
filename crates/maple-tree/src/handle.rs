//! Values stored in the tree: one machine word each.
//!
//! A node slot is one pointer-sized word, as in the kernel. Values therefore
//! go into the tree as *handles*: an owning pointer (`Box<T>`, `Arc<T>`) is
//! stored as its address, and small `Copy` values ([`Inline`]: the
//! integers up to 32 bits, `bool`, `char`, [`U63`], small tuples of them,
//! and a user's own small types) are stored in the slot itself, shifted
//! left with the low bit set, so `MapleTree<u32>` needs no allocation per
//! entry at all. The std types wider than that or owning memory (`u64`,
//! `String`, `Vec<T>` …) are boxed by the tree itself.
//!
//! The trade-off: a lookup hands out a [`Handle::Borrowed`] view (for
//! `Box<T>` and `Arc<T>` a `&T`, for an inline value the value itself)
//! rather than `&V`, because a slot holds only the raw word, not a `V`
//! value. Values larger than a word live behind a pointer; that costs one
//! allocation per value but keeps every node 256 bytes and every slot
//! update one atomic store, which is what lets readers run without locks.

#[allow(unused_imports)]
use crate::prelude::*;

use core::{fmt, ptr::NonNull};
use liballoc::sync::Arc;

use crate::sync::AtomicPtr;
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2", not(loom))))]
use crate::sync::Ordering;

/// Raw word value the tree reserves for its own markers; no handle may
/// encode to it. It is even (so never a [`U63`]) and in the top page of the
/// address space (so never a `Box`/`Arc` allocation or a dangling ZST
/// pointer, which is at most the type's alignment).
pub(crate) const RESERVED_ADDR: usize = usize::MAX & !0xfff;

/// The reserved marker word (the kernel's zero entry): occupies a range but
/// is no value.
#[inline]
pub(crate) fn reserved_word() -> *mut () {
    core::ptr::without_provenance_mut(RESERVED_ADDR)
}

/// True for words that are values: neither empty nor the reserved marker.
/// (In this form the compiler drops the test where it knows the word is a
/// handle's; loops over slot words use [`is_value_word`].)
#[inline]
pub(crate) fn is_value(w: *mut ()) -> bool {
    !w.is_null() && w.addr() != RESERVED_ADDR
}

/// [`is_value`] in one test and one branch, for loops over a node's slot
/// words: the marker is `-0x1000`, so adding `0x1000` takes both
/// non-values, and only them, to `0` or `0x1000`.
#[inline(always)]
pub(crate) fn is_value_word(w: *mut ()) -> bool {
    const STEP: usize = RESERVED_ADDR.wrapping_neg();
    w.addr().wrapping_add(STEP) & !STEP != 0
}

/// Which of sixteen slot words are values, one bit each ([`is_value_word`]
/// of slot `i` in bit `i`). On x86-64 (whose baseline has SSE2) the words
/// are read as plain loads, two to a 128-bit compare: about half the
/// instructions of one test per word, which is what other targets (and
/// loom's atomics) do.
///
/// # Safety
///
/// Nobody writes `slots` meanwhile: a node of a plain tree while it is
/// borrowed, never one the concurrent tree's readers can reach (its
/// writers store slots in place under them).
#[inline(always)]
pub(crate) unsafe fn value_mask(slots: &[AtomicPtr<()>; 16]) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2", not(loom)))]
    {
        use core::arch::x86_64::{
            __m128i, _mm_add_epi64, _mm_and_si128, _mm_castps_si128, _mm_castsi128_ps, _mm_cmpeq_epi32,
            _mm_loadu_si128, _mm_movemask_ps, _mm_or_si128, _mm_set1_epi64x, _mm_setzero_si128, _mm_shuffle_ps,
        };
        const STEP: usize = RESERVED_ADDR.wrapping_neg();
        let src = slots.as_ptr().cast::<__m128i>();
        // As in `is_value_word`: a word is no value exactly when adding
        // `STEP` and clearing that bit leaves zero; a 64-bit lane is zero
        // when both its 32-bit halves are, which SSE2 compares.
        // SAFETY: the target has SSE2 (this block is compiled only where
        // it does), so its intrinsics run on any CPU this code runs on.
        // `AtomicPtr<()>` has a pointer's layout, so the sixteen slots are
        // 128 bytes, read 16 at a time (`loadu` takes any alignment);
        // nobody writes them meanwhile (this function's contract): the
        // plain loads race with nothing.
        unsafe {
            let (step, keep) = (_mm_set1_epi64x(STEP as i64), _mm_set1_epi64x(!STEP as i64));
            let mut empty = 0;
            for k in 0..4 {
                let a = _mm_loadu_si128(src.add(2 * k));
                let b = _mm_loadu_si128(src.add(2 * k + 1));
                let a = _mm_castsi128_ps(_mm_and_si128(_mm_add_epi64(a, step), keep));
                let b = _mm_castsi128_ps(_mm_and_si128(_mm_add_epi64(b, step), keep));
                // The low halves of slots 4k..4k+4 in one vector, their
                // high halves in another, in slot order.
                let low = _mm_castps_si128(_mm_shuffle_ps::<0b10_00_10_00>(a, b));
                let high = _mm_castps_si128(_mm_shuffle_ps::<0b11_01_11_01>(a, b));
                let zero = _mm_cmpeq_epi32(_mm_or_si128(low, high), _mm_setzero_si128());
                empty |= (_mm_movemask_ps(_mm_castsi128_ps(zero)) as u32) << (4 * k);
            }
            !empty & 0xffff
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2", not(loom))))]
    {
        let mut mask = 0;
        for (i, s) in slots.iter().enumerate() {
            mask |= u32::from(is_value_word(s.load(Ordering::Relaxed))) << i;
        }
        mask
    }
}

/// A value that can live in a tree slot as one non-null word.
///
/// # Safety
///
/// Implementations must guarantee that:
/// * `into_raw` returns a non-null pointer whose address is not
///   `0xffff_ffff_ffff_f000` (reserved for the tree's own markers);
/// * `from_raw(into_raw(v))` gives back `v`, and is called at most once per
///   `into_raw`;
/// * `borrow(raw)` is valid for as long as the handle has not been turned
///   back by `from_raw`, and may be called from several threads at once if
///   `Self: Sync`;
/// * if [`INLINE`](Handle::INLINE) is true, the word is the whole value: a
///   clone's `into_raw` is the same word, and dropping a handle does
///   nothing.
pub unsafe trait Handle: Sized {
    /// The word is the value itself (as for [`U63`]): nothing to clone or
    /// drop, so [`MapleTree::try_dup`](crate::MapleTree::try_dup) copies
    /// the nodes and is done, and dropping a tree frees its nodes without
    /// visiting the values. False unless the implementation says so (then
    /// every value word is handed back to `from_raw` to be dropped).
    const INLINE: bool = false;

    /// What a lookup hands out.
    type Borrowed<'a>: Copy
    where
        Self: 'a;

    /// Gives up ownership, turning the value into one word.
    fn into_raw(self) -> NonNull<()>;

    /// Takes ownership back.
    ///
    /// # Safety
    ///
    /// `raw` must come from `into_raw` of the same type and not have been
    /// turned back before.
    unsafe fn from_raw(raw: NonNull<()>) -> Self;

    /// Borrows the value behind a raw word.
    ///
    /// # Safety
    ///
    /// `raw` must come from `into_raw` of the same type, and the value must
    /// not be turned back by `from_raw` while the borrow lives.
    unsafe fn borrow<'a>(raw: NonNull<()>) -> Self::Borrowed<'a>
    where
        Self: 'a;

    /// Makes a second owner of the value behind `raw` (the tree's copy
    /// stays where it is). Used when a write cuts an entry in two and by
    /// [`MapleTree::try_dup`](crate::MapleTree::try_dup).
    ///
    /// The default materialises `Self` from the word without dropping it,
    /// which is right for handles that claim no uniqueness (`Arc`,
    /// integers); `Box` overrides it so that shared borrows of the value
    /// stay valid.
    ///
    /// # Safety
    ///
    /// `raw` must come from `into_raw` of the same type and still be owned
    /// by its tree.
    unsafe fn clone_raw(raw: NonNull<()>) -> Self
    where
        Self: Clone,
    {
        // SAFETY: per the contract `raw` is a live handle; ManuallyDrop
        // leaves its ownership untouched.
        let tmp = core::mem::ManuallyDrop::new(unsafe { Self::from_raw(raw) });
        (*tmp).clone()
    }

    /// Calls `f` with the value behind `raw` as a `&Self`: how `==`,
    /// `Hash`, the orderings, `Debug` and the merging stores look at
    /// values, through `Self`'s own implementations (so a tree of
    /// non-`'static` values compares as its values do).
    ///
    /// The default materialises `Self` from the word without dropping it,
    /// right for handles that claim no uniqueness (as
    /// [`clone_raw`](Self::clone_raw)'s default); `Box` and the values
    /// the tree boxes itself override it.
    ///
    /// # Safety
    ///
    /// `raw` must come from `into_raw` of the same type and still be owned
    /// by its tree, not borrowed mutably meanwhile.
    unsafe fn with_ref<R>(raw: NonNull<()>, f: impl FnOnce(&Self) -> R) -> R {
        // SAFETY: per the contract `raw` is a live handle; ManuallyDrop
        // leaves its ownership untouched.
        let tmp = core::mem::ManuallyDrop::new(unsafe { Self::from_raw(raw) });
        f(&tmp)
    }
}

/// A [`Handle`] that owns its value alone (`Box<T>`), so that `&mut`
/// access to the tree can give `&mut` access to the values in it
/// ([`MapleTree::get_mut`](crate::MapleTree::get_mut),
/// [`iter_mut`](crate::MapleTree::iter_mut)). Shared handles (`Arc<T>`)
/// cannot: use interior mutability in `T`, or store a new value over the
/// range. Inline values (`U63`) have no place to point into: store a new
/// value instead.
///
/// # Safety
///
/// Implementations must guarantee that `borrow_mut(raw)` points at the
/// value owned by the handle behind `raw` and at nothing any other handle
/// owns or shares, so that `&mut` access to distinct handles never aliases.
pub unsafe trait HandleMut: Handle {
    /// The value behind the handle.
    type Target;

    /// The handle's value, mutably.
    ///
    /// # Safety
    ///
    /// `raw` comes from [`into_raw`](Handle::into_raw) of a handle that is
    /// alive for `'a`, and nothing else reads or writes its value for `'a`.
    unsafe fn borrow_mut<'a>(raw: NonNull<()>) -> &'a mut Self::Target
    where
        Self: 'a;
}

// SAFETY: a `Box` owns its value alone: two boxes never share one.
unsafe impl<T> HandleMut for Box<T> {
    type Target = T;

    unsafe fn borrow_mut<'a>(raw: NonNull<()>) -> &'a mut T
    where
        T: 'a,
    {
        // SAFETY: the caller passes a live box's pointer and excludes every
        // other access to its value for `'a`.
        unsafe { raw.cast::<T>().as_mut() }
    }
}

// SAFETY: `Box::into_raw` gives a non-null, `T`-aligned pointer in the heap
// (or the type's alignment for a ZST), never the reserved top page; the
// round trip is `Box::from_raw`.
unsafe impl<T> Handle for Box<T> {
    type Borrowed<'a>
        = &'a T
    where
        T: 'a;

    fn into_raw(self) -> NonNull<()> {
        // SAFETY: `Box::into_raw` never returns null.
        unsafe { NonNull::new_unchecked(Box::into_raw(self)) }.cast()
    }

    unsafe fn from_raw(raw: NonNull<()>) -> Self {
        // SAFETY: the caller passes a pointer from `into_raw`, once.
        unsafe { Box::from_raw(raw.cast::<T>().as_ptr()) }
    }

    unsafe fn borrow<'a>(raw: NonNull<()>) -> &'a T
    where
        T: 'a,
    {
        // SAFETY: the box is alive while the caller's borrow lives.
        unsafe { raw.cast::<T>().as_ref() }
    }

    unsafe fn clone_raw(raw: NonNull<()>) -> Self
    where
        Self: Clone,
    {
        let word: *mut T = raw.cast::<T>().as_ptr();
        // The point is to clone the Box without owning it.
        #[allow(clippy::borrowed_box)]
        // SAFETY: `Box<T>` (sized `T`) has the layout of `*mut T`, and the
        // word points to a live boxed `T`. A shared reference to a local copy
        // of the pointer claims no uniqueness of the pointee, so borrows of
        // the value handed out earlier stay valid; `Box::clone` only reads it.
        let b: &Box<T> = unsafe { &*core::ptr::addr_of!(word).cast::<Box<T>>() };
        b.clone()
    }

    unsafe fn with_ref<R>(raw: NonNull<()>, f: impl FnOnce(&Self) -> R) -> R {
        let word: *mut T = raw.cast::<T>().as_ptr();
        #[allow(clippy::borrowed_box)]
        // SAFETY: as in `clone_raw`: a shared reference to a local copy of
        // the pointer, which claims no uniqueness of the live boxed `T`.
        let b: &Box<T> = unsafe { &*core::ptr::addr_of!(word).cast::<Box<T>>() };
        f(b)
    }
}

// SAFETY: as for `Box`, with `Arc::into_raw` / `Arc::from_raw`.
unsafe impl<T> Handle for Arc<T> {
    type Borrowed<'a>
        = &'a T
    where
        T: 'a;

    fn into_raw(self) -> NonNull<()> {
        // SAFETY: `Arc::into_raw` never returns null.
        unsafe { NonNull::new_unchecked(Arc::into_raw(self).cast_mut()) }.cast()
    }

    unsafe fn from_raw(raw: NonNull<()>) -> Self {
        // SAFETY: the caller passes a pointer from `into_raw`, once.
        unsafe { Arc::from_raw(raw.cast::<T>().as_ptr()) }
    }

    unsafe fn borrow<'a>(raw: NonNull<()>) -> &'a T
    where
        T: 'a,
    {
        // SAFETY: the `Arc` keeps the value alive while the borrow lives.
        unsafe { raw.cast::<T>().as_ref() }
    }
}

/// An unsigned integer below 2^63, stored inline in a slot (no allocation).
///
/// ```
/// use maple_tree::{MapleTree, U63};
/// let mut t: MapleTree<U63> = MapleTree::new();
/// t.insert_range(10..=19, U63::new(7).unwrap()).unwrap();
/// assert_eq!(t.load(15).map(U63::get), Some(7));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct U63(u64);

impl U63 {
    /// Largest value.
    pub const MAX: U63 = U63(u64::MAX >> 1);

    /// `Some` if `v < 2^63`.
    pub const fn new(v: u64) -> Option<U63> {
        if v <= Self::MAX.0 {
            Some(U63(v))
        } else {
            None
        }
    }

    /// The value, truncated to 63 bits.
    pub const fn new_truncate(v: u64) -> U63 {
        U63(v & Self::MAX.0)
    }

    /// The integer.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for U63 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for U63 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl From<u32> for U63 {
    fn from(v: u32) -> U63 {
        U63(v.into())
    }
}

impl TryFrom<u64> for U63 {
    type Error = core::num::TryFromIntError;
    fn try_from(v: u64) -> Result<U63, Self::Error> {
        // Borrow std's error type by provoking the same conversion failure.
        U63::new(v).ok_or_else(|| u8::try_from(u64::MAX).unwrap_err())
    }
}

impl From<U63> for u64 {
    fn from(v: U63) -> u64 {
        v.0
    }
}

/// A small `Copy` value that lives in a tree slot itself, with no
/// allocation per entry: every integer type up to 32 bits, `bool`,
/// `char`, `()`, [`U63`], and tuples of two or three of them that fit in
/// 63 bits together. Implement it for your own small types (an id, a
/// pair of flags, an enum) without `unsafe`, then make them storable with
/// [`inline_value!`](crate::inline_value):
///
/// ```
/// use maple_tree::{Inline, MapleTree};
///
/// #[derive(Clone, Copy, Debug, PartialEq)]
/// struct Frame(u32);
///
/// impl Inline for Frame {
///     const BITS: u32 = 32;
///     fn to_bits(self) -> u64 {
///         self.0.into()
///     }
///     fn from_bits(bits: u64) -> Self {
///         Frame(bits as u32)
///     }
/// }
/// maple_tree::inline_value!(Frame);
///
/// let mut t: MapleTree<Frame> = MapleTree::new();
/// t.insert_range(0x1000..=0x1fff, Frame(7)).unwrap();
/// assert_eq!(t.load(0x1234), Some(Frame(7)));
///
/// // The built-in kinds need nothing more.
/// let mut flags: MapleTree<(bool, u16)> = MapleTree::new();
/// flags.store_range_merging(0..=9, (true, 3)).unwrap();
/// flags.store_range_merging(10..=19, (true, 3)).unwrap();
/// assert_eq!(flags.get_range(5), Some((0..=19, (true, 3))));
/// ```
///
/// A lookup hands out the value itself ([`Handle::Borrowed`] is `Self`).
/// Values cannot be changed in place (there is no `&mut` into a slot that
/// holds an encoded word): store a new one over the range.
pub trait Inline: Copy {
    /// How many low bits of [`to_bits`](Self::to_bits) carry the value:
    /// at most 63 (a slot keeps one bit for itself). Tuples add their
    /// parts' widths, and fail to compile where they pass 63.
    const BITS: u32;

    /// The value as the low [`BITS`](Self::BITS) bits of a word (the
    /// rest zero).
    fn to_bits(self) -> u64;

    /// The value back from what [`to_bits`](Self::to_bits) gave.
    fn from_bits(bits: u64) -> Self;
}

/// The slot word of an inline value's bits: shifted up with the low bit
/// set, so it is odd (never null, never the even reserved marker, never a
/// pointer a `Box` or `Arc` could give). Carries no provenance.
#[doc(hidden)]
#[inline(always)]
pub fn inline_word(bits: u64) -> NonNull<()> {
    let word = ((bits as usize) << 1) | 1;
    // SAFETY: the low bit is set, so the address is non-zero.
    unsafe { NonNull::new_unchecked(core::ptr::without_provenance_mut(word)) }
}

/// The bits of an inline value's slot word (see [`inline_word`]).
#[doc(hidden)]
#[inline(always)]
pub fn inline_bits(raw: NonNull<()>) -> u64 {
    (raw.as_ptr().addr() >> 1) as u64
}

/// Makes a type that implements [`Inline`] storable in a tree
/// ([`MapleTree`](crate::MapleTree), [`ConcurrentMapleTree`](crate::ConcurrentMapleTree)):
/// it writes the [`Handle`] implementation, which is `unsafe` to write by
/// hand, from the safe [`Inline`] one. See [`Inline`] for an example.
#[macro_export]
macro_rules! inline_value {
    // One implementation, `impl<generics> Handle for type` (the tuples
    // come this way too, with their parts' parameters).
    (@impl [$($generics:tt)*] $t:ty) => {
        // SAFETY: the word is `inline_word` of at most 63 bits: odd, so
        // never null nor the (even) reserved marker; it is the whole value
        // (a copy is the same word; `Inline` types are `Copy`, nothing to
        // drop), decoded by `inline_bits`, and borrowing hands out a copy.
        unsafe impl<$($generics)*> $crate::Handle for $t {
            const INLINE: bool = true;

            type Borrowed<'a>
                = $t
            where
                Self: 'a;

            #[inline]
            fn into_raw(self) -> ::core::ptr::NonNull<()> {
                const { assert!(<$t as $crate::Inline>::BITS <= 63, "an inline value has at most 63 bits") };
                $crate::inline_word(<$t as $crate::Inline>::to_bits(self))
            }

            #[inline]
            unsafe fn from_raw(raw: ::core::ptr::NonNull<()>) -> Self {
                <$t as $crate::Inline>::from_bits($crate::inline_bits(raw))
            }

            #[inline]
            unsafe fn borrow<'a>(raw: ::core::ptr::NonNull<()>) -> $t
            where
                Self: 'a,
            {
                <$t as $crate::Inline>::from_bits($crate::inline_bits(raw))
            }
        }
    };
    ($($t:ty),+ $(,)?) => {$(
        $crate::inline_value!(@impl [] $t);
    )+};
}

/// `Inline` for unsigned integers: the value's bits.
macro_rules! inline_unsigned {
    ($($t:ty),+) => {$(
        impl Inline for $t {
            const BITS: u32 = <$t>::BITS;
            #[inline]
            fn to_bits(self) -> u64 {
                self.into()
            }
            #[inline]
            fn from_bits(bits: u64) -> Self {
                bits as $t
            }
        }
    )+};
}

/// `Inline` for signed integers: the two's-complement bits, as the
/// unsigned type of the same width.
macro_rules! inline_signed {
    ($($t:ty => $u:ty),+) => {$(
        impl Inline for $t {
            const BITS: u32 = <$t>::BITS;
            #[inline]
            fn to_bits(self) -> u64 {
                (self as $u).into()
            }
            #[inline]
            fn from_bits(bits: u64) -> Self {
                bits as $u as $t
            }
        }
    )+};
}

inline_unsigned!(u8, u16, u32);
inline_signed!(i8 => u8, i16 => u16, i32 => u32);

impl Inline for bool {
    const BITS: u32 = 1;
    #[inline]
    fn to_bits(self) -> u64 {
        self.into()
    }
    #[inline]
    fn from_bits(bits: u64) -> Self {
        bits & 1 != 0
    }
}

impl Inline for char {
    const BITS: u32 = 21;
    #[inline]
    fn to_bits(self) -> u64 {
        u32::from(self).into()
    }
    #[inline]
    fn from_bits(bits: u64) -> Self {
        // Only a char's own bits come back (the word is the tree's); any
        // other would be the replacement character, not undefined.
        char::from_u32(bits as u32).unwrap_or(char::REPLACEMENT_CHARACTER)
    }
}

impl Inline for () {
    const BITS: u32 = 0;
    #[inline]
    fn to_bits(self) -> u64 {
        0
    }
    #[inline]
    fn from_bits(_: u64) -> Self {}
}

impl Inline for U63 {
    const BITS: u32 = 63;
    #[inline]
    fn to_bits(self) -> u64 {
        self.0
    }
    #[inline]
    fn from_bits(bits: u64) -> Self {
        U63::new_truncate(bits)
    }
}

/// The low `bits` bits of a word.
#[inline(always)]
const fn low(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    }
}

impl<A: Inline, B: Inline> Inline for (A, B) {
    const BITS: u32 = A::BITS + B::BITS;
    #[inline]
    fn to_bits(self) -> u64 {
        const { assert!(Self::BITS <= 63, "a tuple stored inline has at most 63 bits") };
        self.0.to_bits() | self.1.to_bits() << A::BITS
    }
    #[inline]
    fn from_bits(bits: u64) -> Self {
        (A::from_bits(bits & low(A::BITS)), B::from_bits(bits >> A::BITS & low(B::BITS)))
    }
}

impl<A: Inline, B: Inline, C: Inline> Inline for (A, B, C) {
    const BITS: u32 = A::BITS + B::BITS + C::BITS;
    #[inline]
    fn to_bits(self) -> u64 {
        const { assert!(Self::BITS <= 63, "a tuple stored inline has at most 63 bits") };
        self.0.to_bits() | self.1.to_bits() << A::BITS | self.2.to_bits() << (A::BITS + B::BITS)
    }
    #[inline]
    fn from_bits(bits: u64) -> Self {
        (
            A::from_bits(bits & low(A::BITS)),
            B::from_bits(bits >> A::BITS & low(B::BITS)),
            C::from_bits(bits >> (A::BITS + B::BITS) & low(C::BITS)),
        )
    }
}

inline_value!(u8, u16, u32, i8, i16, i32, f32, bool, char, (), U63);

inline_value!(@impl [A: Inline, B: Inline] (A, B));
inline_value!(@impl [A: Inline, B: Inline, C: Inline] (A, B, C));

impl Inline for f32 {
    const BITS: u32 = 32;
    #[inline]
    fn to_bits(self) -> u64 {
        f32::to_bits(self).into()
    }
    #[inline]
    fn from_bits(bits: u64) -> Self {
        f32::from_bits(bits as u32)
    }
}

/// A value's word in a box the tree makes ([`boxed_value!`]): the box's
/// pointer.
#[doc(hidden)]
#[inline]
pub fn boxed_word<T>(value: T) -> NonNull<()> {
    Box::new(value).into_raw()
}

/// The value back out of its box, which is freed (see [`boxed_word`]).
///
/// # Safety
///
/// `raw` comes from `boxed_word::<T>` and is turned back once.
#[doc(hidden)]
#[inline]
pub unsafe fn boxed_take<T>(raw: NonNull<()>) -> T {
    // SAFETY: the caller's contract: a `Box<T>`'s word, turned back once.
    *unsafe { <Box<T> as Handle>::from_raw(raw) }
}

/// The value in its box (see [`boxed_word`]).
///
/// # Safety
///
/// `raw` comes from `boxed_word::<T>`, and the box is not turned back
/// nor borrowed mutably while the borrow lives.
#[doc(hidden)]
#[inline]
pub unsafe fn boxed_ref<'a, T: 'a>(raw: NonNull<()>) -> &'a T {
    // SAFETY: the caller's contract.
    unsafe { <Box<T> as Handle>::borrow(raw) }
}

/// The value in its box, mutably (see [`boxed_word`]).
///
/// # Safety
///
/// `raw` comes from `boxed_word::<T>`, and nothing else reaches the box
/// while the borrow lives.
#[doc(hidden)]
#[inline]
pub unsafe fn boxed_mut<'a, T: 'a>(raw: NonNull<()>) -> &'a mut T {
    // SAFETY: the caller's contract.
    unsafe { <Box<T> as HandleMut>::borrow_mut(raw) }
}

/// Makes your own type a value the tree boxes itself, in one line and
/// without `unsafe`: `MapleTree<YourType>` then keeps each value in a box
/// it makes (one allocation per entry, as for `String`), hands it out by
/// reference, changes it in place through `get_mut`, `values_mut` and
/// friends, and drops it with its entry. (A small `Copy` type is faster
/// stored in the slot itself: see [`Inline`].)
///
/// ```
/// use maple_tree::MapleTree;
///
/// #[derive(Clone, Debug, PartialEq)]
/// struct Mapping {
///     name: String,
///     writable: bool,
/// }
/// maple_tree::boxed_value!(Mapping);
///
/// let mut t: MapleTree<Mapping> = MapleTree::new();
/// t.insert_range(0x1000..=0x1fff, Mapping { name: "heap".into(), writable: true }).unwrap();
/// t.get_mut(0x1800).unwrap().writable = false;
/// assert_eq!(t.load(0x1000).map(|m| (m.name.as_str(), m.writable)), Some(("heap", false)));
/// ```
///
/// Several types go in one call (`boxed_value!(A, B)`); a generic type
/// names its parameters in brackets first
/// (`boxed_value!([T: Clone] Labelled<T>)`); `boxed_value!(copy T)`
/// hands a `Copy` type out by value instead of by reference (as the
/// tree's own `u64` and `f64`).
#[macro_export]
macro_rules! boxed_value {
    (copy $($t:ty),+ $(,)?) => {$(
        $crate::boxed_value!(@impl [] $t, $t, |b: &$t| *b);
    )+};
    (@impl [$($generics:tt)*] $t:ty, $borrowed:ty, $out:expr) => {
        // SAFETY: the word is a `Box<$t>`'s (`boxed_word`: non-null, never
        // the reserved page), made here and turned back once by
        // `from_raw`; `borrow` and `with_ref` read the live box, and
        // `clone_raw` clones the value without taking the box. Each entry's
        // box is its own: two never share a value, so `borrow_mut` may
        // hand out `&mut`.
        unsafe impl<$($generics)*> $crate::Handle for $t {
            type Borrowed<'a>
                = $borrowed
            where
                Self: 'a;

            #[inline]
            fn into_raw(self) -> ::core::ptr::NonNull<()> {
                $crate::boxed_word(self)
            }

            #[inline]
            unsafe fn from_raw(raw: ::core::ptr::NonNull<()>) -> Self {
                // SAFETY: the caller's contract: a word from `into_raw`,
                // turned back once.
                unsafe { $crate::boxed_take(raw) }
            }

            #[inline]
            unsafe fn borrow<'a>(raw: ::core::ptr::NonNull<()>) -> $borrowed
            where
                Self: 'a,
            {
                // SAFETY: the caller's contract: the box is alive while
                // the borrow lives.
                let b: &'a $t = unsafe { $crate::boxed_ref(raw) };
                ($out)(b)
            }

            // (`for<'x>`: the bound is the trait's, for a type that may
            // not be `Clone`, where a plain `Self: Clone` is an error.)
            unsafe fn clone_raw(raw: ::core::ptr::NonNull<()>) -> Self
            where
                for<'x> Self: ::core::clone::Clone,
            {
                // SAFETY: as for `borrow`; the tree's box stays.
                let b: &$t = unsafe { $crate::boxed_ref(raw) };
                ::core::clone::Clone::clone(b)
            }

            unsafe fn with_ref<R>(raw: ::core::ptr::NonNull<()>, f: impl FnOnce(&Self) -> R) -> R {
                // SAFETY: as for `borrow`.
                f(unsafe { $crate::boxed_ref(raw) })
            }
        }

        // SAFETY: see above.
        unsafe impl<$($generics)*> $crate::HandleMut for $t {
            type Target = $t;

            #[inline]
            unsafe fn borrow_mut<'a>(raw: ::core::ptr::NonNull<()>) -> &'a mut $t
            where
                Self: 'a,
            {
                // SAFETY: the caller's contract: nothing else reaches the
                // box meanwhile.
                unsafe { $crate::boxed_mut(raw) }
            }
        }
    };
    ([$($generics:tt)*] $t:ty) => {
        $crate::boxed_value!(@impl [$($generics)*] $t, &'a $t, |b: &'a $t| b);
    };
    ($($t:ty),+ $(,)?) => {$(
        $crate::boxed_value!(@impl [] $t, &'a $t, |b: &'a $t| b);
    )+};
}

boxed_value!(copy u64, i64, usize, isize, u128, i128, f64);
boxed_value!(String);
boxed_value!([T] Vec<T>);

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-test form agrees with the definition on the words around
    /// both non-values and at the ends. (Arithmetic only: not under Miri.)
    #[test]
    #[cfg_attr(miri, ignore)]
    fn is_value_word_is_is_value() {
        let around = |w: usize| (0..=0x2001usize).flat_map(move |d| [w.wrapping_add(d), w.wrapping_sub(d)]);
        for w in around(0).chain(around(RESERVED_ADDR)).chain(around(usize::MAX / 2)) {
            let word = core::ptr::without_provenance_mut::<()>(w);
            assert_eq!(is_value_word(word), is_value(word), "word {w:#x}");
        }
    }

    /// The sixteen-word mask agrees with the one-word test in every slot,
    /// for words around both non-values and at the ends, each tried in
    /// every slot beside every other kind.
    #[test]
    fn value_mask_is_is_value_word_per_slot() {
        let around = |w: usize| (0..=0x11usize).flat_map(move |d| [w.wrapping_add(d << 8), w.wrapping_sub(d << 8)]);
        let mut words: Vec<usize> = around(0).chain(around(RESERVED_ADDR)).chain(around(usize::MAX / 2)).collect();
        words.extend([0x1000, 0xffff_ffff, 0x1_0000_0000, 0xffff_ffff_0000_0000, 0xffff_f000, 0xffff_ffff_ffff_f001]);
        // (Miri, which runs the SSE2 code too, tries every fifth word.)
        for (n, &w) in words.iter().enumerate().step_by(if cfg!(miri) { 5 } else { 1 }) {
            for at in 0..16 {
                // Slot `at` holds `w`, the others words further on in the
                // list, so that every pair of halves meets every other.
                let slots: [AtomicPtr<()>; 16] = core::array::from_fn(|i| {
                    let v = if i == at { w } else { words[(n + 7 * i + 1) % words.len()] };
                    AtomicPtr::new(core::ptr::without_provenance_mut(v))
                });
                let expected: u32 =
                    (0..16).map(|i| u32::from(is_value_word(slots[i].load(crate::sync::Ordering::Relaxed))) << i).sum();
                // SAFETY: nobody else can reach these slots.
                assert_eq!(unsafe { value_mask(&slots) }, expected, "word {w:#x} in slot {at}");
            }
        }
    }
}
