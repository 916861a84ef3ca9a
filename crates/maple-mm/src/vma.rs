//! Virtual memory areas: what a mapping is, and when two neighbours merge.
//!
//! The tree stores each VMA under `[start, end - 1]` and the VMA's
//! attributes as a shared [`VmaData`]. The attributes do not depend on where
//! the VMA starts: the file offset is kept as the byte offset that address 0
//! would map (`off_base`), so a VMA's offset is `off_base + start` (Linux's
//! `vm_pgoff` times the page size; bytes, so that the record does not
//! depend on the page size either). A piece cut off a VMA therefore has
//! exactly the same attributes as the VMA, and the tree's own split (which
//! shares the value by reference count) gives every piece its correct start
//! and file offset without any fixing up — and a concurrent reader always
//! sees a range and attributes that belong together.

use core::fmt;
use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc,
};

use crate::{flags::VmFlags, name::AnonName, page::PageSize, value::ErasedValue, Prot};

/// An open file that is mapped (Linux's `struct file`), with the identity
/// `/proc/PID/maps` shows.
///
/// Share one `Arc<MappedFile>` between mappings made through the same open
/// file (the same file descriptor): neighbours merge only then, because
/// Linux compares the open file, not the inode. Mapping the same file
/// opened twice gives VMAs that never merge, as in Linux.
#[derive(Clone, Debug)]
pub struct MappedFile {
    /// Device major number.
    pub dev_major: u32,
    /// Device minor number.
    pub dev_minor: u32,
    /// Inode number.
    pub inode: u64,
    /// Path as shown in the maps file.
    pub path: String,
    /// Whether the file was opened for writing (a shared writable mapping
    /// of a read-only file is `EACCES`).
    pub writable: bool,
    /// Shared anonymous memory (`MAP_SHARED | MAP_ANONYMOUS`): Linux backs
    /// it with a fresh shmem file shown as `/dev/zero (deleted)`.
    pub anon_shmem: bool,
    /// The file's size in bytes, if known. A page wholly past it cannot be
    /// accessed (Linux raises `SIGBUS`), so [`touch`] fails there and
    /// `MADV_POPULATE_WRITE` stops there, as in Linux; a mapping may still
    /// reach past it (`mmap` and `mremap` do not look). `None`, the
    /// default for a regular file: unknown, every page counts as backed.
    /// Shared anonymous memory gets the length of the `mmap` that made it
    /// (its shmem object keeps that size when `mremap` grows a mapping
    /// of it: the pages past it raise `SIGBUS`).
    ///
    /// [`touch`]: crate::AddressSpace::touch
    pub size: Option<u64>,
    /// A System V shared memory segment (mapped by
    /// [`shmat`](crate::AddressSpace::shmat)): what
    /// [`shmdt`](crate::AddressSpace::shmdt) detaches.
    pub sysv_shm: bool,
}

/// Counter for the inode numbers of shared anonymous memory.
static SHMEM_INODE: AtomicU64 = AtomicU64::new(1);

impl MappedFile {
    /// A regular file.
    pub fn new(dev_major: u32, dev_minor: u32, inode: u64, path: impl Into<String>) -> MappedFile {
        MappedFile {
            dev_major,
            dev_minor,
            inode,
            path: path.into(),
            writable: true,
            anon_shmem: false,
            size: None,
            sysv_shm: false,
        }
    }

    /// The same file, `bytes` long (see [`size`](Self::size)).
    ///
    /// ```
    /// use maple_mm::{AddressSpace, MapFlags, MappedFile, Prot, PAGE_SIZE};
    /// use std::sync::Arc;
    ///
    /// // Two and a bit pages of file, mapped over four pages.
    /// let file = Arc::new(MappedFile::new(8, 1, 42, "/data/f").with_size(2 * PAGE_SIZE + 100));
    /// let mut mm = AddressSpace::new();
    /// let rw = Prot::READ | Prot::WRITE;
    /// let at = mm.mmap(0, 4 * PAGE_SIZE, rw, MapFlags::PRIVATE, Some(file), 0).unwrap();
    /// // The page holding the file's end can be written; the one after cannot.
    /// assert!(mm.touch(at, 3 * PAGE_SIZE).is_ok());
    /// assert!(mm.touch(at + 3 * PAGE_SIZE, 1).is_err());
    /// ```
    pub fn with_size(mut self, bytes: u64) -> MappedFile {
        self.size = Some(bytes);
        self
    }

