//! `/proc/PID/maps`: an address space in Linux's exact format, and one
//! built from a maps file (a live process's is read in `proc.rs`).

use core::fmt;
use std::{path::Path, sync::Arc};

use crate::{
    flags::VmFlags,
    layout::Layout,
    name::AnonName,
    page::PageSize,
    space::{AddressSpace, Brk},
    store::VmaStore,
    vma::{AnonVma, Backing, Extra, MappedFile, Vma, VmaData},
    vma_slab::VmaRef,
};

/// Column where the path starts (Linux pads the fields before it to 73).
const NAME_COLUMN: usize = 73;

/// Writes one maps line (no newline). `label` is `[heap]`/`[stack]` when
/// the address space says so.
pub(crate) fn write_line(f: &mut impl fmt::Write, v: &Vma<'_>, label: Option<&str>) -> fmt::Result {
    let p = v.perms();
    let (maj, min, inode) = v.file().map_or((0, 0, 0), |m| (m.dev_major, m.dev_minor, m.inode));
    let head = format!(
        "{:08x}-{:08x} {}{}{}{} {:08x} {:02x}:{:02x} {} ",
        v.start(),
        v.end(),
        p[0] as char,
        p[1] as char,
        p[2] as char,
        p[3] as char,
        v.file_offset(),
        maj,
        min,
        inode
    );
    let name: Option<String> = match (v.file(), v.label(), label, v.name()) {
        (Some(m), _, _, Some(n)) if m.anon_shmem => Some(format!("[anon_shmem:{n}]")),
        (Some(m), _, _, _) => Some(m.path.clone()),
        (None, Some(l), _, _) => Some(l.to_string()),
        (None, None, Some(l), _) => Some(l.to_string()),
        (None, None, None, Some(n)) => Some(format!("[anon:{n}]")),
        _ => None,
    };
    match name {
        None => f.write_str(&head),
        Some(name) => write!(f, "{head:<width$}{name}", width = NAME_COLUMN),
    }
}

/// A maps file that could not be read: names the file and the 1-based line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsError {
    /// The file, as given.
    pub file: String,
    /// 1-based line number (0: the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub msg: String,
}

impl fmt::Display for MapsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.msg)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.msg)
        }
    }
}

impl std::error::Error for MapsError {}

/// One parsed line of a maps file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsLine {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// `rwxp`-style permissions.
    pub perms: [u8; 4],
    /// File offset.
    pub offset: u64,
    /// Device major number.
    pub dev_major: u32,
    /// Device minor number.
    pub dev_minor: u32,
    /// Inode.
    pub inode: u64,
    /// Path or label (`[heap]`, `[anon:NAME]`, …); empty if none.
    pub path: String,
}

fn hex(s: &str, what: &str) -> Result<u64, String> {
    if s.is_empty() || s.len() > 16 {
        return Err(format!("bad {what} {s:?}"));
    }
    u64::from_str_radix(s, 16).map_err(|_| format!("bad {what} {s:?}"))
}

impl MapsLine {
    /// Parses `start-end perms offset major:minor inode [path]`.
    pub fn parse(line: &str) -> Result<MapsLine, String> {
        let mut rest = line;
        let mut field = |what: &str| -> Result<&str, String> {
            let t = rest.trim_start_matches(' ');
            let end = t.find(' ').unwrap_or(t.len());
            if end == 0 {
                return Err(format!("missing {what}"));
            }
            rest = &t[end..];
            Ok(&t[..end])
        };
        let range = field("address range")?;
        let perms = field("permissions")?;
        let offset = field("offset")?;
        let dev = field("device")?;
        let inode = field("inode")?;
        let path = rest.trim_start_matches(' ').to_string();
        let (s, e) = range.split_once('-').ok_or_else(|| format!("bad address range {range:?}"))?;
        let (start, end) = (hex(s, "start address")?, hex(e, "end address")?);
        if start >= end || start % PageSize::K4.bytes() != 0 || end % PageSize::K4.bytes() != 0 {
            return Err(format!("bad address range {range:?}"));
        }
        let pb = perms.as_bytes();
        let ok = pb.len() == 4
            && matches!(pb[0], b'r' | b'-')
            && matches!(pb[1], b'w' | b'-')
            && matches!(pb[2], b'x' | b'-')
            && matches!(pb[3], b'p' | b's');
        if !ok {
            return Err(format!("bad permissions {perms:?}"));
        }
        let (ma, mi) = dev.split_once(':').ok_or_else(|| format!("bad device {dev:?}"))?;
        let dev_major = u32::try_from(hex(ma, "device")?).map_err(|_| format!("bad device {dev:?}"))?;
        let dev_minor = u32::try_from(hex(mi, "device")?).map_err(|_| format!("bad device {dev:?}"))?;
        let inode: u64 = inode.parse().map_err(|_| format!("bad inode {inode:?}"))?;
        Ok(MapsLine {
            start,
            end,
            perms: [pb[0], pb[1], pb[2], pb[3]],
            offset: hex(offset, "offset")?,
            dev_major,
            dev_minor,
            inode,
            path,
        })
    }
}

