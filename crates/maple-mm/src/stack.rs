//! Stack growth: a fault in the hole below a grows-down mapping.
//!
//! A mapping made with `MAP_GROWSDOWN` (the main thread's `[stack]` is one)
//! grows down to meet a fault below it, as Linux's `expand_downwards` does:
//! a load, store or instruction fetch at an address no VMA holds, whose
//! next VMA above grows down, extends that VMA down to the faulting page,
//! and the access is then checked against the grown VMA (so a read-only
//! stack grows on a write and the write still faults, `SEGV_ACCERR`). The
//! growth is refused (`SIGSEGV`, `SEGV_MAPERR`, nothing changes) when
//!
//! * the page lies below `vm.mmap_min_addr`;
//! * the VMA below, unless it grows down itself or is inaccessible
//!   (`PROT_NONE`), ends less than `stack_guard_gap` (256 pages) below the
//!   page ([`Layout::stack_guard_gap`]);
//! * the VMA's page offset would fall below zero (Linux's check; only
//!   private anonymous memory can grow down, whose offset is its first
//!   page's number, kept through `mremap`);
//! * the grown VMA would be larger than `RLIMIT_STACK`
//!   ([`Layout::stack_limit`]), or the VMAs would take more address space
//!   than `RLIMIT_AS` allows ([`Layout::as_limit`]), or a locked stack
//!   more locked memory than `RLIMIT_MEMLOCK` ([`Layout::memlock_limit`]).
//!
//! The grown VMA keeps its attributes (it does not merge with its
//! neighbour) and, as Linux prepares it for the fault, gets an anon_vma.
//! Only faults grow stacks: `mlock`, `MADV_POPULATE_*` and the other calls
//! that take a range fail on the hole as before. Not modelled: the
//! overcommit check, which refuses a growth on a machine short of memory.

use crate::{
    error::AllocFail,
    flags::VmFlags,
    layout::{vm_counts, within, Layout},
    space::AddressSpace,
    store::VmaStore,
    vma::Vma,
};

/// The page a fault at `addr`, which no VMA holds, grows `next` (the first
/// VMA above `addr`) down to, with `prev` the last VMA below `addr`; `None`
/// if nothing grows (`next` does not grow down, or the growth is refused:
/// see the module docs).
pub(crate) fn grows_to(prev: Option<Vma<'_>>, next: Option<Vma<'_>>, addr: u64, layout: &Layout) -> Option<u64> {
    let next = next.filter(|n| n.flags().contains(VmFlags::GROWSDOWN) && n.start > addr)?;
    let page = layout.page_size.align_down(addr);
    if page < layout.mmap_min_addr {
        return None;
    }
    if let Some(p) = prev {
        let fenced = !p.flags().contains(VmFlags::GROWSDOWN) && p.flags().intersects(VmFlags::ACCESS);
        if fenced && page.saturating_sub(p.end) < layout.stack_guard_gap {
            return None;
        }
    }
    // Linux refuses growth below page offset 0 (`grow > vm_pgoff`).
    if next.start - page > next.offset() || next.end - page > layout.stack_limit {
        return None;
    }
    Some(page)
}

/// Whether `next`, a stack, may grow down to `page` within `RLIMIT_AS`
/// and, locked, `RLIMIT_MEMLOCK` (its growth is never data, which
/// `RLIMIT_DATA` limits). `counts(locked)` gives the space's `total_vm` and
/// (if `locked`) `locked_vm`: a walk over every VMA, taken only where a
/// limit asks.
pub(crate) fn growth_fits(layout: &Layout, next: Vma<'_>, page: u64, counts: impl FnOnce(bool) -> (u64, u64)) -> bool {
    let grow = next.start - page;
    let locked = layout.memlock_limit != u64::MAX && next.flags().contains(VmFlags::LOCKED);
    if layout.as_limit == u64::MAX && !locked {
        return true;
    }
    let (total, lck) = counts(locked);
    within(total, grow, layout.as_limit, layout.page_size)
        && (!locked || within(lck, grow, layout.memlock_limit, layout.page_size))
}