    /// The same file, opened read-only.
    pub fn read_only(mut self) -> MappedFile {
        self.writable = false;
        self
    }

    /// A fresh shmem object for a shared anonymous mapping `len` bytes long.
    pub(crate) fn new_shmem(len: u64) -> MappedFile {
        let inode = SHMEM_INODE.fetch_add(1, Ordering::Relaxed);
        MappedFile {
            dev_major: 0,
            dev_minor: 1,
            inode,
            path: "/dev/zero (deleted)".into(),
            writable: true,
            anon_shmem: true,
            size: Some(len),
            sysv_shm: false,
        }
    }

    /// Same file: same device and inode.
    pub fn same_file(&self, other: &MappedFile) -> bool {
        (self.dev_major, self.dev_minor, self.inode, self.anon_shmem)
            == (other.dev_major, other.dev_minor, other.inode, other.anon_shmem)
    }
}

/// What backs a mapping.
#[derive(Clone, Debug)]
pub enum Backing {
    /// Private anonymous memory.
    Anon,
    /// A file (or the shmem object of shared anonymous memory).
    File(Arc<MappedFile>),
}

impl Backing {
    /// The file, if any.
    pub fn file(&self) -> Option<&MappedFile> {
        match self {
            Backing::Anon => None,
            Backing::File(f) => Some(f),
        }
    }

