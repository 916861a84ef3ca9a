//! # maple-tree
//!
//! A map from non-overlapping key ranges to values, with the free
//! ranges between them found in O(log n): a userspace implementation of
//! the Linux kernel's maple tree (the structure that has held each
//! process's memory areas since Linux 6.1), with its 256-byte nodes, its
//! gap search, its cursors, O(n) duplication, writes that fail without
//! changing anything, and a concurrent flavour whose readers take no
//! lock.
//!
//! Keys are inclusive ranges `[first, last]` of `u64` by default, or of
//! any [`Key`] type: every integer type up to 64 bits, `char`, and your
//! own newtypes (an address, a page frame number). A new tree is one
//! empty range over every key, `[0, u64::MAX]` for `u64`. Storing over a range overwrites (trimming or
//! cutting neighbours); storing nothing empties it; `insert` fails if
//! anything is present; `erase` removes the whole entry holding an index.
//! Values are one word each ([`Handle`]): small `Copy` values stored in
//! the slot itself ([`Inline`]: `u8`…`u32`, `i8`…`i32`, `f32`, `bool`,
//! `char`, [`U63`], tuples of them, and your own small types); `u64`,
//! `i64`, `usize`, `u128`, `f64`, `String` and `Vec<T>` in a box the tree
//! makes (one allocation per entry), and so your own types, in one line
//! ([`boxed_value!`]); `Box<T>` and `Arc<T>` too (an `Arc` shares one
//! value between entries and trees).
//!
//! ```
//! use maple_tree::{MapleTree, U63};
//!
//! let mut vmas: MapleTree<U63> = MapleTree::with_gaps();
//! vmas.insert_range(0x1000..=0x1fff, U63::from(1u32)).unwrap();
//! vmas.insert_range(0x4000..=0x5fff, U63::from(2u32)).unwrap();
//! // Lowest free window of 0x2000 bytes at or above 0x1000:
//! assert_eq!(vmas.empty_area(0x1000.., 0x2000), Ok(0x2000));
//! // Highest one below 0x8000:
//! assert_eq!(vmas.empty_area_rev(..0x8000, 0x2000), Ok(0x6000));
//! ```
//!
//! ## Normal and advanced API
//!
//! The normal API ([`MapleTree::load`], [`MapleTree::insert_range`],
//! [`MapleTree::store_range`], [`MapleTree::erase`], iteration, gap search)
//! takes an index or a range and finds its place itself. The advanced API
//! is the cursor ([`Cursor`], [`CursorMut`]), the equivalent of the
//! kernel's `ma_state`: a cursor stands on one range (an entry *or* an empty
//! range, with exact bounds), steps over entries or over all ranges, and can
//! write where it stands, without a walk from the root.
//!
//! ```
//! use maple_tree::{MapleTree, U63};
//! let mut t = MapleTree::new();
//! t.insert_range(10..=19, U63::from(1u32)).unwrap();
//! t.insert_range(30..=39, U63::from(2u32)).unwrap();
//! let mut c = t.cursor(0);
//! assert_eq!(c.range(), 0..=9); // the empty range before the first entry
//! assert_eq!(c.next_range(), Some((10..=19, Some(U63::from(1u32)))));
//! assert_eq!(c.next_range(), Some((20..=29, None)));
//! assert_eq!(c.next().map(|(r, v)| (r, v.get())), Some((30..=39, 2)));
//! ```
//!
//! ## Gaps
//!
//! [`MapleTree::gaps`] iterates over the empty ranges inside a window (both
//! directions); [`MapleTree::empty_area`] and
//! [`empty_area_rev`](MapleTree::empty_area_rev) find the lowest or highest
//! free window of a size. On a gap-tracking tree
//! ([`MapleTree::with_gaps`]) both skip full subtrees: O(log n) per gap.
//!
//! ## Mutable access
//!
//! Values a handle owns alone (`Box<T>`, see [`HandleMut`]) can be changed
//! in place through `&mut` access to the tree: [`MapleTree::get_mut`],
//! [`iter_mut`](MapleTree::iter_mut), [`range_mut`](MapleTree::range_mut),
//! [`values_mut`](MapleTree::values_mut). Every kind of value, the small
//! ones stored in the slot itself included, is changed through
//! [`MapleTree::update`] (one entry), [`MapleTree::for_each_mut`] (every
//! entry, with its range) and [`for_each_value_mut`](MapleTree::for_each_value_mut)
//! (every value): the handle is lent to a closure as `&mut V` and its word
//! written back after. `Arc<T>` values are shared, so they offer `&T`
//! only (use interior mutability, or store a new value).
//!
//! ## Locking and reading
//!
//! A [`MapleTree`] is written through `&mut` and read through `&`: Rust's
//! borrow rules are the lock, and writes may update a node in place.
//! [`ConcurrentMapleTree`] lets readers run with no lock while one writer
//! at a time (behind [`ConcurrentMapleTree::lock`]) changes the tree:
//! readers [`pin`](ConcurrentMapleTree::pin) an epoch and read under the
//! [`ReadGuard`]; every multi-word change is built in fresh nodes and
//! published by one release store, only single words change in place, and
//! replaced nodes are marked dead so that a reader meeting one restarts
//! from the root. During a concurrent write each lookup sees the value from
//! before or after it; an iteration may mix before and after of one write
//! but stays in order (ascending from the front, descending from the
//! back, every entry present the whole time once); a reader never sees a
//! torn or freed entry.
//!
//! Which to use:
//!
//! * One thread, or threads that take turns (`Mutex<MapleTree>`): a
//!   [`MapleTree`]. It is the fastest for writes (in-place updates, frees
//!   at once) and hands removed values back.
//! * Lookups from many threads that must never wait for a writer (a
//!   debugger or profiler reading an emulator's address space while it
//!   runs): a [`ConcurrentMapleTree`]. Hold one [`ReadGuard`] across a
//!   batch of lookups: reading under a guard costs about what a plain
//!   `&MapleTree` lookup does, while pinning per lookup (`load_with`)
//!   adds one atomic swap. Removed values are
//!   dropped later, on the writer's thread.
//! * Both in turn: [`ConcurrentMapleTree::with_mut`] lends the tree out as
//!   a plain `MapleTree` while `&mut` proves nobody else is looking, and
//!   `From`/[`ConcurrentMapleTree::into_inner`] convert in O(1). The
//!   writer's guard hands out a [`WriteCursor`] for walking and editing in
//!   one pass.
//!
//! ## Coming from `BTreeMap`, `rangemap` or `nodit`
//!
//! Keys are ranges inclusive at both ends (`a..=b`; any `RangeBounds`
//! of the key type is accepted where a range is asked for). A
//! `BTreeMap<u64, (u64, V)>` from each range's start to its end and value
//! is the usual hand-written idiom; `rangemap::RangeInclusiveMap` and
//! `nodit::NoditMap` are crates. Their calls, and ours:
//!
//! | what | `BTreeMap` idiom | `rangemap` | `nodit` | maple |
//! | --- | --- | --- | --- | --- |
//! | value at a key | `range(..=k).next_back()`, then check the end | `get(&k)` | – | [`load`](MapleTree::load) |
//! | entry at a key | the same, keeping the start | `get_key_value(&k)` | – | [`get_range`](MapleTree::get_range) |
//! | is a key covered | the same | `contains_key(&k)` | – | [`contains`](MapleTree::contains) |
//! | insert where nothing is | check the neighbours, then `insert` | – | `insert_strict` | [`insert_range`](MapleTree::insert_range) |
//! | store over what is there | trim or split the neighbours by hand | – | `insert_overwrite` | [`store_range`](MapleTree::store_range) |
//! | store, joining equal neighbours | by hand | `insert` | `insert_merge_touching_if_values_equal` (which fails on an overlap; ours overwrites) | [`store_range_merging`](MapleTree::store_range_merging) |
//! | insert, joining whatever touches it | by hand | – | `insert_merge_touching` | [`insert_merge_touching`](MapleTree::insert_merge_touching) |
//! | insert, joining whatever it overlaps | by hand | – | `insert_merge_overlapping` | [`insert_merge_overlapping`](MapleTree::insert_merge_overlapping) |
//! | insert, joining both | by hand | – | `insert_merge_touching_or_overlapping` | [`insert_merge_touching_or_overlapping`](MapleTree::insert_merge_touching_or_overlapping) (a [`MapleSet`]'s `insert` always joins both) |
//! | empty a range | trim or split by hand | `remove` | `cut` (ours hands back nothing: read [`range`](MapleTree::range) first) | [`remove_range`](MapleTree::remove_range) |
//! | entries overlapping a range | `range(..=b)` from the entry before `a` | `overlapping(&r)` | – | [`range`](MapleTree::range) |
//! | any overlap at all | the same | `overlaps(&r)` | – | `range(r).next().is_some()` |
//! | the free ranges in a window | walk the entries | `gaps(&r)` | – | [`gaps`](MapleTree::gaps), [`empty_area`](MapleTree::empty_area) (first fit) |
//! | lowest, highest entry | `first_key_value`, `last_key_value` | `first_range_value`, `last_range_value` | – | [`first`](MapleTree::first), [`last`](MapleTree::last) |
//! | keep some entries | `retain` | – | – | [`retain`](MapleTree::retain) |
//! | all entries | `iter` | `iter` | – | [`iter`](MapleTree::iter) |
//! | change a value in place | `get_mut` after the lookup | – | – | [`update`](MapleTree::update) (any value), [`get_mut`](MapleTree::get_mut) (boxed) |
//! | change every value | `values_mut` (`iter_mut` with the keys) | – | – | [`for_each_value_mut`](MapleTree::for_each_value_mut) ([`for_each_mut`](MapleTree::for_each_mut) with the ranges; any value), [`values_mut`](MapleTree::values_mut) (boxed) |
//! | split at a key | `split_off` (then trim the entry across it) | – | `split_off` | [`split_off`](MapleTree::split_off) |
//! | move another map in | `append` (overlaps by hand) | `extend` | – | [`append`](MapleTree::append) |
//! | keys other than `u64` | `BTreeMap<K, (K, V)>` | `RangeInclusiveMap<K, V>` (`K: StepLite`) | `NoditMap<K, I, V>` | `MapleTree<V, K>` ([`Key`]; made by [`keyed`](MapleTree::keyed)) |
//! | a value of your own type | any `V` | `V: Clone + PartialEq` | any `V` | `V` after one [`boxed_value!`] line (boxed by the tree), or [`Inline`] for a small `Copy` type (in the slot) |
//!
//! Differences to know: `len` counts entries as stored (`rangemap` counts
//! its coalesced ranges, which is ours after storing with
//! `store_range_merging` only); `collect` and `extend` store without
//! joining equal neighbours ([`from_iter_merging`](MapleTree::from_iter_merging)
//! and [`extend_merging`](MapleTree::extend_merging) join, as `rangemap`'s
//! do). A value is handed out as
//! [`Handle::Borrowed`]: `&T` for `Box<T>`, `Arc<T>` and the boxed
//! kinds (`String`, your [`boxed_value!`] types), the value itself for the
//! [`Inline`] kinds and the wide integers.
//!
//! A tree of another key type is made with
//! [`keyed`](MapleTree::keyed) (or `Default`, or `collect`): `new` is for
//! `u64` keys only, as `HashMap::new` is for its default hasher only, so
//! that a tree used with bare integer literals keeps `u64` keys rather
//! than the literals' fallback type, `i32`.
//!
//! ```
//! use maple_tree::MapleTree;
//!
//! // Signed keys keep their order: -10 comes before 0.
//! let mut t: MapleTree<u32, i64> = MapleTree::keyed();
//! t.insert_range(-10..=-1, 1).unwrap();
//! t.insert_range(0..=9, 2).unwrap();
//! assert_eq!(t.iter().map(|(_, v)| v).collect::<Vec<_>>(), [1, 2]);
//! // The key space ends at the type's last key.
//! assert_eq!(t.range_at(10).0, 10..=i64::MAX);
//! ```
//!
//! A set of ranges (`rangemap::RangeInclusiveSet`, `BTreeSet` of ranges by
//! hand) is a [`MapleSet`]: touching and overlapping ranges join as they
//! go in, and the set operations (`union`, `intersection`, `difference`,
//! `symmetric_difference`, and `|`, `&`, `-`, `^` for new sets) walk both
//! sets once, and `complement` (`!`) is the gaps; [`Combined`] does the
//! same for any two sorted range lists, a map's keys among them.
//!
//! ## Speed: when to choose it
//!
//! The project's benchmark report (`maple-report`, in the `maple-bench`
//! crate) measures it side by side with `BTreeMap<u64, (u64, V)>` used as a range
//! map (the entry starting at or below a key, its end checked). Where the
//! two differ, and why:
//!
//! * lookups are faster: 16-way nodes of four cache lines make a short
//!   tree; free ranges are found in O(log n), which a `BTreeMap` cannot;
//! * ascending stores are faster: a write that starts in the leaf the
//!   last one wrote to searches that leaf only (`extend` and `collect` of
//!   sorted ranges benefit), and [`MapleTree::from_sorted`] builds fastest
//!   of all, filling nodes level by level;
//! * random stores are slower, random erases about even: a range takes two
//!   slots (its entry and the gap after it) and leaves are kept dense, so
//!   about every other random insert refills a leaf with its sibling, a
//!   write long enough that the processor cannot start the next one's
//!   walk early, as it can `BTreeMap`'s short insert;
//! * forward iteration is about even; backward iteration by `sum`, `fold`
//!   or `for_each` runs on `rfold`, which reads whole leaves; short range
//!   queries are faster, since an iterator walks only when first asked,
//!   from the end it is asked at;
//! * duplication is O(n) ([`MapleTree::try_dup`]: nodes copied, not
//!   entries re-inserted);
//! * and, as a [`ConcurrentMapleTree`], readers run without a lock while a
//!   writer works.
//!
//! Writes that stay near each other (a region carved up, a range grown or
//! shrunk in place) are cheapest through one [`CursorMut`], which keeps its
//! place between writes; the tree's own methods keep the walk of their
//! last write too. A workload of mostly random inserts and erases of
//! single keys, with no use for ranges, gaps or lock-free readers, is
//! better served by `BTreeMap`.
//!
//! ## Guarantees
//!
//! * No panic on any input: invalid ranges, sizes and windows return
//!   [`Error::InvalidRange`]; failures hand the value back
//!   ([`InsertError`]).
//! * [`MapleTree::validate`] checks every invariant: pivots ascending inside
//!   the implied bounds, unused pivots and slots cleared, minimum fill
//!   (6 slots in leaves and plain nodes, 4 in gap nodes; the root and the
//!   right-most spine are exempt), parent back-links, gap values, no two
//!   adjacent empty ranges anywhere, all leaves at one depth, no reachable
//!   dead node, and the entry count.
//! * Unwind safety: a value's `Drop` runs only after the tree is consistent.
//!
//! ## Features
//!
//! * `std` (default): [`ConcurrentMapleTree`] (with `crossbeam-epoch`),
//!   a per-thread cache of empty node chunks (at most 64 MiB, so that a
//!   tree built after another was dropped reuses its memory instead of
//!   having it faulted in afresh; [`trim_thread_cache`] gives it back),
//!   and on Linux
//!   huge pages for big trees: nodes come in 2 MiB blocks, and once a tree
//!   holds 8 MiB of nodes, each block it has used up is collapsed into one
//!   huge page (`madvise`, Linux 6.1 and later; no memory is added), which
//!   spares random lookups in trees of millions of ranges most of their
//!   TLB misses. Smaller trees keep small pages whatever the system's
//!   transparent-huge-page setting. [`Stats::held_bytes`] counts a tree's
//!   node memory. Without `std` the crate is
//!   `no_std` + `alloc`: [`MapleTree`], its cursors and everything above
//!   works, each tree's node chunks coming straight from the global
//!   allocator (CI builds it for `x86_64-unknown-none`).
//! * `serde`: `Serialize`/`Deserialize` for [`MapleTree`] (a sequence of
//!   `(first, last, value)` in ascending order; read back in any order, an
//!   overlap or a backwards range is an error naming the entry) and for
//!   [`U63`]; `serde_with_gaps` reads into a gap-tracking tree. `Arc`
//!   values need serde's own `rc` feature.
//! * `fault-injection`: counts node allocations and fails the N-th one
//!   (module `fault`), for testing that every failed write changes nothing.
//! * `testing`: for this crate's own tests, not a stable API (plain trees
//!   that write as the concurrent tree does, and a way to collect
//!   deferred frees at once).
//!
//! ## How it works
//!
//! Nodes are the kernel's: leaves and plain internal nodes hold 16 slots
//! and 15 pivots, gap-tracking internal nodes 10 slots, 9 pivots and 10
//! gap values; every node is exactly 256 bytes and 256-byte aligned (four
//! cache lines), and the low bits of node pointers carry the node type.
//! Adjacent empty ranges are always merged.
//!
//! ### Writes
//!
//! Every write is planned before anything visible changes: the nodes it
//! needs are allocated and filled first, so a failed allocation leaves the
//! tree exactly as it was. A tree borrowed
//! `&mut` has no reader, so a write changes the nodes it touches in place
//! where that is cheapest and frees replaced nodes at once. A
//! [`ConcurrentMapleTree`]'s writer cannot: every change of more than one
//! word is built in fresh nodes and published by one pointer store. Which
//! of the two a tree does is part of its type, so that the in-place
//! writes cannot be reached where readers exist; `MapleTree<V>` writes in
//! place. (The crate's tests run the fresh-node writes on a plain tree,
//! with the whole plain API, through its `testing` feature.)
//!
//! A tree keeps the walk of its last write (in trees of two levels or
//! more; a kilobyte, allocated once, after the tree's first 32 writes): a
//! write that starts in the leaf the last one ended in (ascending ranges,
//! a region being carved up) searches that leaf only, and any other walks
//! from the root as usual. Any other
//! change to the tree (a cursor's write, `clear`, a spell as a concurrent
//! tree) makes the tree forget it. A [`CursorMut`] keeps its own walk the
//! same way, and moves it as it steps.
//!
//! ```
//! use maple_tree::{MapleTree, U63};
//! let mut t: MapleTree<U63> = MapleTree::new();
//! // Ascending ranges: most are stored without a walk from the root.
//! t.extend((0..1000u64).map(|i| (i * 16..=i * 16 + 9, U63::new(i).unwrap())));
//! let mut c = t.cursor_mut(160);
//! // Rewrites next to where the cursor stands stay in its leaf.
//! c.store_range(160..=163, U63::from(7u32)).unwrap();
//! c.remove_range(164..=169).unwrap();
//! drop(c);
//! assert_eq!(t.load(161).map(U63::get), Some(7));
//! assert_eq!(t.load(165), None);
//! ```
//!
//! ### Memory reclamation
//!
//! Replaced nodes and replaced or erased values of a `ConcurrentMapleTree`
//! are freed once every reader that could see them has unpinned. The
//! writer collects them in batches of 32 and keeps each batch itself;
//! `crossbeam-epoch` only raises a flag when a batch's grace period is
//! over, and the writer then frees the batch on its own thread during a
//! later write. So nodes and values are freed, and values dropped, only by
//! the thread holding the writer lock or by the thread that drops the tree
//! (which frees everything at once: no reader can be left then) — never by
//! a reader, never on a thread the collector happens to run on, and never
//! after the tree is gone. [`WriteGuard::reclaim`] seals the current batch
//! and frees what is due right away, for use after a burst of writes. A
//! `MapleTree` frees at once.
//!
//! ### Node statistics
//!
//! [`MapleTree::stats`] counts leaves and internal nodes and the bytes they
//! use. Trees are kept about as dense as the kernel's: a node that
//! overflows is pushed into a sibling with room before it is split, and
//! bulk-built trees are filled level by level. The benchmark report
//! gives the bytes per range for each way of building.