impl<T: VmaStore> AddressSpace<T> {
    /// The whole address space in `/proc/PID/maps` format (same as
    /// `to_string()`).
    pub fn maps(&self) -> String {
        self.to_string()
    }

    /// The maps line of one VMA, with the `[heap]`/`[stack]` labels this
    /// address space gives it.
    pub fn maps_line(&self, vma: &Vma<'_>) -> String {
        let mut s = String::new();
        let _ = write_line(&mut s, vma, self.label(vma));
        s
    }
}

impl crate::space::Shown {
    /// `vma`'s line of the maps file.
    pub(crate) fn line(&self, vma: &Vma<'_>) -> String {
        let mut s = String::new();
        let _ = write_line(&mut s, vma, self.label(vma));
        s
    }
}

impl AddressSpace {
    /// Builds an address space from a maps file's text (`file` names it in
    /// errors). Every line becomes a VMA with what the file shows; flags it
    /// does not show take Linux's defaults (private writable memory is
    /// charged and has been written). `[heap]` sets the program break,
    /// `[stack]` the stack, `[vdso]`-style labels make special mappings,
    /// `[anon:NAME]` names. Neighbours that look mergeable stay apart, as
    /// the file shows them (something the file does not show kept them
    /// apart in Linux). A line that is not a maps line, overlaps the one
    /// before, or ends above the layout's top of user space without being
    /// a special mapping (`[vsyscall]`) is an error naming the line.
    ///
    /// `/proc/PID/smaps` is read too: its `VmFlags:` lines give each VMA
    /// the flags a maps file does not show (locked, sealed, don't-fork,
    /// wipe-on-fork, charged, no-reserve, madvise hints, KSM, guard
    /// markers), so neighbours that differ only there stay apart for the
    /// reason Linux keeps them apart, and later calls see them (a sealed
    /// VMA refuses to be unmapped, a locked one to be discarded). Its
    /// other `Key: value` lines are skipped.
    ///
    /// ```
    /// use maple_mm::{AddressSpace, VmFlags};
    /// let smaps = "\
    /// 7f0000000000-7f0000002000 rw-p 00000000 00:00 0
    /// Size:                  8 kB
    /// VmFlags: rd wr mr mw me lo ac sl
    /// ";
    /// let mm = AddressSpace::from_maps(smaps, "smaps").unwrap();
    /// let flags = mm.vma_at(0x7f00_0000_0000).unwrap().flags();
    /// assert!(flags.contains(VmFlags::LOCKED | VmFlags::SEALED | VmFlags::ACCOUNT));
    /// ```
    pub fn from_maps(text: &str, file: &str) -> Result<AddressSpace, MapsError> {
        Self::from_maps_with(text, file, Layout::default())
    }

    /// [`from_maps`](Self::from_maps) with a layout.
    pub fn from_maps_with(text: &str, file: &str, layout: Layout) -> Result<AddressSpace, MapsError> {
        Self::parse_maps(text, file, layout, None)
    }

