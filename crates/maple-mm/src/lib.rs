//! Process address spaces on the maple tree, with Linux's semantics.
//!
//! Linux keeps a process's memory areas (VMAs) in one maple tree: it
//! replaced the red-black tree with gap tracking, the per-thread VMA cache
//! and the VMA list. This crate builds that address space in userspace: an
//! [`AddressSpace`] keeps its VMAs in a gap-tracking
//! [`maple_tree::MapleTree`] and implements `mmap`, `munmap`, `mprotect`,
//! `mremap`, `brk`, `madvise`, `mlock` and its family, `mseal`, `mbind`,
//! System V shared memory (`shmat`, `shmdt`), anonymous
//! VMA names, guard pages ([`guard_pages`](AddressSpace::guard_pages)),
//! write faults ([`touch`](AddressSpace::touch), which decide merging as
//! in Linux) and the anonymous pages they make
//! ([`anon_pages`](AddressSpace::anon_pages)), faults that grow a stack
//! into the hole below it ([`fault`](AddressSpace::fault)), the resource
//! limits those calls check (`RLIMIT_AS`, `RLIMIT_DATA`, `RLIMIT_STACK`,
//! `RLIMIT_MEMLOCK`: see [`Layout`], [`total_vm`](AddressSpace::total_vm),
//! [`data_vm`](AddressSpace::data_vm),
//! [`locked_vm`](AddressSpace::locked_vm)), `fork` by O(n) duplication of
//! the tree, and `exec`; and it reads and writes `/proc/PID/maps`. Its
//! rules are checked against the running kernel by random call sequences
//! (`tests/kernel_oracle.rs`; `tests/brk_oracle.rs` for the program break
//! and the limits, around the process's own heap).
//!
//! It is meant for programs that model or track another program's memory:
//! emulators, sandboxes, record/replay tools, debuggers, userspace kernels
//! (`examples/guest_memory.rs` is an emulator's fault path on it;
//! `examples/code_cache.rs` keeps a translation cache coherent by
//! observing the space).
//!
//! ```
//! use maple_mm::{AddressSpace, Advice, Errno, MapFlags, Prot, PAGE_SIZE};
//! let mut mm = AddressSpace::new();
//! let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
//! let a = mm.mmap(0, 4 * PAGE_SIZE, Prot::RW, anon, None, 0)?;
//! mm.set_anon_name(a, 4 * PAGE_SIZE, Some("arena"))?;
//! mm.madvise(a + 2 * PAGE_SIZE, PAGE_SIZE, Advice::DontFork)?;
//! assert_eq!(mm.vma_count(), 3); // the don't-fork page is its own VMA
//! let child = mm.fork()?;
//! assert!(child.vma_at(a + 2 * PAGE_SIZE).is_none());
//! // A name is shared with the child, not copied.
//! let (p, c) = (mm.vma_at(a).unwrap(), child.vma_at(a).unwrap());
//! assert!(maple_mm::AnonName::ptr_eq(p.name().unwrap(), c.name().unwrap()));
//! assert_eq!(mm.munmap(a + 1, PAGE_SIZE), Err(Errno::EINVAL));
//! assert!(mm.maps().contains("[anon:arena]"));
//! # Ok::<(), Errno>(())
//! ```
//!
//! # How VMAs are stored
//!
//! A VMA `[start, end)` is stored under `[start, end - 1]`; its attributes
//! (flags, backing, file offset, name, anon_vma, memory policy) live in one
//! reference-counted object that does not depend on where the VMA starts
//! (the file offset is kept relative to address 0). So when a call cuts a
//! VMA, the tree's own split shares that object between the pieces, and
//! every piece has the right start and offset with nothing to fix up.
//!
//! # Fidelity
//!
//! Where this crate claims Linux semantics, a test runs the same random
//! operations on this machine's kernel (in a child process, inside a
//! reserved window, reading `/proc/self/maps`) and on an `AddressSpace`,
//! and compares the VMA lists line for line, the error numbers, the
//! guard pages (from `/proc/self/pagemap`), each VMA's anonymous pages
//! (smaps's `Anonymous`) and the private anonymous VMAs' memory policies
//! (`numa_maps`). What
//! Linux keeps but maps files do not show — don't-fork, accounting,
//! no-reserve, hugepage advice, whether anonymous memory was written,
//! memory policies — is
//! modelled because it decides where VMA boundaries fall.
//!
//! Not modelled: which pages of files and shared memory are mapped (the
//! page cache; the model keeps the anonymous pages and the guard markers of
//! the page tables), swap, memory locking limits, hugetlbfs,
//! userfaultfd, the task's memory policy (`set_mempolicy`; a VMA's,
//! `mbind`, is modelled).
//!
//! # Also here
//!
//! * [`SharedAddressSpace`]: the same address space with lookups that take
//!   no lock (an epoch guard on a `ConcurrentMapleTree`), access checks
//!   with guard pages included, while one writer at a time makes any of
//!   the calls above.
//! * [`set_observer`](AddressSpace::set_observer): an observer told what
//!   each call changed ([`Change`]: pages mapped, unmapped, changed,
//!   moved), and [`diff`](AddressSpace::diff) between two spaces in the
//!   same terms.
//! * [`VmaValue`]: an embedder's own value on each VMA
//!   ([`mmap_with`](AddressSpace::mmap_with),
//!   [`set_value`](AddressSpace::set_value)), following splits, forks
//!   and moves, and vetoing merges.
//! * [`reserve`](AddressSpace::reserve): ranges no mapping may take (an
//!   emulator's own).
//! * Snapshots (feature `serde`): an `AddressSpace` serialises with every
//!   VMA attribute and its hidden state, and reads back checked.
//! * [`strace`]: rebuild every process's address space from an `strace -f`
//!   log (the `maple replay` command).
//! * [`swap`]: swap extents (page offset → disk block) on the tree, built
//!   from a real file's extents (`FIEMAP`) as `swapon` builds them.
//!
//! The crate's unsafe code is in three places, each argued where it is:
//! the VMA records ([`VmaRef`]: counted references into 4 KiB chunks of
//! 64-byte records, so that a space's records sit together in memory
//! whatever else the program allocates; model-checked with loom, run under
//! Miri), one `ioctl` call (`swap::read_extents`), and the page
//! [`from_pid`](AddressSpace::from_pid) maps and reads once to learn the
//! zero page's frame.

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod access;
mod change;
mod edit;
mod error;
mod flags;
mod fork;
mod layout;
mod lock;
mod maps;
mod mbind;
mod mmap;
mod modify;
mod mremap;
mod name;
#[cfg(feature = "baseline")]
mod old_design;
mod page;
mod pages;
mod policy;
mod primitives;
mod proc;
#[cfg(feature = "baseline")]
pub mod rbtree;
mod seal;
mod shared;
mod shm;
#[cfg(feature = "serde")]
pub mod snapshot;
mod space;
mod stack;
mod store;
pub mod strace;
pub mod swap;
mod transact;
mod value;
mod vma;
mod vma_slab;

