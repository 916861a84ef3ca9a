//! Swap extents: which disk block holds each page of a swap area (Linux's
//! `swap_extent` list, kept since 2019 in an rbtree and here in a maple
//! tree).
//!
//! ```
//! use maple_mm::swap::SwapExtents;
//! let mut s = SwapExtents::new();
//! s.add_extent(0, 4, 1000).unwrap();
//! s.add_extent(4, 4, 1004).unwrap(); // continues on disk: merged
//! s.add_extent(8, 2, 500).unwrap();
//! assert_eq!(s.len(), 2);
//! assert_eq!(s.map(6), Ok(1006));
//! assert_eq!(s.map(9), Ok(501));
//! let mut pieces = Vec::new();
//! s.discard_cluster(6, 4, |block, n| pieces.push((block, n))).unwrap();
//! assert_eq!(pieces, [(1006, 2), (500, 2)]);
//! ```

use core::fmt;

use maple_tree::{MapleTree, U63};

#[cfg(target_os = "linux")]
mod fiemap;
#[cfg(target_os = "linux")]
pub use fiemap::{read_extents, swap_extents_from, swap_extents_of_file, FiemapError, FileExtent};

/// What is wrong with an extent or a lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SwapError {
    /// An extent starts before the end of the previous one.
    OutOfOrder {
        /// Its first page.
        start_page: u64,
        /// The first page still free.
        next_page: u64,
    },
    /// An empty extent, or one whose pages or blocks overflow.
    BadExtent,
    /// A page no extent covers.
    Unmapped(u64),
    /// A tree node could not be allocated (the map is unchanged).
    NoMemory,
}

impl fmt::Display for SwapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SwapError::OutOfOrder { start_page, next_page } => {
                write!(f, "extent at page {start_page} is out of order (the next free page is {next_page})")
            }
            SwapError::BadExtent => f.write_str("empty or overflowing extent"),
            SwapError::Unmapped(p) => write!(f, "page {p} is in no extent"),
            SwapError::NoMemory => f.write_str("out of memory"),
        }
    }
}

impl std::error::Error for SwapError {}

/// Page offset → disk block of a swap area, built once (in ascending page
/// order, as `swapon` does) and then looked up from any number of threads.
///
/// Each extent is one tree entry `[start_page, start_page + nr_pages - 1]`
/// whose value is the extent's first block, stored inline (`U63`): no
/// allocation per extent. The map is `Sync`: lookups take `&self` and no
/// lock, because a swap area's extents do not change while it is in use.
/// (A `ConcurrentMapleTree` would let them change under readers, at the
/// price of a pin per lookup; measured in `maple-report --only swap`.)
#[derive(Clone, Default)]
pub struct SwapExtents {
    tree: MapleTree<U63>,
    /// The last extent: (start page, pages, start block).
    last: Option<(u64, u64, u64)>,
    pages: u64,
}

impl fmt::Debug for SwapExtents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SwapExtents").field("extents", &self.len()).field("pages", &self.pages).finish()
    }
}

impl SwapExtents {
    /// An empty map.
    pub fn new() -> SwapExtents {
        SwapExtents::default()
    }

    /// Adds `nr_pages` pages from `start_page` on, stored from
    /// `start_block` on. Extents come in ascending page order; one that
    /// continues the previous extent both in pages and on disk is merged
    /// into it (Linux's `add_swap_extent`). Bad input is an error and
    /// changes nothing.
    pub fn add_extent(&mut self, start_page: u64, nr_pages: u64, start_block: u64) -> Result<(), SwapError> {
        let end = start_page.checked_add(nr_pages).filter(|_| nr_pages > 0).ok_or(SwapError::BadExtent)?;
        start_block.checked_add(nr_pages).filter(|&b| b <= (u64::MAX >> 1) + 1).ok_or(SwapError::BadExtent)?;
        if let Some((s, n, b)) = self.last {
            if start_page < s + n {
                return Err(SwapError::OutOfOrder { start_page, next_page: s + n });
            }
            if start_page == s + n && start_block == b + n {
                // Continues the last extent on disk: one entry, longer.
                self.tree
                    .store_range(s..end, U63::new(b).ok_or(SwapError::BadExtent)?)
                    .map_err(|_| SwapError::NoMemory)?;
                self.last = Some((s, n + nr_pages, b));
                self.pages += nr_pages;
                return Ok(());
            }
        }
        let v = U63::new(start_block).ok_or(SwapError::BadExtent)?;
        self.tree.insert_range(start_page..end, v).map_err(|_| SwapError::NoMemory)?;
        self.last = Some((start_page, nr_pages, start_block));
        self.pages += nr_pages;
        Ok(())
    }

    /// The disk block of `page`.
    #[inline]
    pub fn map(&self, page: u64) -> Result<u64, SwapError> {
        match self.tree.get_range(page) {
            Some((r, b)) => Ok(b.get() + (page - r.start())),
            None => Err(SwapError::Unmapped(page)),
        }
    }

    /// Calls `f(start_block, nr_blocks)` for each piece of the extents
    /// covering `nr_pages` pages from `start_page` (Linux's
    /// `discard_swap_cluster`). Fails, calling nothing, if a page is in no
    /// extent.
    pub fn discard_cluster(
        &self,
        start_page: u64,
        nr_pages: u64,
        mut f: impl FnMut(u64, u64),
    ) -> Result<(), SwapError> {
        let end = start_page.checked_add(nr_pages).ok_or(SwapError::BadExtent)?;
        if nr_pages == 0 {
            return Ok(());
        }
        let pieces: Vec<(u64, u64, u64)> =
            self.tree.range(start_page..end).map(|(r, b)| (*r.start(), *r.end(), b.get())).collect();
        let mut next = start_page;
        for &(s, _, _) in &pieces {
            if s > next {
                return Err(SwapError::Unmapped(next));
            }
            next = pieces.iter().find(|p| p.0 == s).map_or(next, |p| p.1 + 1);
        }
        if next < end {
            return Err(SwapError::Unmapped(next));
        }
        for (s, e, b) in pieces {
            let (from, to) = (s.max(start_page), e.min(end - 1));
            f(b + (from - s), to - from + 1);
        }
        Ok(())
    }

    /// Extents (after merging).
    pub fn len(&self) -> usize {
        self.tree.len()
    }

    /// True if there is no extent.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    /// Pages covered.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    /// Bytes of tree nodes (the extents themselves take no other memory).
    pub fn bytes(&self) -> usize {
        self.tree.stats().bytes
    }

    /// Every extent: (start page, pages, start block), ascending.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.tree.iter().map(|(r, b)| (*r.start(), r.end() - r.start() + 1, b.get()))
    }
}