#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

// `alloc` is this crate's node allocator module; the library is `liballoc`.
extern crate alloc as liballoc;
#[cfg(any(feature = "std", test))]
extern crate std;

/// What `std`'s prelude would bring, from `alloc` (the crate is `no_std`).
#[allow(unused_imports)]
mod prelude {
    pub(crate) use liballoc::{
        boxed::Box,
        format,
        string::{String, ToString},
        vec,
        vec::Vec,
    };
}

/// Defines a function as `const`, but for loom builds, whose atomics
/// cannot be made in a constant.
macro_rules! const_unless_loom {
    ($(#[$m:meta])* $v:vis fn $name:ident($($a:ident: $t:ty),*) -> $r:ty $body:block) => {
        $(#[$m])*
        #[cfg(not(loom))]
        $v const fn $name($($a: $t),*) -> $r $body

        $(#[$m])*
        #[cfg(loom)]
        $v fn $name($($a: $t),*) -> $r $body
    };
}

mod alloc;
mod build;
#[cfg(all(feature = "std", not(loom)))]
mod concurrent;
mod cursor;
mod dup;
mod entry;
mod error;
mod gap;
mod gap_iter;
mod handle;
mod iter;
mod kept_walk;
mod key;
#[cfg(all(test, loom))]
mod loom_tests;
mod merge;
mod navigate;
mod node;
mod raw;
#[cfg(feature = "serde")]
mod serde_impl;
mod set;
mod store;
mod sync;
mod tree;
mod update;
mod validate;
mod write;

#[cfg(feature = "fault-injection")]
pub use alloc::fault;
pub use alloc::trim_thread_cache;
#[cfg(all(feature = "std", feature = "testing", not(loom)))]
pub use concurrent::collect_garbage;
#[cfg(all(feature = "std", not(loom)))]
pub use concurrent::{ConcurrentIter, ConcurrentMapleTree, ReadGuard, WriteCursor, WriteGuard};
pub use cursor::{Cursor, CursorMut};
pub use dup::DupError;
pub use entry::{OccupiedRange, RangeEntry, VacantRange};
pub use error::{AllocError, Error, InsertError};
pub use gap_iter::Gaps;
pub use handle::{
    boxed_mut, boxed_ref, boxed_take, boxed_word, inline_bits, inline_word, Handle, HandleMut, Inline, U63,
};
pub use iter::{IntoIter, Iter, IterMut, RangeCloned};
pub use key::Key;
#[cfg(feature = "serde")]
pub use serde_impl::serde_with_gaps;
pub use set::{Combined, IntoRanges, MapleSet, Ranges};
#[cfg(any(test, feature = "testing"))]
pub use tree::{FreshNodes, InPlace, Writes};
pub use tree::{MapleTree, Moved, Stats};
pub use validate::ValidateError;

/// The crate README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
