//! System V shared memory: `shmat` and `shmdt`.
//!
//! A segment (`shmget`) is a shmem file that `shmat` maps shared, the
//! whole of it, through an open file of its own: `/proc/PID/maps` shows
//! it on device `00:01` with the segment's id as its inode and the path
//! `/SYSV` and the key in eight hex digits, `(deleted)`. Each attach opens
//! the segment anew, so two attaches never merge. `shmdt` finds the attach
//! that starts at its address and unmaps its pieces (those `mprotect` or
//! `munmap` left), wherever in the segment's size they are. Measured on
//! Linux 6.18 (the kernel oracle test attaches and detaches in its
//! window). Not modelled: the segments themselves (`shmget`, `shmctl`,
//! their permissions and limits): the caller says which one is attached.

use std::sync::Arc;

use crate::{
    error::{Errno, Result},
    flags::{MapFlags, Prot, ShmFlags},
    space::AddressSpace,
    store::VmaStore,
    vma::{Backing, MappedFile},
};

/// A System V shared memory segment, as `shmget` made it: what
/// [`AddressSpace::shmat`] maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShmSegment {
    /// The key it was made with (`IPC_PRIVATE` is 0).
    pub key: i32,
    /// Its id (`shmget`'s result), which maps files show as the inode.
    pub id: i32,
    /// Its size in bytes (a mapping of it covers whole pages; a page
    /// wholly past the size raises `SIGBUS`).
    pub size: u64,
}

impl ShmSegment {
    /// The open file an attach maps.
    fn open(&self, writable: bool) -> Arc<MappedFile> {
        Arc::new(MappedFile {
            writable,
            size: Some(self.size),
            sysv_shm: true,
            ..MappedFile::new(0, 1, u64::from(self.id as u32), format!("/SYSV{:08x} (deleted)", self.key as u32))
        })
    }
}

impl<T: VmaStore> AddressSpace<T> {
    /// Attaches `segment`, as `shmat(2)`: maps the whole of it shared,
    /// read-write (read-only with [`ShmFlags::RDONLY`], executable too with
    /// [`ShmFlags::EXEC`]), at `addr` or, for 0, where `mmap` would place
    /// it. Returns the address.
    ///
    /// An `addr` must be page-aligned, or is rounded down with
    /// [`ShmFlags::RND`]; the segment must not overlap a mapping there
    /// unless [`ShmFlags::REMAP`] replaces it. A read-only attach can
    /// never be made writable (`mprotect` says `EACCES`).
    ///
    /// Errors: `EINVAL` (a negative id; an unaligned address without
    /// `RND`; an overlap without `REMAP`; `REMAP` without an address, or
    /// rounded down to 0; a zero size); then `mmap`'s.
    ///
    /// ```
    /// use maple_mm::{AddressSpace, Prot, ShmFlags, ShmSegment, PAGE_SIZE};
    /// let mut mm = AddressSpace::new();
    /// let seg = ShmSegment { key: 0x1234_abcd, id: 7, size: 10_000 };
    /// let at = mm.shmat(&seg, 0, ShmFlags::empty())?;
    /// assert!(mm.maps().contains("rw-s 00000000 00:01 7"));
    /// assert!(mm.maps().contains("/SYSV1234abcd (deleted)"));
    /// assert_eq!(mm.vma_at(at).unwrap().len(), 3 * PAGE_SIZE);
    /// // A piece made read-only is detached with the rest.
    /// mm.mprotect(at + PAGE_SIZE, PAGE_SIZE, Prot::READ)?;
    /// mm.shmdt(at)?;
    /// assert_eq!(mm.vma_count(), 0);
    /// # Ok::<(), maple_mm::Errno>(())
    /// ```
    pub fn shmat(&mut self, segment: &ShmSegment, addr: u64, flags: ShmFlags) -> Result<u64> {
        if segment.id < 0 || segment.size == 0 {
            return Err(Errno::EINVAL);
        }
        let mut map = MapFlags::SHARED;
        let mut at = addr;
        if addr != 0 {
            if addr % self.page_size().bytes() != 0 {
                if !flags.contains(ShmFlags::RND) {
                    return Err(Errno::EINVAL);
                }
                at = self.page_size().align_down(addr);
                if at == 0 && flags.contains(ShmFlags::REMAP) {
                    return Err(Errno::EINVAL);
                }
            }
            map |= MapFlags::FIXED;
        } else if flags.contains(ShmFlags::REMAP) {
            return Err(Errno::EINVAL);
        }
        let writable = !flags.contains(ShmFlags::RDONLY);
        let mut prot = if writable { Prot::RW } else { Prot::READ };
        if flags.contains(ShmFlags::EXEC) {
            prot |= Prot::EXEC;
        }
        if addr != 0 && !flags.contains(ShmFlags::REMAP) {
            let end = at.checked_add(segment.size).ok_or(Errno::EINVAL)?;
            if self.find_vma_intersection(at, end).is_some() {
                return Err(Errno::EINVAL);
            }
        }
        self.mmap(at, segment.size, prot, map, Some(segment.open(writable)), 0)
    }

