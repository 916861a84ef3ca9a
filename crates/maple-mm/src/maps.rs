//! `/proc/PID/maps`: render an address space in Linux's exact format, and
//! build one from a maps file or a live process.

use core::fmt;
use std::{path::Path, sync::Arc};

use crate::{
    flags::VmFlags,
    name::AnonName,
    page::PageSize,
    policy::MemPolicy,
    space::{AddressSpace, Brk, Layout},
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
    fn parse_maps(
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

    /// The address space of a live process, from `/proc/PID/smaps` (with
    /// the flags a maps file does not show), or `/proc/PID/maps` where
    /// smaps cannot be read; and its guard pages
    /// ([`guard_pages`](Self::guard_pages)), from `/proc/PID/pagemap`
    /// (bit 58, Linux 6.15+) for the VMAs smaps marks as possibly holding
    /// some (`gu`), where pagemap can be read (else none are known); and
    /// its anonymous pages ([`anon_pages`](Self::anon_pages)), from
    /// pagemap for the private VMAs smaps counts some in, where pagemap
    /// shows page frames (to `CAP_SYS_ADMIN`: they tell the shared zero
    /// page, which a read maps, from a written page; else none are known);
    /// the memory policies of its private anonymous VMAs, from
    /// `/proc/PID/numa_maps`; its program break's start and the size of
    /// its initialised data (`/proc/PID/stat`); and its layout's resource
    /// limits (`/proc/PID/limits`: `RLIMIT_STACK`, `RLIMIT_AS`,
    /// `RLIMIT_DATA`, and `RLIMIT_MEMLOCK` unless `/proc/PID/status` shows
    /// `CAP_IPC_LOCK`) and `mmap_min_addr`.
    pub fn from_pid(pid: u32) -> Result<AddressSpace, MapsError> {
        Self::from_proc(&format!("/proc/{pid}"))
    }

    /// This process's address space; see [`from_pid`](Self::from_pid).
    pub fn from_self() -> Result<AddressSpace, MapsError> {
        Self::from_proc("/proc/self")
    }

    /// [`from_pid`](Self::from_pid) from a process's `/proc` directory.
    fn from_proc(dir: &str) -> Result<AddressSpace, MapsError> {
        // smaps is read in pieces, each from the VMAs as they are then: a
        // thread of the process changing its mappings meanwhile can leave
        // two pieces that do not fit (a VMA listed twice, cut differently).
        // Such a read is tried again before settling for maps, which has
        // no hidden flags (and so no guard pages either).
        let smaps = format!("{dir}/smaps");
        let mut written = Vec::new();
        let parsed = (0..4).find_map(|_| {
            written.clear();
            let (text, name) = read_text(Path::new(&smaps)).ok()?;
            Self::parse_maps(&text, &name, Layout::default(), Some(&mut written)).ok()
        });
        let mut mm = parsed.map_or_else(|| Self::from_maps_file(format!("{dir}/maps")), Ok)?;
        let status = std::fs::read_to_string(format!("{dir}/status")).unwrap_or_default();
        mm.layout = live_layout(dir, &status);
        #[cfg(unix)]
        mm.read_guard_pages(&format!("{dir}/pagemap"))?;
        #[cfg(target_os = "linux")]
        mm.read_anon_pages(&format!("{dir}/pagemap"), &written)?;
        mm.read_policies(&format!("{dir}/numa_maps"))?;
        // The heap's start as the kernel keeps it: a process whose heap is
        // empty (or was never used, as a Go program's) shows no `[heap]`
        // line but still has a break, and a heap merged with the
        // mapping below it (no address randomization) starts below it.
        let stat = std::fs::read_to_string(format!("{dir}/stat")).ok();
        if let Some(start) = stat.as_deref().and_then(|s| stat_field(s, 47)) {
            let current = mm.brk.map_or(start, |b| b.current.max(start));
            let _ = mm.set_brk(Brk { start, current });
        }
        // The initialised data, which brk counts against RLIMIT_DATA.
        if let Some((start, end)) = stat.as_deref().and_then(|s| Some((stat_field(s, 45)?, stat_field(s, 46)?))) {
            mm.layout.data_segment = end.saturating_sub(start);
        }
        // Locked memory Linux counts beyond the locked VMAs (what
        // MREMAP_DONTUNMAP unlocked: see `locked_vm`), from `VmLck`.
        let vm_lck = status.lines().find_map(|l| l.strip_prefix("VmLck:"));
        if let Some(kb) = vm_lck.and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()) {
            mm.lock_leak = (kb * 1024).saturating_sub(mm.locked_vm());
        }
        Ok(mm)
    }

    /// Gives the private anonymous VMAs the memory policies `numa_maps`
    /// (a `/proc/PID/numa_maps`) shows them with (see
    /// [`MemPolicy::from_numa_maps`]); shared memory and files show their
    /// object's policy there, not necessarily the VMA's, and keep none. An
    /// unreadable file (a kernel without NUMA) gives none.
    fn read_policies(&mut self, numa_maps: &str) -> Result<(), MapsError> {
        let Ok((text, _)) = read_text(Path::new(numa_maps)) else { return Ok(()) };
        let mut set = Vec::new();
        for l in text.lines() {
            let Some((addr, rest)) = l.split_once(' ') else { continue };
            let Ok(addr) = u64::from_str_radix(addr, 16) else { continue };
            let Some(Some(policy)) = MemPolicy::from_numa_maps(rest) else { continue };
            if let Some(v) = self.vma_at(addr).filter(|v| v.start == addr && v.is_anonymous()) {
                set.push((v.start, v.end, VmaData { policy: Some(Arc::new(policy)), ..v.data.clone() }));
            }
        }
        for (s, e, d) in set {
            self.put(s, e, d).map_err(|_| out_of_memory(numa_maps))?;
        }
        Ok(())
    }

    /// Adds the guard pages `pagemap` (a `/proc/PID/pagemap`) shows in
    /// the VMAs that may hold some. An unreadable pagemap adds none.
    #[cfg(unix)]
    fn read_guard_pages(&mut self, pagemap: &str) -> Result<(), MapsError> {
        /// Pagemap's guard-region bit.
        const PM_GUARD_REGION: u64 = 1 << 58;
        let maybe: Vec<(u64, u64)> =
            self.iter().filter(|v| v.flags().contains(VmFlags::MAYBE_GUARD)).map(|v| (v.start, v.end)).collect();
        let guards = &mut self.guards;
        let Ok(f) = std::fs::File::open(pagemap) else { return Ok(()) };
        pagemap_runs(&f, pagemap, &maybe, |w| w & PM_GUARD_REGION != 0, |s, e| guards.install(s, e))
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

    /// Gives the VMAs touching `[start, end)` that live process `pid` has
    /// written and the model has not the anon_vma a write gives them: what
    /// a tracer cannot see (page faults are not calls) but Linux's merges
    /// depend on. For each private writable VMA overlapping the range with
    /// no anon_vma in the model, reads `/proc/PID/pagemap` over the VMA
    /// and [`touch`]es its first anonymous page (present and neither a
    /// file's nor the zero page, or in swap), as its first fault did.
    /// Returns the bytes so written.
    ///
    /// Needs page frame numbers from pagemap (`CAP_SYS_ADMIN`) to tell the
    /// zero page apart; without them, or without pagemap, nothing is
    /// written. A tracer doing this at every call keeps the file open and
    /// calls [`sync_written_from`](Self::sync_written_from).
    ///
    /// [`touch`]: Self::touch
    #[cfg(target_os = "linux")]
    pub fn sync_written(&mut self, pid: u32, start: u64, end: u64) -> Result<u64, MapsError> {
        let path = format!("/proc/{pid}/pagemap");
        match std::fs::File::open(&path) {
            Ok(f) => self.sync_written_from(&f, &path, start, end),
            Err(_) => Ok(0),
        }
    }

    /// [`sync_written`](Self::sync_written) from `pagemap`, the process's
    /// `/proc/PID/pagemap` opened (named `name` in errors). The file reads
    /// the address space the process had when it was opened: after an
    /// `execve` it must be opened again.
    #[cfg(target_os = "linux")]
    pub fn sync_written_from(
        &mut self,
        pagemap: &std::fs::File,
        name: &str,
        start: u64,
        end: u64,
    ) -> Result<u64, MapsError> {
        let unwritten: Vec<(u64, u64)> = self
            .range(self.page_size().align_down(start), self.page_size().align_up(end).unwrap_or(u64::MAX))
            .filter(|v| v.flags().private_writable() && v.anon_vma().is_none())
            .map(|v| (v.start, v.end))
            .collect();
        if unwritten.is_empty() {
            return Ok(0);
        }
        let Some(zero) = zero_page_frame() else { return Ok(0) };
        // The runs come range by range, in order: a VMA's first run is its
        // first anonymous page.
        let mut runs: Vec<(u64, u64)> = Vec::new();
        pagemap_runs(
            pagemap,
            name,
            &unwritten,
            |w| is_anon_word(w, zero),
            |s, e| {
                runs.push((s, e));
                Ok(())
            },
        )?;
        let first: Vec<u64> =
            unwritten.iter().filter_map(|&(s, e)| runs.iter().find(|r| s <= r.0 && r.0 < e).map(|r| r.0)).collect();
        let mut written = 0;
        for page in first {
            if self.touch(page, self.page_size().bytes()).is_ok() {
                written += self.page_size().bytes();
            }
        }
        Ok(written)
    }

    /// Adds the anonymous pages `pagemap` (a `/proc/PID/pagemap`) shows in
    /// the VMAs `written` (those smaps counts anonymous pages in): pages in
    /// swap, and present pages that are neither a file's nor the shared
    /// zero page. Telling the zero page apart takes page frame numbers,
    /// which pagemap shows to `CAP_SYS_ADMIN` only: without them (or
    /// without pagemap) none are added.
    #[cfg(target_os = "linux")]
    fn read_anon_pages(&mut self, pagemap: &str, written: &[(u64, u64)]) -> Result<(), MapsError> {
        if written.is_empty() {
            return Ok(());
        }
        let Some(zero) = zero_page_frame() else { return Ok(()) };
        let anon = &mut self.anon;
        let Ok(f) = std::fs::File::open(pagemap) else { return Ok(()) };
        pagemap_runs(&f, pagemap, written, |w| is_anon_word(w, zero), |s, e| anon.install(s, e))?;
        // The process may have changed between the reads: a page read as
        // a guard page before is not also an anonymous page.
        let guards: Vec<(u64, u64)> = self.guards.iter().collect();
        for (s, e) in guards {
            self.anon.remove(s, e).map_err(|_| out_of_memory(pagemap))?;
        }
        Ok(())
    }
}

/// The error of a page set or a record that could not be made while
/// `file` was read.
fn out_of_memory(file: &str) -> MapsError {
    MapsError { file: file.to_string(), line: 0, msg: "out of memory".into() }
}

/// Calls `add(start, end)` for every run of pages in `ranges` whose word
/// in `f` (a `/proc/PID/pagemap`, named `pagemap` in errors) passes
/// `keep`, reading 4,096 pages' words at a time (a process's huge
/// reservations cost no more memory than that). A range stops where
/// pagemap cannot be read.
#[cfg(unix)]
fn pagemap_runs(
    f: &std::fs::File,
    pagemap: &str,
    ranges: &[(u64, u64)],
    keep: impl Fn(u64) -> bool,
    mut add: impl FnMut(u64, u64) -> Result<(), crate::error::AllocFail>,
) -> Result<(), MapsError> {
    use std::os::unix::fs::FileExt;
    /// Pages read at a time (32 KiB of words).
    const CHUNK: u64 = 4096;
    if ranges.is_empty() {
        return Ok(());
    }
    let mut add = |s, e| add(s, e).map_err(|_| out_of_memory(pagemap));
    let page_size = PageSize::host_bytes();
    let most = ranges.iter().map(|&(s, e)| e.saturating_sub(s) / page_size).max().unwrap_or(0);
    let mut bytes = vec![0u8; (most.min(CHUNK) * 8) as usize];
    for &(s, e) in ranges {
        let mut run: Option<u64> = None;
        let mut at = s;
        while at < e {
            let n = ((e - at) / page_size).min(CHUNK);
            if n == 0 {
                // (A range that does not end on a page: its last part.)
                break;
            }
            let buf = &mut bytes[..(n * 8) as usize];
            if f.read_exact_at(buf, at / page_size * 8).is_err() {
                break;
            }
            for (k, word) in buf.chunks_exact(8).enumerate() {
                let page = at + k as u64 * page_size;
                match (keep(u64::from_le_bytes(word.try_into().expect("eight bytes"))), run) {
                    (true, None) => run = Some(page),
                    (false, Some(r)) => {
                        add(r, page)?;
                        run = None;
                    }
                    _ => {}
                }
            }
            at += n * page_size;
        }
        if let Some(r) = run {
            add(r, at)?;
        }
    }
    Ok(())
}

/// Whether a pagemap word is an anonymous page: in swap (a guard marker is
/// a swap-type entry too, flagged apart: bit 58), or present (bit 63) and
/// neither a file's page (bit 61) nor the zero page (frame `zero`).
#[cfg(target_os = "linux")]
fn is_anon_word(w: u64, zero: u64) -> bool {
    let bit = |b: u32| w >> b & 1 == 1;
    bit(62) && !bit(58) || bit(63) && !bit(61) && w & ((1 << 55) - 1) != zero
}

/// The shared zero page's frame number, learned once (it does not move
/// while the system runs): see [`learn_zero_page_frame`].
#[cfg(target_os = "linux")]
fn zero_page_frame() -> Option<u64> {
    static FRAME: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *FRAME.get_or_init(learn_zero_page_frame)
}

/// The shared zero page's frame number: a fresh private page, read, maps
/// it, and this process's pagemap says where. `None` where frames are
/// hidden (without `CAP_SYS_ADMIN` pagemap shows 0) or anything fails.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn learn_zero_page_frame() -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let page_size = PageSize::host_bytes();
    let len = page_size as usize;
    // SAFETY: a new private anonymous mapping placed by the kernel: it
    // replaces nothing, and no Rust object lives there.
    let p = unsafe {
        libc::mmap(core::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: `p` is the start of the readable page mapped just above,
    // which stays mapped until the `munmap` below; a byte is read through
    // a raw pointer, creating no reference.
    unsafe { core::ptr::read_volatile(p.cast::<u8>()) };
    let mut word = [0u8; 8];
    let read = std::fs::File::open("/proc/self/pagemap")
        .and_then(|f| f.read_exact_at(&mut word, p as u64 / page_size * 8))
        .is_ok();
    // SAFETY: unmaps exactly the mapping made above, which nothing refers
    // to any more.
    unsafe { libc::munmap(p, len) };
    let w = u64::from_le_bytes(word);
    let frame = w & ((1 << 55) - 1);
    (read && w >> 63 & 1 == 1 && frame != 0).then_some(frame)
}

/// The layout of the live process whose `/proc` directory is `dir`: its
/// resource limits (the soft ones, from `limits`: stack, address space,
/// data, and locked memory where `status`, the text of its
/// `/proc/PID/status`, shows no `CAP_IPC_LOCK`) and the
/// system's `vm.mmap_min_addr`, where they can be read; the rest Linux's
/// defaults (the stack guard gap is a boot parameter no file shows).
fn live_layout(dir: &str, status: &str) -> Layout {
    let mut layout = Layout::default();
    if let Ok(limits) = std::fs::read_to_string(format!("{dir}/limits")) {
        // (Its mmap_base follows the limit it was started with: most
        // likely this one.)
        if let Some(limit) = soft_limit(&limits, "Max stack size") {
            layout = layout.with_stack_limit(limit);
        }
        if let Some(limit) = soft_limit(&limits, "Max address space") {
            layout.as_limit = limit;
        }
        if let Some(limit) = soft_limit(&limits, "Max data size") {
            layout.data_limit = limit;
        }
        // The locked-memory limit binds only a process without
        // CAP_IPC_LOCK (bit 14 of its effective capabilities).
        let caps =
            status.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|c| u64::from_str_radix(c.trim(), 16).ok());
        if caps.is_some_and(|c| c & 1 << 14 == 0) {
            if let Some(limit) = soft_limit(&limits, "Max locked memory") {
                layout.memlock_limit = limit;
            }
        }
    }
    let min = std::fs::read_to_string("/proc/sys/vm/mmap_min_addr").ok().and_then(|s| s.trim().parse().ok());
    if let Some(min) = min {
        layout.mmap_min_addr = min;
    }
    layout
}

/// Field `n` (1-based, numeric, from the third) of a `/proc/PID/stat`
/// text: 45 and 46 are `mm->start_data` and `end_data`, 47
/// `mm->start_brk`. The command name, the second, may hold spaces and
/// parentheses.
fn stat_field(stat: &str, n: usize) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// The soft limit of the resource named `what` in a `/proc/PID/limits`
/// text (`u64::MAX` for "unlimited").
fn soft_limit(limits: &str, what: &str) -> Option<u64> {
    let line = limits.lines().find_map(|l| l.strip_prefix(what))?;
    match line.split_whitespace().next()? {
        "unlimited" => Some(u64::MAX),
        soft => soft.parse().ok(),
    }
}

/// A text file's contents and its name, or an error naming it (and the
/// line where it stops being UTF-8).
fn read_text(path: &Path) -> Result<(String, String), MapsError> {
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

#[cfg(test)]
mod tests {
    use super::{soft_limit, stat_field};

    fn start_brk(stat: &str) -> Option<u64> {
        stat_field(stat, 47)
    }

    fn stack_limit(limits: &str) -> Option<u64> {
        soft_limit(limits, "Max stack size")
    }

    #[test]
    fn the_heap_start_is_read_from_stat() {
        // A command name with spaces and a parenthesis; fields 3 to 52.
        let fields: Vec<String> =
            (3..=52).map(|i| if i == 47 { "93824992235520".into() } else { i.to_string() }).collect();
        let stat = format!("4242 (a b) c) {}\n", fields.join(" "));
        assert_eq!(start_brk(&stat), Some(0x5555_5555_5000));
        assert_eq!(start_brk("4242 (cut short) S 1 2"), None);
        assert_eq!(start_brk("no name at all"), None);
        assert_eq!((stat_field(&stat, 45), stat_field(&stat, 46), stat_field(&stat, 2)), (Some(45), Some(46), None));
    }

    /// Locked memory that no VMA holds locked (pages `MREMAP_DONTUNMAP`
    /// unlocked, which Linux goes on counting) is read back from `VmLck`.
    #[cfg(target_os = "linux")]
    #[test]
    #[allow(unsafe_code)]
    fn a_live_process_keeps_the_locked_count() {
        let p = crate::PageSize::host_bytes() as usize;
        // SAFETY: a fresh locked mapping of our own, one page of it moved
        // elsewhere (leaving the rest mapped), both unmapped at the end;
        // no Rust object lives in them.
        let (a, b) = unsafe {
            let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_LOCKED;
            let a = libc::mmap(std::ptr::null_mut(), 4 * p, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0);
            assert_ne!(a, libc::MAP_FAILED, "a locked mapping");
            let keep = libc::MREMAP_MAYMOVE | libc::MREMAP_DONTUNMAP;
            let b = libc::mremap(a, p, p, keep, std::ptr::null_mut::<libc::c_void>());
            assert_ne!(b, libc::MAP_FAILED, "a DONTUNMAP move");
            (a, b)
        };
        let mm = crate::AddressSpace::from_self().unwrap();
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        // SAFETY: the two mappings made above, which nothing else uses.
        unsafe {
            libc::munmap(a, 4 * p);
            libc::munmap(b, p);
        }
        let kb = status.lines().find_map(|l| l.strip_prefix("VmLck:")).unwrap();
        let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().unwrap();
        assert!(kb >= 5 * 4, "4 pages unlocked but counted, 1 locked: {kb} KiB");
        assert_eq!(mm.locked_vm(), kb * 1024);
    }

    /// The space's counts are the kernel's (`VmSize`, `VmData`) as they
    /// stood before or after the space was read; other test threads map
    /// memory meanwhile, so a few tries.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_live_process_counts_as_the_kernel_does() {
        let kb = |status: &str, field: &str| -> u64 {
            let line = status.lines().find_map(|l| l.strip_prefix(field)).expect(field);
            line.trim().trim_end_matches("kB").trim().parse().expect("kB")
        };
        let mut seen = Vec::new();
        for _ in 0..20 {
            let before = std::fs::read_to_string("/proc/self/status").unwrap();
            let mm = crate::AddressSpace::from_self().unwrap();
            let after = std::fs::read_to_string("/proc/self/status").unwrap();
            let counts = |status: &str| (kb(status, "VmSize:"), kb(status, "VmData:"));
            let got = (mm.total_vm() / 1024, mm.data_vm() / 1024);
            if got == counts(&before) || got == counts(&after) {
                return;
            }
            seen.push((got, counts(&before)));
        }
        panic!("(total_vm, data_vm) against (VmSize, VmData), in KiB: {seen:?}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_live_process_has_its_break() {
        let mm = crate::AddressSpace::from_self().unwrap();
        let b = mm.brk_state().expect("a Linux process has a break");
        assert_eq!(b.start % crate::PageSize::host_bytes(), 0);
        assert!(b.start <= b.current, "{b:?}");
    }

    #[test]
    fn the_stack_limit_is_read_from_limits() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \n\
                    Max cpu time              unlimited            unlimited            seconds   \n\
                    Max stack size            8388608              unlimited            bytes     \n";
        assert_eq!(stack_limit(text), Some(8 << 20));
        assert_eq!(stack_limit(&text.replace("8388608 ", "unlimited")), Some(u64::MAX));
        assert_eq!(stack_limit("Max cpu time  unlimited  unlimited  seconds\n"), None);
        assert_eq!(stack_limit("Max stack size  lots  unlimited  bytes\n"), None);
        let text =
            text.to_string() + "Max address space         104857600            unlimited            bytes     \n";
        assert_eq!(soft_limit(&text, "Max address space"), Some(100 << 20));
    }
}
