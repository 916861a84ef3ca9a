//! A file's physical extents through the `FS_IOC_FIEMAP` ioctl, and the
//! swap extents `swapon` would make of them.
//!
//! A small wrapper of our own over `libc` (one ioctl and two `repr(C)`
//! structs): the crates that wrap FIEMAP are either unmaintained or pull in
//! far more than this needs.

#![allow(unsafe_code)]

use core::fmt;
use std::{fs::File, os::fd::AsRawFd, path::Path};

use super::SwapExtents;
use crate::page::PageSize;

const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
const FIEMAP_FLAG_SYNC: u32 = 0x1;
const FIEMAP_EXTENT_LAST: u32 = 0x1;
const FIEMAP_EXTENT_UNKNOWN: u32 = 0x2;
const FIEMAP_EXTENT_DELALLOC: u32 = 0x4;
const FIEMAP_EXTENT_ENCODED: u32 = 0x8;
const FIEMAP_EXTENT_DATA_INLINE: u32 = 0x200;
const FIEMAP_EXTENT_DATA_TAIL: u32 = 0x400;
const FIEMAP_EXTENT_SHARED: u32 = 0x2000;
/// Extents asked for per ioctl.
const BATCH: usize = 256;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawExtent {
    logical: u64,
    physical: u64,
    length: u64,
    reserved64: [u64; 2],
    flags: u32,
    reserved: [u32; 3],
}

#[repr(C)]
struct Request {
    start: u64,
    length: u64,
    flags: u32,
    mapped_extents: u32,
    extent_count: u32,
    reserved: u32,
    extents: [RawExtent; BATCH],
}

const _: () = assert!(core::mem::size_of::<RawExtent>() == 56);
const _: () = assert!(core::mem::offset_of!(Request, extents) == 32);

/// One extent as FIEMAP reports it (bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileExtent {
    /// Offset in the file.
    pub logical: u64,
    /// Offset on the device.
    pub physical: u64,
    /// Length.
    pub length: u64,
    /// `FIEMAP_EXTENT_*` flags.
    pub flags: u32,
}

/// Why a file's extents could not be read or used for swap.
#[derive(Debug)]
pub enum FiemapError {
    /// Opening or reading the file failed.
    Io(std::io::Error),
    /// The file system does not report extents (tmpfs, overlay over tmpfs).
    Unsupported,
    /// `swapon` would refuse the file, and why.
    Rejected(String),
    /// The extents did not make a valid map.
    Map(super::SwapError),
}

impl fmt::Display for FiemapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FiemapError::Io(e) => f.write_str(&crate::io_reason(e)),
            FiemapError::Unsupported => {
                f.write_str("the file system does not report file extents (FIEMAP is not supported here, e.g. tmpfs)")
            }
            FiemapError::Rejected(why) => write!(f, "not usable as swap: {why}"),
            FiemapError::Map(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for FiemapError {}

/// Every extent of the file at `path`, in file order, with data flushed
/// first (`FIEMAP_FLAG_SYNC`) so that freshly written data has a place.
pub fn read_extents(path: impl AsRef<Path>) -> Result<Vec<FileExtent>, FiemapError> {
    let file = File::open(path).map_err(FiemapError::Io)?;
    let len = file.metadata().map_err(FiemapError::Io)?.len();
    let mut out = Vec::new();
    let mut start = 0u64;
    // A zeroed request on the heap (14 KiB).
    let mut req = Box::new(Request {
        start: 0,
        length: 0,
        flags: 0,
        mapped_extents: 0,
        extent_count: 0,
        reserved: 0,
        extents: [RawExtent::default(); BATCH],
    });
    while start < len {
        req.start = start;
        req.length = u64::MAX - start;
        req.flags = FIEMAP_FLAG_SYNC;
        req.mapped_extents = 0;
        req.extent_count = BATCH as u32;
        // SAFETY: `req` is a valid, writable `struct fiemap` followed by
        // room for `extent_count` extents, laid out as the kernel's
        // (repr(C), sizes asserted above); the ioctl writes only inside it,
        // and the fd is open for the whole call.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP as _, &mut *req as *mut Request) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) | Some(libc::ENOTTY) => FiemapError::Unsupported,
                _ => FiemapError::Io(e),
            });
        }
        let n = (req.mapped_extents as usize).min(BATCH);
        if n == 0 {
            break;
        }
        let mut last = false;
        for e in &req.extents[..n] {
            out.push(FileExtent { logical: e.logical, physical: e.physical, length: e.length, flags: e.flags });
            last |= e.flags & FIEMAP_EXTENT_LAST != 0;
        }
        if last {
            break;
        }
        let e = req.extents[n - 1];
        start = e.logical + e.length;
    }
    Ok(out)
}

/// The swap extents `swapon` would make of a file: FIEMAP's extents below
/// the file's last whole page (blocks allocated past its size do not
/// count), each trimmed to whole pages on disk, numbered from page 0 (the
/// swap header) in file order. Holes, inline or tail-packed data, data
/// not yet placed, and shared (reflinked) or encoded extents are refused,
/// as `swapon` refuses them.
pub fn swap_extents_of_file(path: impl AsRef<Path>) -> Result<(SwapExtents, usize), FiemapError> {
    let size = std::fs::metadata(path.as_ref()).map_err(FiemapError::Io)?.len();
    let extents = read_extents(path)?;
    Ok((swap_extents_from(&extents, Some(size))?, extents.len()))
}

/// [`swap_extents_of_file`] for extents already read (or recorded), of a
/// file of `size` bytes (`None`: every extent counts).
pub fn swap_extents_from(extents: &[FileExtent], size: Option<u64>) -> Result<SwapExtents, FiemapError> {
    let mut map = SwapExtents::new();
    // The kernel's pages: swap slots are pages of the running kernel.
    let page_size = PageSize::host_bytes();
    // Linux walks the file up to its size rounded down to pages.
    let end = size.map_or(u64::MAX, |s| s / page_size * page_size);
    let mut page = 0u64;
    let mut expect = 0u64;
    for e in extents.iter().filter(|e| e.logical < end) {
        let e = FileExtent { length: e.length.min(end - e.logical), ..*e };
        if e.logical != expect {
            return Err(FiemapError::Rejected(format!("the file has a hole at byte {expect}")));
        }
        expect = e.logical.saturating_add(e.length);
        let bad = [
            (FIEMAP_EXTENT_DATA_INLINE | FIEMAP_EXTENT_DATA_TAIL, "inline data"),
            (FIEMAP_EXTENT_DELALLOC | FIEMAP_EXTENT_UNKNOWN, "data without a place on disk"),
            (FIEMAP_EXTENT_SHARED, "shared (reflinked) extents"),
            (FIEMAP_EXTENT_ENCODED, "encoded (compressed or encrypted) extents"),
        ];
        if let Some((_, why)) = bad.iter().find(|(f, _)| e.flags & f != 0) {
            return Err(FiemapError::Rejected(format!("{why} at byte {}", e.logical)));
        }
        // Whole pages on disk only (Linux's iomap_swapfile_add_extent).
        let first = e.physical.div_ceil(page_size);
        let next = e.physical.saturating_add(e.length) / page_size;
        if first >= next {
            continue;
        }
        map.add_extent(page, next - first, first).map_err(FiemapError::Map)?;
        page += next - first;
    }
    if map.is_empty() {
        return Err(FiemapError::Rejected("the file has no whole page on disk".into()));
    }
    Ok(map)
}