    /// Detaches the segment attached at `addr`, as `shmdt(2)`: the first
    /// attach's piece at or above `addr` whose offset in its segment is its
    /// distance from `addr` (the attach's start, or what `munmap` left of
    /// it there) is unmapped, then every piece of the same attach above it
    /// at its own offset, within the segment's size. Sealed pieces stay
    /// (Linux ignores the unmap's error).
    ///
    /// Errors: `EINVAL` (`addr` unaligned, or no attach there).
    pub fn shmdt(&mut self, addr: u64) -> Result<()> {
        if addr % self.page_size().bytes() != 0 {
            return Err(Errno::EINVAL);
        }
        // An attach's piece at its own offset from `addr`.
        let at_offset = |start: u64, offset: u64| start.wrapping_sub(addr) == offset;
        let attach = |b: &Backing| match b {
            Backing::File(f) if f.sysv_shm => Some(Arc::clone(f)),
            _ => None,
        };
        let mut pieces: smallvec::SmallVec<[(u64, u64); 4]> = smallvec::SmallVec::new();
        let mut first = None;
        for v in self.range(addr, u64::MAX) {
            match &first {
                None => {
                    if let Some(f) = attach(v.backing()).filter(|_| at_offset(v.start, v.offset())) {
                        let size = f.size.and_then(|l| self.page_size().align_up(l)).unwrap_or(0);
                        pieces.push((v.start, v.end));
                        first = Some((f, size));
                    }
                }
                Some((f, size)) => {
                    if v.end - addr > *size {
                        break;
                    }
                    let same = attach(v.backing()).is_some_and(|g| Arc::ptr_eq(f, &g));
                    if same && at_offset(v.start, v.offset()) {
                        pieces.push((v.start, v.end));
                    }
                }
            }
        }
        if first.is_none() {
            return Err(Errno::EINVAL);
        }
        pieces.retain(|&mut (s, e)| !self.sealed_in(s, e));
        self.transact(&pieces, |mm| {
            for &(s, e) in &pieces {
                mm.clear(s, e)?;
            }
            Ok(Ok(()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::ShmSegment;
    use crate::{
        layout::{each_page, test_layout},
        AddressSpace, Errno, MapFlags, Prot, ShmFlags,
    };

    const AT: u64 = 0x6000_0000_0000;

    /// A segment of four pages less a little.
    const fn seg<const P: u64>() -> ShmSegment {
        ShmSegment { key: 0, id: 3, size: 4 * P - 100 }
    }

    #[test]
    fn attaches_check_the_address_and_never_merge() {
        each_page!(attaches_check_the_address_and_never_merge_at);
    }

    fn attaches_check_the_address_and_never_merge_at<const P: u64>() {
        let mut mm = AddressSpace::with_layout(test_layout::<P>());
        assert_eq!(mm.shmat(&seg::<P>(), AT + 5, ShmFlags::empty()), Err(Errno::EINVAL));
        assert_eq!(mm.shmat(&seg::<P>(), AT + 5, ShmFlags::RND), Ok(AT));
        assert_eq!(mm.shmat(&seg::<P>(), AT + 3 * P, ShmFlags::empty()), Err(Errno::EINVAL), "overlaps");
        assert_eq!(mm.shmat(&seg::<P>(), 0, ShmFlags::REMAP), Err(Errno::EINVAL));
        assert_eq!(mm.shmat(&seg::<P>(), 5, ShmFlags::RND | ShmFlags::REMAP), Err(Errno::EINVAL));
        assert_eq!(mm.shmat(&seg::<P>(), AT + 4 * P, ShmFlags::RDONLY | ShmFlags::EXEC), Ok(AT + 4 * P));
        assert_eq!(mm.vma_count(), 2, "two attaches of one segment stay apart");
        assert_eq!(mm.vma_at(AT + 4 * P).unwrap().prot(), Prot::READ | Prot::EXEC);
        assert_eq!(mm.mprotect(AT + 4 * P, P, Prot::RW), Err(Errno::EACCES));
        // REMAP replaces what is there.
        let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
        mm.mmap(AT + 10 * P, P, Prot::RW, anon, None, 0).unwrap();
        assert_eq!(mm.shmat(&seg::<P>(), AT + 9 * P, ShmFlags::REMAP), Ok(AT + 9 * P));
        assert_eq!(mm.vma_at(AT + 10 * P).unwrap().file().map(|f| f.sysv_shm), Some(true));
        mm.validate().unwrap();
    }

    #[test]
    fn a_detach_finds_the_pieces_of_its_attach() {
        each_page!(a_detach_finds_the_pieces_of_its_attach_at);
    }

    fn a_detach_finds_the_pieces_of_its_attach_at<const P: u64>() {
        let mut mm = AddressSpace::with_layout(test_layout::<P>());
        mm.shmat(&seg::<P>(), AT, ShmFlags::empty()).unwrap();
        // Another attach right after, and the first cut in three pieces
        // with its first page gone.
        mm.shmat(&seg::<P>(), AT + 4 * P, ShmFlags::empty()).unwrap();
        mm.mprotect(AT + 2 * P, P, Prot::READ).unwrap();
        mm.munmap(AT, P).unwrap();
        assert_eq!(mm.vma_count(), 4);
        assert_eq!(mm.shmdt(AT + 1), Err(Errno::EINVAL));
        assert_eq!(mm.shmdt(AT + P), Err(Errno::EINVAL), "no piece of an attach at offset 0 there");
        assert_eq!(mm.shmdt(AT), Ok(()));
        let left: Vec<_> = mm.iter().map(|v| (v.start(), v.end())).collect();
        assert_eq!(left, [(AT + 4 * P, AT + 8 * P)], "only the second attach is left");
        assert_eq!(mm.shmdt(AT), Err(Errno::EINVAL));
        // A plain file mapping is no attach, nor is an attach's start at
        // another distance from the address than its offset.
        let file = std::sync::Arc::new(crate::MappedFile::new(8, 1, 9, "/f"));
        mm.mmap(AT, P, Prot::READ, MapFlags::SHARED | MapFlags::FIXED, Some(file), 0).unwrap();
        assert_eq!(mm.shmdt(AT), Err(Errno::EINVAL));
        assert_eq!(mm.shmdt(AT + 4 * P), Ok(()));
        assert_eq!(mm.vma_count(), 1);
        mm.validate().unwrap();
    }
}