    fn same(&self, other: &Backing) -> bool {
        match (self, other) {
            (Backing::Anon, Backing::Anon) => true,
            // Linux compares `struct file` pointers: the same file opened
            // twice does not merge.
            (Backing::File(a), Backing::File(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// The anonymous-memory state of a VMA that has been written (Linux's
/// `anon_vma`): which anon_vma it belongs to, and whether it was inherited
/// through a fork (its chain then also links the parent's, and Linux will
/// not merge it with a never-written neighbour). One word: the id with the
/// inherited mark in its top bit.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct AnonVma(core::num::NonZeroU64);

const FORKED: u64 = 1 << 63;

static ANON_VMA_ID: AtomicU64 = AtomicU64::new(1);

/// Ids handed out per thread in blocks, so that a fork of many written
/// VMAs does not do one shared atomic increment per VMA.
const ID_BLOCK: u64 = 1024;

thread_local! {
    static NEXT_ID: core::cell::Cell<(u64, u64)> = const { core::cell::Cell::new((0, 0)) };
}

fn next_anon_id() -> u64 {
    NEXT_ID.with(|c| {
        let (mut next, mut end) = c.get();
        if next == end {
            next = ANON_VMA_ID.fetch_add(ID_BLOCK, Ordering::Relaxed);
            end = next + ID_BLOCK;
        }
        c.set((next + 1, end));
        next
    })
}

impl AnonVma {
    fn make(forked: bool) -> AnonVma {
        let id = next_anon_id() & !FORKED;
        let word = id | if forked { FORKED } else { 0 };
        AnonVma(core::num::NonZeroU64::new(word.max(1)).unwrap_or(core::num::NonZeroU64::MIN))
    }

    /// A fresh anon_vma (a first write fault).
    pub(crate) fn new() -> AnonVma {
        AnonVma::make(false)
    }

    /// The child's anon_vma after a fork.
    pub(crate) fn forked() -> AnonVma {
        AnonVma::make(true)
    }

    /// Identity: VMAs with the same id share one anon_vma.
    pub fn id(self) -> u64 {
        self.0.get() & !FORKED
    }

    /// Inherited from a parent by fork.
    pub fn is_forked(self) -> bool {
        self.0.get() & FORKED != 0
    }
}

impl fmt::Debug for AnonVma {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnonVma").field("id", &self.id()).field("forked", &self.is_forked()).finish()
    }
}

/// A VMA's attributes, shared by reference count between the pieces of a
/// split (see the module docs). Opaque: read them through [`Vma`].
#[derive(Clone, Debug)]
pub struct VmaData {
    pub(crate) flags: VmFlags,
    pub(crate) backing: Backing,
    /// File offset in bytes (or, for private anonymous memory, the offset
    /// Linux keeps in `vm_pgoff` in pages) that address 0 would map;
    /// wrapping arithmetic.
    pub(crate) off_base: u64,
    pub(crate) name: Option<AnonName>,
    pub(crate) anon: Option<AnonVma>,
    /// What few VMAs carry: a special mapping's label, the embedder's value.
    pub(crate) extra: Option<Arc<Extra>>,
    /// The memory policy (`mbind`); `None` for the default.
    pub(crate) policy: Option<Arc<crate::MemPolicy>>,
}

/// The rarely set attributes of a VMA, behind one pointer so that the
/// record stays seven words.
#[derive(Debug, Default)]
pub(crate) struct Extra {
    /// What the maps file shows for a special mapping (`[vdso]`, …).
    pub(crate) label: Option<String>,
    /// The embedder's value (see [`VmaValue`](crate::VmaValue)).
    pub(crate) value: Option<Box<dyn ErasedValue>>,
}

impl Extra {
    /// The extra attributes `label` and `value` make, if any.
    pub(crate) fn make(label: Option<String>, value: Option<Box<dyn ErasedValue>>) -> Option<Arc<Extra>> {
        (label.is_some() || value.is_some()).then(|| Arc::new(Extra { label, value }))
    }
}

/// Equal embedder's values (none on both, or equal by `==`).
pub(crate) fn same_value(a: Option<&dyn ErasedValue>, b: Option<&dyn ErasedValue>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(v), Some(w)) => v.same(w),
        _ => false,
    }
}

/// Equal extra attributes (labels, and values by `==`).
pub(crate) fn same_extra(a: &Option<Arc<Extra>>, b: &Option<Arc<Extra>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => {
            Arc::ptr_eq(x, y) || (x.label == y.label && same_value(x.value.as_deref(), y.value.as_deref()))
        }
        _ => false,
    }
}

impl VmaData {
    /// The label of a special mapping.
    pub(crate) fn label(&self) -> Option<&str> {
        self.extra.as_ref()?.label.as_deref()
    }

    /// The embedder's value.
    pub(crate) fn value(&self) -> Option<&dyn ErasedValue> {
        self.extra.as_ref()?.value.as_deref()
    }

    /// These attributes with the embedder's value replaced.
    pub(crate) fn with_value(&self, value: Option<Box<dyn ErasedValue>>) -> VmaData {
        VmaData { extra: Extra::make(self.label().map(str::to_owned), value), ..self.clone() }
    }

    /// Whether the extra attributes let `self` merge with `next` above it:
    /// the same label, and no value or values that join.
    fn extra_joins(&self, next: &VmaData) -> bool {
        match (&self.extra, &next.extra) {
            (None, None) => true,
            (Some(x), Some(y)) if Arc::ptr_eq(x, y) => true,
            _ => {
                self.label() == next.label()
                    && match (self.value(), next.value()) {
                        (None, None) => true,
                        (Some(v), Some(w)) => v.joins(w),
                        _ => false,
                    }
            }
        }
    }

    /// The offset (bytes) that `addr` maps.
    pub(crate) fn offset_at(&self, addr: u64) -> u64 {
        self.off_base.wrapping_add(addr)
    }

    /// `off_base` for a VMA at `start` whose first byte is at `offset`.
    pub(crate) fn base_for(start: u64, offset: u64) -> u64 {
        offset.wrapping_sub(start)
    }