    /// [`from_maps_with`](Self::from_maps_with), noting in `written` the
    /// private VMAs an smaps file says hold anonymous pages (in memory or
    /// in swap).
    pub(crate) fn parse_maps(
        text: &str,
        file: &str,
        layout: Layout,
        mut written: Option<&mut Vec<(u64, u64)>>,
    ) -> Result<AddressSpace, MapsError> {
        let err = |line: usize, msg: String| MapsError { file: file.to_string(), line, msg };
        let mut mm = AddressSpace::with_layout(layout);
        let mut prev_end = 0;
        let mut prev: Option<(u64, u64, VmaData)> = None;
        let mut files: Vec<Arc<MappedFile>> = Vec::new();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let n = i + 1;
            if line.trim().is_empty() || smaps_field(line).is_some() {
                continue;
            }
            let l = MapsLine::parse(line).map_err(|m| err(n, m))?;
            if !mm.page_size().is_aligned(l.start) || !mm.page_size().is_aligned(l.end) {
                let msg = format!("{:x}-{:x} is not on {} pages (the layout's)", l.start, l.end, mm.page_size());
                return Err(err(n, msg));
            }
            // An smaps file's fields follow their mapping's line.
            let fields = || lines[i + 1..].iter().map_while(|f| smaps_field(f));
            let vm_flags = fields().find_map(|(key, value)| (key == "VmFlags").then_some(value));
            if let Some(w) = written.as_deref_mut() {
                let kb = |v: &str| v.trim_end_matches("kB").trim().parse::<u64>().unwrap_or(0);
                let anon =
                    fields().filter(|(k, _)| matches!(*k, "Anonymous" | "Swap")).map(|(_, v)| kb(v)).sum::<u64>();
                if anon > 0 && l.perms[3] == b'p' {
                    w.push((l.start, l.end));
                }
            }
            if l.start < prev_end {
                return Err(err(n, format!("{:x}-{:x} overlaps or precedes the line before", l.start, l.end)));
            }
            prev_end = l.end;
            let mut data = data_of(&l, &mut files).map_err(|m| err(n, m))?;
            if let Some(shown) = vm_flags {
                data.flags =
                    (data.flags & (VmFlags::ACCESS | VmFlags::SHARED | VmFlags::SPECIAL)) | hidden_flags(shown);
                if data.flags.contains(VmFlags::SEALED) {
                    mm.sealed = true;
                }
            }
            if mm.above_top(l.end, data.flags) {
                let top = mm.layout.task_size;
                let msg = format!(
                    "{:x}-{:x} ends above the top of user space ({top:#x}): only special mappings such as [vsyscall] lie there",
                    l.start, l.end
                );
                return Err(err(n, msg));
            }
            match l.path.as_str() {
                "[heap]" => mm.brk = Some(Brk { start: mm.brk.map_or(l.start, |b| b.start), current: l.end }),
                "[stack]" => mm.start_stack = Some(l.end - 8),
                _ => {}
            }
            // Keep apart what the file shows apart.
            if let Some((_, pe, pd)) = &prev {
                if *pe == l.start && pd.merges_with(&data) {
                    data.anon = Some(AnonVma::new());
                    if pd.merges_with(&data) {
                        data.flags |= VmFlags::SPECIAL;
                    }
                }
            }
            mm.tree
                .insert_range(l.start..l.end, VmaRef::new(data.clone()))
                .map_err(|e| err(n, format!("cannot add the mapping: {}", e.cause)))?;
            prev = Some((l.start, l.end, data));
        }
        Ok(mm)
    }

    /// Reads a maps file from disk; see [`from_maps`](Self::from_maps).
    pub fn from_maps_file(path: impl AsRef<Path>) -> Result<AddressSpace, MapsError> {
        Self::from_maps_file_with(path, Layout::default())
    }

    /// [`from_maps_file`](Self::from_maps_file) with a layout (a maps
    /// file saved on another machine).
    pub fn from_maps_file_with(path: impl AsRef<Path>, layout: Layout) -> Result<AddressSpace, MapsError> {
        let (text, name) = read_text(path.as_ref())?;
        Self::from_maps_with(&text, &name, layout)
    }

    /// Gives each VMA of this space (read from a maps file) the flags that
    /// maps lines do not show from `shadow`, the same process's space as
    /// replayed from a log up to the same moment, where one VMA of the
    /// shadow covers it whole with the same protection, sharing and
    /// backing: don't-fork, wipe-on-fork, don't-dump, hugepage advice,
    /// mergeable, locks, access-pattern advice, possible guard pages,
    /// no-reserve and, with it, the accounting.
    ///
    /// A maps file cannot say why two touching VMAs that look alike are
    /// apart, and reading one gives every private writable VMA an
    /// anon_vma of its own (written apart). Where the flags learned here
    /// tell two such neighbours apart instead, they are taken as the
    /// pieces of one VMA that advice split, and share its anon_vma, so
    /// that undoing the advice merges them again, as in Linux.
    pub(crate) fn adopt_hidden_flags(&mut self, shadow: &AddressSpace) {
        const HIDDEN: VmFlags = VmFlags::NORESERVE
            .union(VmFlags::DONTCOPY)
            .union(VmFlags::WIPEONFORK)
            .union(VmFlags::DONTDUMP)
            .union(VmFlags::HUGEPAGE)
            .union(VmFlags::NOHUGEPAGE)
            .union(VmFlags::MERGEABLE)
            .union(VmFlags::LOCKED_MASK)
            .union(VmFlags::SEQ_READ)
            .union(VmFlags::RAND_READ)
            .union(VmFlags::MAYBE_GUARD);
        const SHOWN: VmFlags = VmFlags::ACCESS.union(VmFlags::SHARED);
        // Every VMA as it will be, and whether it changes.
        let mut out: Vec<(u64, u64, VmaData, bool)> = Vec::new();
        for v in self.iter() {
            let mut data = v.data.clone();
            let covering = shadow.vma_at(v.start).filter(|s| s.end >= v.end).filter(|s| {
                let same_backing = match (v.file(), s.file()) {
                    (None, None) => true,
                    (Some(a), Some(b)) => a.inode == b.inode || a.path == b.path,
                    _ => false,
                };
                same_backing && (v.flags() & SHOWN) == (s.flags() & SHOWN)
            });
            if let Some(s) = covering {
                data.flags |= s.flags() & HIDDEN;
                if s.flags().contains(VmFlags::NORESERVE) {
                    data.flags = (data.flags - VmFlags::ACCOUNT) | (s.flags() & VmFlags::ACCOUNT);
                }
            }
            if let Some((_, pend, prev, _)) = out.last() {
                let split_by_flags = *pend == v.start
                    && data.flags != prev.flags
                    && VmaData { flags: prev.flags, anon: data.anon, ..data.clone() }.same_kind(prev);
                if split_by_flags && prev.anon.is_some() && data.anon.is_some() {
                    data.anon = prev.anon;
                }
            }
            let changed = data.flags != v.data.flags || data.anon != v.data.anon;
            out.push((v.start, v.end, data, changed));
        }
        for (start, end, data, _) in out.into_iter().filter(|o| o.3) {
            // (A failed allocation leaves that VMA as the maps file said.)
            let _ = self.put(start, end, data);
        }
    }
}