/// `next` as it would stand grown down to `page`.
pub(crate) fn grown(next: Vma<'_>, page: u64) -> Vma<'_> {
    Vma { start: page, ..next }
}

impl<T: VmaStore> AddressSpace<T> {
    /// The page a fault at `addr` would grow a stack down to, and the
    /// stack (as it stands now); `None` if `addr` is mapped or nothing
    /// would grow. See [`grows_to`].
    pub(crate) fn stack_growth(&self, addr: u64) -> Option<(u64, Vma<'_>)> {
        match self.tree.range_at(addr) {
            (_, Some(_)) => None,
            (hole, None) => self.growth_into_hole(addr, *hole.end()),
        }
    }

    /// [`stack_growth`](Self::stack_growth) of an `addr` in the hole
    /// ending at `last`.
    fn growth_into_hole(&self, addr: u64, last: u64) -> Option<(u64, Vma<'_>)> {
        let view = &self.tree;
        // What follows a hole is a VMA (or the end): one walk, and most
        // holes lie below something else than a stack.
        let next = view.get_range(last.checked_add(1)?).map(|(r, d)| Self::vma_of(r, d));
        if !next?.flags().contains(VmFlags::GROWSDOWN) {
            return None;
        }
        let prev = view.prev_before(addr).map(|(r, d)| Self::vma_of(r, d));
        let page = grows_to(prev, next, addr, &self.layout)?;
        let counts = |locked| {
            let (total, lck) = vm_counts(self.iter(), self.layout.task_size, locked);
            (total, lck + self.lock_leak)
        };
        growth_fits(&self.layout, next?, page, counts).then_some((page, next?))
    }

    /// The VMA a fault at `addr` meets: the one holding it, or the stack
    /// the fault would grow down to it (with its grown range).
    pub(crate) fn faulting_vma(&self, addr: u64) -> Option<Vma<'_>> {
        match self.tree.range_at(addr) {
            (r, Some(d)) => Some(Self::vma_of(r, d)),
            (hole, None) => self.growth_into_hole(addr, *hole.end()).map(|(page, next)| grown(next, page)),
        }
    }

    /// Grows the stack above `addr` down to `page` (checked by
    /// [`stack_growth`](Self::stack_growth)), with the anon_vma a fault
    /// prepares. The caller undoes it if an allocation fails.
    pub(crate) fn grow_stack(&mut self, page: u64) -> core::result::Result<(), AllocFail> {
        let Some((_, next)) = self.stack_growth(page) else { return Ok(()) };
        let (start, end) = (next.start, next.end);
        // The anon_vma comes first, from the neighbours of the stack as it
        // stands (Linux prepares it before it moves the start).
        self.fault_in(start, end)?;
        let Some(data) = self.vma_at(start).map(|v| v.data.clone()) else { return Ok(()) };
        self.put(page, end, data)
    }
}

#[cfg(test)]
mod tests {
    use crate::{
        layout::{each_page, test_layout},
        Access, AddressSpace, Fault, Layout, MapFlags, Prot, VmFlags,
    };

    const STACK: MapFlags =
        MapFlags::PRIVATE.union(MapFlags::ANONYMOUS).union(MapFlags::FIXED).union(MapFlags::GROWSDOWN);
    const ANON: MapFlags = MapFlags::PRIVATE.union(MapFlags::ANONYMOUS).union(MapFlags::FIXED);
    const TOP: u64 = 0x7000_0000_0000;

    /// A four-page stack at `TOP - 4 pages`, and `below` pages under it a
    /// page mapped with `prot` (if any).
    fn space<const P: u64>(below: Option<(u64, Prot)>) -> AddressSpace {
        let mut mm = AddressSpace::with_layout(test_layout::<P>());
        mm.mmap(TOP - 4 * P, 4 * P, Prot::RW, STACK, None, 0).unwrap();
        if let Some((pages, prot)) = below {
            mm.mmap(TOP - 4 * P - pages * P - P, P, prot, ANON, None, 0).unwrap();
        }
        mm
    }

    #[test]
    fn a_write_below_a_stack_grows_it_to_the_page() {
        each_page!(a_write_below_a_stack_grows_it_to_the_page_at);
    }

    fn a_write_below_a_stack_grows_it_to_the_page_at<const P: u64>() {
        let mut mm = space::<P>(None);
        let at = TOP - 10 * P + 5;
        assert_eq!(mm.check_access(at, Access::Write), Ok(()));
        assert_eq!(mm.vma_count(), 1, "check_access changes nothing");
        mm.touch(at, 1).unwrap();
        let v = mm.vma_at(at).unwrap();
        assert_eq!((v.start(), v.end()), (TOP - 10 * P, TOP));
        assert!(v.flags().contains(VmFlags::GROWSDOWN) && v.anon_vma().is_some());
        assert_eq!(mm.anon_pages().map(|r| (r.start, r.end)).collect::<Vec<_>>(), [(TOP - 10 * P, TOP - 9 * P)]);
        mm.validate().unwrap();
    }