    /// The first address of `[start, end)` (addresses of this VMA) on a
    /// page wholly past the end of the file or shmem object it maps, where
    /// that size is known: an access there raises `SIGBUS` in Linux.
    /// `None` if every page of the range is backed, or the size unknown.
    pub(crate) fn past_object(&self, start: u64, end: u64, page: PageSize) -> Option<u64> {
        let size = page.align_up(self.backing.file()?.size?).unwrap_or(u64::MAX);
        let backed = size.saturating_sub(self.offset_at(start));
        let at = start.saturating_add(backed);
        (at < end).then_some(at)
    }

    /// The record of a VMA whose page at `from` moved to `to`: a file
    /// keeps its offsets; a never-written anonymous range takes its new
    /// address's page number, so it can merge at the destination (a
    /// written one cannot).
    /// The embedder's value follows ([`VmaValue::moved`](crate::VmaValue::moved)).
    pub(crate) fn relocated(&self, from: u64, to: u64) -> VmaData {
        let off_base =
            if self.is_anonymous() && self.anon.is_none() { 0 } else { VmaData::base_for(to, self.offset_at(from)) };
        let moved = match self.value() {
            Some(v) if from != to => self.with_value(Some(v.moved(from, to))),
            _ => self.clone(),
        };
        VmaData { off_base, ..moved }
    }

    /// Linux's `vma_is_anonymous`: private anonymous memory.
    pub(crate) fn is_anonymous(&self) -> bool {
        matches!(self.backing, Backing::Anon)
    }

    /// A mapping whose `vm_ops` has a `close` hook (a System V segment's):
    /// a merge may grow or shrink it, never delete it.
    pub(crate) fn closes(&self) -> bool {
        self.backing.file().is_some_and(|f| f.sysv_shm)
    }

    /// Everything but the anon_vma matches (`is_mergeable_vma` plus
    /// contiguous offsets, for neighbours).
    pub(crate) fn same_kind(&self, other: &VmaData) -> bool {
        (self.flags ^ other.flags).difference(VmFlags::STICKY).is_empty()
            && !self.flags.contains(VmFlags::SPECIAL)
            && self.backing.same(&other.backing)
            && self.off_base == other.off_base
            && self.name == other.name
            && self.policy == other.policy
            && self.extra_joins(other)
    }

    /// Whether `self` (ending where `next` starts) and `next` merge into one
    /// VMA, and Linux's anon_vma rule: two written VMAs only if they share
    /// an anon_vma; a written one with a never-written one unless the
    /// written one was inherited through fork.
    pub(crate) fn merges_with(&self, next: &VmaData) -> bool {
        self.same_kind(next)
            && match (self.anon, next.anon) {
                (None, None) => true,
                (Some(a), Some(b)) => a.id() == b.id(),
                (Some(a), None) | (None, Some(a)) => !a.is_forked(),
            }
    }

    /// The attributes of `self` merged with `next`.
    pub(crate) fn merged(&self, next: &VmaData) -> VmaData {
        VmaData { anon: self.anon.or(next.anon), flags: self.flags | (next.flags & VmFlags::STICKY), ..self.clone() }
    }

    /// Linux's `anon_vma_compatible`: a neighbour whose anon_vma a first
    /// write fault may reuse (same file, contiguous offsets, flags equal
    /// but for access and sticky bits).
    pub(crate) fn anon_compatible(&self, other: &VmaData) -> bool {
        self.backing.same(&other.backing)
            && self.off_base == other.off_base
            && self.policy == other.policy
            && (self.flags ^ other.flags).difference(VmFlags::ACCESS | VmFlags::STICKY).is_empty()
    }
}

/// One mapping, as a lookup sees it: its range and its attributes.
///
/// ```
/// use maple_mm::{AddressSpace, MapFlags, Prot, PAGE_SIZE};
/// let mut mm = AddressSpace::new();
/// let a = mm.mmap(0x10_0000, 4 * PAGE_SIZE, Prot::READ, MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED, None, 0).unwrap();
/// let vma = mm.find_vma(a).unwrap();
/// assert_eq!((vma.start(), vma.end(), vma.prot()), (0x10_0000, 0x10_4000, Prot::READ));
/// assert_eq!(vma.to_string(), "00100000-00104000 r--p 00000000 00:00 0 "); // Linux keeps the space
/// ```
#[derive(Clone, Copy)]
pub struct Vma<'a> {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) data: &'a VmaData,
}

