//! The range-edit engine every call that changes the attributes of a
//! range runs on (`mprotect`, `madvise`, naming, values, locks, policies,
//! seals): each VMA piece of the range is visited, cut out and given new
//! attributes or left alone, and the neighbours merge around what
//! changed, as Linux's `vma_modify` does one VMA at a time.

use crate::{
    error::{AllocFail, Errno, Result},
    flags::VmFlags,
    space::AddressSpace,
    store::VmaStore,
    vma::VmaData,
};

/// How a range walk treats holes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holes {
    /// `mprotect`: stop at the first hole (changes before it stay) with `ENOMEM`.
    Stop,
    /// `madvise`, naming: skip holes, then report `ENOMEM`.
    Skip,
    /// `mbind` (which checked them first): skip holes.
    Ignore,
}

/// What a visit does with one VMA piece.
pub(crate) type Visit<'f> = &'f mut dyn FnMut(&VmaData) -> Result<Option<VmaData>>;

impl<T: VmaStore> AddressSpace<T> {
    /// Applies `visit` to every VMA piece in `[start, end)`: the piece is
    /// cut out and given the new attributes (`Some`), or left alone
    /// (`None`); then neighbours merge around every changed piece. An error
    /// from `visit` stops the walk, keeping what was changed before it, as
    /// Linux does.
    pub(crate) fn modify(&mut self, start: u64, end: u64, holes: Holes, visit: Visit<'_>) -> Result<()> {
        self.transact(&[(start, end)], |mm| mm.modify_in(start, end, holes, visit, false))
    }

    /// The body of [`modify`](Self::modify), for a caller that runs it
    /// within a transaction of its own. With `write_locked` (an `mprotect`
    /// that grants write permission), a locked private mapping made
    /// writable is written at once, as Linux populates it; Linux changes
    /// one VMA at a time, merging it with its neighbours before writing
    /// it, and that order decides which pieces share an anon_vma and so
    /// merge (found by the kernel oracle), so such a call is done piece by
    /// piece.
    pub(crate) fn modify_in(
        &mut self,
        start: u64,
        end: u64,
        holes: Holes,
        visit: Visit<'_>,
        write_locked: bool,
    ) -> core::result::Result<Result<()>, AllocFail> {
        let mm = self;
        let mut changed: Vec<(u64, u64)> = Vec::new();
        // Changed VMAs that no merge may delete (see `merge_around_keeping`).
        let mut kept: smallvec::SmallVec<[(u64, u64); 2]> = smallvec::SmallVec::new();
        let mut pos = start;
        let mut result = Ok(());
        let pieces = mm.entries(start, end);
        if pieces.is_empty() {
            return Ok(Err(Errno::ENOMEM));
        }
        // A locked private mapping without write permission yet.
        let populates = |d: &VmaData| d.flags.locked_now() && !d.flags.intersects(VmFlags::WRITE | VmFlags::SHARED);
        let one_by_one = write_locked && pieces.iter().any(|(_, _, d)| populates(d));
        for (s, e, data) in pieces {
            if s > pos && holes != Holes::Ignore {
                result = Err(Errno::ENOMEM);
                if holes == Holes::Stop {
                    break;
                }
            }
            let (ps, pe) = (s.max(start), e.min(end));
            pos = pe;
            let new = match visit(&data) {
                Ok(n) => n,
                Err(err) => {
                    result = Err(err);
                    break;
                }
            };
            let Some(new) = new else { continue };
            // Pages made private and writable count against RLIMIT_DATA
            // (only mprotect makes them so), before any cut: Linux refuses
            // where the new flags do not fit and the old ones would.
            let n = pe - ps;
            if mm.layout.data_limit != u64::MAX
                && new.flags.contains(VmFlags::WRITE)
                && !mm.may_expand_vm(new.flags, n, 0)
                && mm.may_expand_vm(data.flags, n, 0)
            {
                result = Err(Errno::ENOMEM);
                break;
            }
            if let Err(err) = mm.check_splits(ps, pe) {
                result = Err(err);
                break;
            }
            let written = populates(&data) && new.flags.contains(VmFlags::WRITE);
            let keep = (ps, pe) == (s, e) && data.closes();
            mm.put(ps, pe, new)?;
            if keep {
                kept.push((ps, pe));
            }
            if !one_by_one {
                changed.push((ps, pe));
                continue;
            }
            mm.merge_around_keeping(&[(ps, pe)], &kept)?;
            // (A write fault past the end of a file prepares the
            // anon_vma before it fails; one on a guard page does not.)
            if written {
                mm.populate_writes(ps, pe)?;
            }
        }
        if result.is_ok() && pos < end && holes != Holes::Ignore {
            result = Err(Errno::ENOMEM);
        }
        mm.merge_around_keeping(&changed, &kept)?;
        Ok(result)
    }
}