/// The error of a page set or a record that could not be made while
/// `file` was read.
pub(crate) fn out_of_memory(file: &str) -> MapsError {
    MapsError { file: file.to_string(), line: 0, msg: "out of memory".into() }
}

/// A text file's contents and its name, or an error naming it (and the
/// line where it stops being UTF-8).
pub(crate) fn read_text(path: &Path) -> Result<(String, String), MapsError> {
    let name = path.display().to_string();
    let bytes =
        std::fs::read(path).map_err(|e| MapsError { file: name.clone(), line: 0, msg: crate::io_reason(&e) })?;
    match String::from_utf8(bytes) {
        Ok(t) => Ok((t, name)),
        Err(e) => {
            let line = e.as_bytes()[..e.utf8_error().valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
            Err(MapsError { file: name, line, msg: "not valid UTF-8".into() })
        }
    }
}

/// An smaps field line (`Key:   value`): its key and value.
fn smaps_field(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.split_once(':')?;
    let name = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    name.then(|| (key, value.trim()))
}

/// The flags of an smaps `VmFlags:` line that a maps line does not show,
/// by the two-letter names Linux prints (`fs/proc/task_mmu.c`); unknown
/// ones are skipped. Access and sharing come from the maps line.
fn hidden_flags(shown: &str) -> VmFlags {
    shown
        .split_whitespace()
        .map(|name| match name {
            "gd" => VmFlags::GROWSDOWN,
            "lo" => VmFlags::LOCKED,
            "lf" => VmFlags::LOCKONFAULT,
            "sr" => VmFlags::SEQ_READ,
            "rr" => VmFlags::RAND_READ,
            "dc" => VmFlags::DONTCOPY,
            "ac" => VmFlags::ACCOUNT,
            "nr" => VmFlags::NORESERVE,
            "wf" => VmFlags::WIPEONFORK,
            "dd" => VmFlags::DONTDUMP,
            "hg" => VmFlags::HUGEPAGE,
            "nh" => VmFlags::NOHUGEPAGE,
            "mg" => VmFlags::MERGEABLE,
            "sl" => VmFlags::SEALED,
            "gu" => VmFlags::MAYBE_GUARD,
            "dp" => VmFlags::DROPPABLE,
            "sf" => VmFlags::SYNC,
            "io" | "pf" => VmFlags::SPECIAL,
            _ => VmFlags::empty(),
        })
        .fold(VmFlags::empty(), |a, b| a | b)
}

/// The attributes of a parsed line.
fn data_of(l: &MapsLine, files: &mut Vec<Arc<MappedFile>>) -> Result<VmaData, String> {
    let mut flags = VmFlags::empty();
    flags.set(VmFlags::READ, l.perms[0] == b'r');
    flags.set(VmFlags::WRITE, l.perms[1] == b'w');
    flags.set(VmFlags::EXEC, l.perms[2] == b'x');
    let shared = l.perms[3] == b's';
    flags.set(VmFlags::SHARED, shared);
    let mut name = None;
    let mut label: Option<String> = None;
    let path = l.path.as_str();
    let backing = if let Some(n) = path.strip_prefix("[anon:").and_then(|p| p.strip_suffix(']')) {
        name = Some(AnonName::new(n).map_err(|_| format!("bad anonymous name {n:?}"))?);
        Backing::Anon
    } else if let Some(n) = path.strip_prefix("[anon_shmem:").and_then(|p| p.strip_suffix(']')) {
        name = Some(AnonName::new(n).map_err(|_| format!("bad anonymous name {n:?}"))?);
        Backing::File(shmem(l, files))
    } else if path == "[heap]" || (path.is_empty() && l.inode == 0 && !shared) {
        Backing::Anon
    } else if path == "[stack]" {
        flags |= VmFlags::GROWSDOWN;
        Backing::Anon
    } else if path.starts_with('[') && path.ends_with(']') {
        flags |= VmFlags::SPECIAL;
        label = Some(path.to_string());
        Backing::Anon
    } else if path == "/dev/zero (deleted)" || (path.is_empty() && shared) {
        Backing::File(shmem(l, files))
    } else if shared && path.starts_with("/SYSV") && path.ends_with(" (deleted)") {
        // A System V segment (one file per segment: which attach a piece
        // belongs to is not in the file).
        Backing::File(opened(
            MappedFile { sysv_shm: true, ..MappedFile::new(l.dev_major, l.dev_minor, l.inode, path) },
            files,
        ))
    } else {
        Backing::File(opened(MappedFile::new(l.dev_major, l.dev_minor, l.inode, path), files))
    };
    let anonymous = matches!(backing, Backing::Anon);
    let offset = if anonymous { l.start } else { l.offset };
    let writable_private = flags.contains(VmFlags::WRITE) && !shared;
    if writable_private {
        flags |= VmFlags::ACCOUNT;
    }
    Ok(VmaData {
        flags,
        off_base: VmaData::base_for(l.start, offset),
        backing,
        name,
        anon: (writable_private && !flags.contains(VmFlags::SPECIAL)).then(AnonVma::new),
        extra: Extra::make(label, None),
        policy: None,
    })
}

/// One `MappedFile` per (device, inode) and kind, shared by its VMAs.
fn opened(want: MappedFile, files: &mut Vec<Arc<MappedFile>>) -> Arc<MappedFile> {
    if let Some(f) = files.iter().find(|f| f.same_file(&want) && f.sysv_shm == want.sysv_shm) {
        return Arc::clone(f);
    }
    let f = Arc::new(want);
    files.push(Arc::clone(&f));
    f
}

fn shmem(l: &MapsLine, files: &mut Vec<Arc<MappedFile>>) -> Arc<MappedFile> {
    let want = MappedFile {
        anon_shmem: true,
        path: "/dev/zero (deleted)".into(),
        ..MappedFile::new(l.dev_major, l.dev_minor, l.inode, "")
    };
    opened(want, files)
}

/// The maps-file line of this VMA without the `[heap]`/`[stack]` labels,
/// which depend on the address space (see
/// [`AddressSpace::maps`](crate::AddressSpace::maps)).
impl fmt::Display for Vma<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_line(f, self, None)
    }
}

/// The whole address space in `/proc/PID/maps` format.
impl<T: VmaStore> fmt::Display for AddressSpace<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for vma in self.iter() {
            write_line(f, &vma, self.label(&vma))?;
            f.write_str("\n")?;
        }
        Ok(())
    }
}