impl<'a> Vma<'a> {
    /// First address.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// One past the last address.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Never true: a VMA covers at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// `start..end`.
    pub fn range(&self) -> core::ops::Range<u64> {
        self.start..self.end
    }

    /// True if `addr` is inside.
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    /// Protection.
    pub fn prot(&self) -> Prot {
        self.data.flags.prot()
    }

    /// All flags.
    pub fn flags(&self) -> VmFlags {
        self.data.flags
    }

    /// Shared mapping.
    pub fn is_shared(&self) -> bool {
        self.data.flags.contains(VmFlags::SHARED)
    }

    /// What backs it.
    pub fn backing(&self) -> &'a Backing {
        &self.data.backing
    }

    /// The file, if file-backed (shared anonymous memory has a shmem file).
    pub fn file(&self) -> Option<&'a MappedFile> {
        self.data.backing.file()
    }

    /// Private anonymous memory.
    pub fn is_anonymous(&self) -> bool {
        self.data.is_anonymous()
    }

    /// The offset Linux keeps in pages (`vm_pgoff`), in bytes: the file
    /// offset of `start` (for private anonymous memory, a number used only
    /// for merging: the start address where the memory was first mapped).
    pub fn offset(&self) -> u64 {
        self.data.offset_at(self.start)
    }

    /// Offset shown in `/proc/PID/maps`: [`offset`](Self::offset) for
    /// files, 0 for anonymous memory.
    pub fn file_offset(&self) -> u64 {
        if self.data.is_anonymous() {
            0
        } else {
            self.offset()
        }
    }

    /// The anonymous name, if any.
    pub fn name(&self) -> Option<&'a AnonName> {
        self.data.name.as_ref()
    }

    /// The label of a special mapping (`[vdso]`, `[vvar]`, …), if any.
    pub fn label(&self) -> Option<&'a str> {
        self.data.label()
    }

    /// The embedder's value of type `V` on this VMA, if it has one of that
    /// type (see [`VmaValue`](crate::VmaValue)).
    pub fn value<V: crate::VmaValue>(&self) -> Option<&'a V> {
        self.data.value()?.as_any().downcast_ref::<V>()
    }

    /// Whether the VMA carries an embedder's value (of any type).
    pub fn has_value(&self) -> bool {
        self.data.value().is_some()
    }

    /// The anon_vma, if the mapping has been written (private mappings).
    pub fn anon_vma(&self) -> Option<AnonVma> {
        self.data.anon
    }

    /// The memory policy (`mbind`); `None` for the default.
    pub fn policy(&self) -> Option<&'a crate::MemPolicy> {
        self.data.policy.as_deref()
    }

    /// `rwxp` / `rw-s` as in the maps file.
    pub fn perms(&self) -> [u8; 4] {
        let f = self.data.flags;
        [
            if f.contains(VmFlags::READ) { b'r' } else { b'-' },
            if f.contains(VmFlags::WRITE) { b'w' } else { b'-' },
            if f.contains(VmFlags::EXEC) { b'x' } else { b'-' },
            if f.contains(VmFlags::SHARED) { b's' } else { b'p' },
        ]
    }
}

impl fmt::Debug for Vma<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vma")
            .field("start", &format_args!("{:#x}", self.start))
            .field("end", &format_args!("{:#x}", self.end))
            .field("flags", &self.data.flags)
            .field("backing", &self.data.backing)
            .field("offset", &format_args!("{:#x}", self.offset()))
            .field("name", &self.data.name)
            .field("anon", &self.data.anon)
            .field("value", &self.data.value())
            .finish()
    }
}

const _: () = assert!(core::mem::size_of::<VmaData>() == 56, "a VMA record is seven words (a cell holds eight)");