pub use access::{Access, Fault};
pub use change::{Change, Observer};
pub use error::{io_reason, Errno, Result};
pub use flags::{Advice, MapFlags, MclFlags, MlockFlags, MremapFlags, Prot, ShmFlags, VmFlags};
#[cfg(feature = "fault-injection")]
pub use fork::fault;
pub use layout::{Arch, Layout};
pub use maple_tree;
pub use maps::{MapsError, MapsLine};
pub use name::{AnonName, MAX_NAME_LEN};
pub use page::{BadPageSize, PageSize, PAGE_SIZE};
pub use policy::{MbindFlags, MemPolicy, MempolicyFlags, MempolicyMode};
pub use shared::{SharedAddressSpace, SpaceWriter};
pub use shm::ShmSegment;
pub use space::{prot_of_index, AddressSpace, Brk, SpaceStats};
pub use store::{TreeStore, VmaStore};
pub use value::VmaValue;
pub use vma::{AnonVma, Backing, MappedFile, Vma, VmaData};
pub use vma_slab::VmaRef;

// An address space, with an observer or not, can be shared between
// threads (an observer need only be `Send`).
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<AddressSpace>();
    send_sync::<SharedAddressSpace>();
};

/// The README's examples (tree and address space), compiled and run as
/// doctests here, where both crates are in scope.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// This crate's own README, run as doctests too.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctests;