    #[test]
    fn the_guard_gap_refuses_growth_next_to_an_accessible_mapping() {
        each_page!(the_guard_gap_refuses_growth_next_to_an_accessible_mapping_at);
    }

    fn the_guard_gap_refuses_growth_next_to_an_accessible_mapping_at<const P: u64>() {
        // 255 pages below the stack's new start: too close. 256: far enough.
        for (gap, prot, grows) in
            [(255, Prot::READ, false), (256, Prot::READ, true), (10, Prot::NONE, true), (0, Prot::NONE, true)]
        {
            let mut mm = space::<P>(Some((gap + 1, prot)));
            let at = TOP - 5 * P;
            let want = if grows { Ok(()) } else { Err(Fault::Unmapped) };
            assert_eq!(mm.check_access(at, Access::Read), want, "gap {gap}, {prot:?}");
            assert_eq!(mm.fault(at, Access::Read), want, "gap {gap}, {prot:?}");
            assert_eq!(mm.vma_count(), 2);
            assert_eq!(mm.vma_at(at).is_some(), grows);
            mm.validate().unwrap();
        }
    }

    #[test]
    fn growth_stops_at_the_stack_limit_and_below_mmap_min_addr() {
        each_page!(growth_stops_at_the_stack_limit_and_below_mmap_min_addr_at);
    }

    fn growth_stops_at_the_stack_limit_and_below_mmap_min_addr_at<const P: u64>() {
        let layout = Layout { stack_limit: 8 * P, ..test_layout::<P>() };
        let mut mm = AddressSpace::with_layout(layout);
        mm.mmap(TOP - 4 * P, 4 * P, Prot::RW, STACK, None, 0).unwrap();
        assert_eq!(mm.fault(TOP - 9 * P, Access::Write), Err(Fault::Unmapped));
        assert_eq!(mm.fault(TOP - 8 * P, Access::Write), Ok(()));
        assert_eq!(mm.vma_at(TOP - 8 * P).map(|v| v.len()), Some(8 * P));

        let mut mm = AddressSpace::with_layout(test_layout::<P>());
        // The lowest page a mapping may use, and a stack a page above it.
        let min = mm.layout().mmap_min_addr.next_multiple_of(P);
        mm.mmap(min + P, P, Prot::RW, STACK, None, 0).unwrap();
        assert_eq!(mm.fault(min - 1, Access::Read), Err(Fault::Unmapped));
        assert_eq!(mm.fault(min, Access::Read), Ok(()));
        assert_eq!(mm.vma_at(min).map(|v| v.start()), Some(min));
    }

    #[test]
    fn a_denied_access_keeps_the_growth_and_a_failed_touch_does_not() {
        each_page!(a_denied_access_keeps_the_growth_and_a_failed_touch_does_not_at);
    }

    fn a_denied_access_keeps_the_growth_and_a_failed_touch_does_not_at<const P: u64>() {
        let mut mm = AddressSpace::with_layout(test_layout::<P>());
        mm.mmap(TOP - 4 * P, 4 * P, Prot::READ, STACK, None, 0).unwrap();
        let before = mm.maps();
        assert!(mm.touch(TOP - 6 * P, P).is_err());
        assert_eq!(mm.maps(), before, "a failed touch changes nothing");
        assert_eq!(mm.fault(TOP - 6 * P, Access::Write), Err(Fault::Denied));
        assert_eq!(mm.vma_at(TOP - 6 * P).map(|v| v.start()), Some(TOP - 6 * P), "Linux keeps the growth");
        assert_eq!(mm.anon_page_count(0, u64::MAX), 0);
        mm.validate().unwrap();
    }

    #[test]
    fn a_touch_across_holes_grows_each_stack_below_them() {
        each_page!(a_touch_across_holes_grows_each_stack_below_them_at);
    }

    fn a_touch_across_holes_grows_each_stack_below_them_at<const P: u64>() {
        let mut mm = AddressSpace::with_layout(test_layout::<P>());
        // [hole][stack A][hole][stack B], stacks one page each.
        mm.mmap(TOP - 6 * P, P, Prot::RW, STACK, None, 0).unwrap();
        mm.mmap(TOP - 2 * P, P, Prot::RW, STACK, None, 0).unwrap();
        mm.touch(TOP - 8 * P, 7 * P).unwrap();
        let spans: Vec<_> = mm.iter().map(|v| (v.start(), v.end())).collect();
        assert_eq!(spans, [(TOP - 8 * P, TOP - 5 * P), (TOP - 5 * P, TOP - P)]);
        assert_eq!(mm.anon_page_count(0, u64::MAX), 7);
        mm.validate().unwrap();
    }
}
