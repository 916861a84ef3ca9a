//! The embedder's own value on each VMA ([`VmaValue`]).
//!
//! A value sits in the VMA's record beside Linux's attributes, so it goes
//! wherever the record goes without a line of code for it: both pieces of
//! a split share it, a fork shares it with the child (as names are
//! shared), and a [`SharedAddressSpace`](crate::SharedAddressSpace)'s
//! readers see it lock-free. It is kept behind the record's pointer to its
//! rarely set attributes, so a space without values keeps its seven-word
//! records and its speed. The type is erased there and checked when read
//! ([`Vma::value`](crate::Vma::value)), which is what lets the one engine
//! serve every embedder's type without making the slab, the store and the
//! concurrent tree generic over it.

use core::{any::Any, fmt};

/// A value an embedder keeps on each VMA: a host address base, a
/// translation-cache handle, a shadow-memory id.
///
/// **A value describes every page of its VMA alike**, as Linux's
/// attributes do: a split does not call into it, both pieces keep it. A
/// value that depends on the address is therefore kept relative to it,
/// as this crate keeps file offsets: a host mapping as `host − guest`
/// (wrapping), not as the host address of the VMA's start. Moving pages
/// (`mremap`) is the one change of address a value is told of
/// ([`moved`](Self::moved)).
///
/// Linux's rules decide merges first; two neighbours that Linux would
/// merge stay apart unless their values [`join`](Self::joins) (by default,
/// when they are equal). A merged VMA keeps the lower neighbour's value.
///
/// ```
/// use maple_mm::{AddressSpace, MapFlags, Prot, VmaValue, PAGE_SIZE};
///
/// /// Guest page `g` lives at host address `g + delta`.
/// #[derive(Clone, Copy, Debug, PartialEq)]
/// struct Host { delta: u64 }
///
/// impl VmaValue for Host {
///     // The pages keep their host memory when the guest moves them.
///     fn moved(&self, from: u64, to: u64) -> Host {
///         Host { delta: self.delta.wrapping_add(from).wrapping_sub(to) }
///     }
/// }
///
/// let mut mm = AddressSpace::new();
/// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
/// let host = 0x7f00_0000_0000u64;
/// let a = mm.mmap_with(0x10_0000, 4 * PAGE_SIZE, Prot::RW, anon, None, 0, Host { delta: host - 0x10_0000 }).unwrap();
/// // Split by mprotect: both pieces carry the value.
/// mm.mprotect(a + PAGE_SIZE, PAGE_SIZE, Prot::READ).unwrap();
/// let host_of = |mm: &AddressSpace, g: u64| mm.find_vma(g).and_then(|v| v.value::<Host>()).map(|h| g + h.delta);
/// assert_eq!(host_of(&mm, a + 2 * PAGE_SIZE), Some(host + 2 * PAGE_SIZE));
/// // A neighbour backed elsewhere on the host does not merge.
/// mm.mmap_with(a + 4 * PAGE_SIZE, PAGE_SIZE, Prot::RW, anon, None, 0, Host { delta: 0 }).unwrap();
/// assert_eq!(mm.vma_count(), 4);
/// ```
pub trait VmaValue: Any + Clone + PartialEq + fmt::Debug + Send + Sync {
    /// Whether a VMA carrying `self` may merge with its upper neighbour
    /// carrying `next`, where Linux would merge them. By default, when the
    /// two are equal.
    fn joins(&self, next: &Self) -> bool {
        self == next
    }

    /// The value of pages that `mremap` moved from address `from` to
    /// `to` (the same offset into the moved range). By default unchanged.
    fn moved(&self, from: u64, to: u64) -> Self {
        let _ = (from, to);
        self.clone()
    }
}

/// A [`VmaValue`] of some type, as a record keeps it.
pub(crate) trait ErasedValue: Send + Sync + fmt::Debug {
    fn as_any(&self) -> &dyn Any;
    /// Equal values (of one type).
    fn same(&self, other: &dyn ErasedValue) -> bool;
    /// [`VmaValue::joins`], false across types.
    fn joins(&self, next: &dyn ErasedValue) -> bool;
    /// [`VmaValue::moved`].
    fn moved(&self, from: u64, to: u64) -> Box<dyn ErasedValue>;
}

impl<V: VmaValue> ErasedValue for V {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn same(&self, other: &dyn ErasedValue) -> bool {
        other.as_any().downcast_ref::<V>().is_some_and(|o| self == o)
    }

    fn joins(&self, next: &dyn ErasedValue) -> bool {
        next.as_any().downcast_ref::<V>().is_some_and(|n| VmaValue::joins(self, n))
    }

    fn moved(&self, from: u64, to: u64) -> Box<dyn ErasedValue> {
        Box::new(VmaValue::moved(self, from, to))
    }
}

/// Every primitive type a user might key a value by is one.
macro_rules! plain_values {
    ($($t:ty),*) => { $(impl VmaValue for $t {})* };
}
plain_values!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, bool, char, String, &'static str);
