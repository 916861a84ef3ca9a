//! Rebuilding address spaces from an strace log.

use std::{
    cell::RefCell,
    collections::HashMap,
    fmt,
    rc::Rc,
    sync::{Arc, Mutex},
};

use super::{
    names,
    parse::{arg_string, arg_value, decoration, parse_line, split_args, Event, ParseError, Ret},
};
use crate::{
    AddressSpace, Advice, Change, Errno, Layout, MapFlags, MappedFile, MbindFlags, MclFlags, MlockFlags, MremapFlags,
    Prot, ShmFlags, ShmSegment, VmFlags,
};

/// Which lines to apply.
#[derive(Clone, Debug, Default)]
pub struct ReplayOptions {
    /// Lines up to this one (1-based, inclusive) are read only for process
    /// relationships, open files and the program break; memory calls after
    /// it are applied. `None`: from the start. With an initial space (the
    /// maps file describing the process at this line), the memory calls
    /// before it are replayed on a shadow of the process's space, whose
    /// flags that maps lines do not show (`MAP_NORESERVE`,
    /// `MADV_DONTFORK`, `MADV_WIPEONFORK`, hugepage advice, locks, …)
    /// are given to the initial space's VMAs they cover whole.
    pub from: Option<usize>,
    /// Lines from this one on (1-based) are not read. `None`: to the end.
    pub to: Option<usize>,
    /// Skip malformed lines (counted) instead of failing.
    pub lenient: bool,
    /// Use only what the log (and the initial maps) says: files are not
    /// looked up on this machine, so the result does not depend on it.
    /// A file the initial maps does not name is told apart by its path as
    /// logged, with device `00:00` and an inode numbered by the path's
    /// first appearance (1, 2, …).
    pub log_only: bool,
    /// The layout of a process the log starts with (without an initial
    /// space): the machine's where the log was recorded. Processes made
    /// later take their parent's.
    pub layout: Layout,
}

/// A malformed line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub msg: String,
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.msg)
    }
}

impl std::error::Error for ReplayError {}

/// Something the model did differently from what the log recorded (a call
/// the kernel accepted and the model refused, or the other way round).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disagreement {
    /// 1-based line number.
    pub line: usize,
    /// What happened.
    pub msg: String,
}

/// What a replay counted.
#[derive(Clone, Debug, Default)]
pub struct ReplayStats {
    /// Lines read.
    pub lines: usize,
    /// Memory calls applied to an address space.
    pub applied: usize,
    /// Malformed lines skipped (`lenient`).
    pub skipped: usize,
    /// The first few of them: line number and what was wrong.
    pub skipped_lines: Vec<(usize, String)>,
    /// Calls whose recorded result the model did not reproduce.
    pub disagreements: Vec<Disagreement>,
    /// Lines where a process called `execve` (its new layout is unknown).
    pub execs: Vec<(usize, u32)>,
    /// Pairs of calls (the lines they returned on) that overlapped and
    /// agree with every result the log shows in either order, the two
    /// orders leaving different layouts at the end: the model took the
    /// order they returned in, and the log cannot decide.
    pub undecided: Vec<(usize, usize)>,
}

/// How many skipped lines [`ReplayStats::skipped_lines`] names.
pub const SKIPPED_KEPT: usize = 5;

type Space = Rc<RefCell<AddressSpace>>;

/// The soft limit in a `struct rlimit` as strace prints it
/// (`{rlim_cur=8192*1024, rlim_max=RLIM64_INFINITY}`); `None` for `NULL`.
fn rlim_cur(arg: &str) -> Result<Option<u64>, ParseError> {
    let arg = arg.trim();
    if arg == "NULL" {
        return Ok(None);
    }
    let bad = || ParseError(format!("not a resource limit: {arg}"));
    let cur = arg.strip_prefix("{rlim_cur=").and_then(|r| r.split([',', '}']).next()).ok_or_else(bad)?;
    if cur.starts_with("RLIM") && cur.ends_with("_INFINITY") {
        return Ok(Some(u64::MAX));
    }
    let product = cur.split('*').try_fold(1u64, |p, f| p.checked_mul(f.trim().parse().ok()?));
    product.map(Some).ok_or_else(bad)
}

/// A multiplicative hash for pids: the replayer looks pids up several times
/// per line, and SipHash's protection against chosen keys buys nothing for
/// a log read from a file.
#[derive(Default, Clone, Copy)]
struct PidHasher(u64);

impl core::hash::Hasher for PidHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0 ^ u64::from(n)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

type PidMap<V> = HashMap<u32, V, core::hash::BuildHasherDefault<PidHasher>>;
/// Device major, minor and inode of a file.
type FileId = (u32, u32, u64);
type Files = Rc<RefCell<HashMap<i64, Rc<OpenFile>>>>;

/// An open file descriptor's file. Its identity (the [`MappedFile`] that
/// decides merging) is made the first time it is mapped, so files that are
/// opened and read but never mapped cost no lookup; a forked child's copy
/// of the descriptor shares it, as it shares the kernel's `struct file`.
struct OpenFile {
    /// The path strace showed: the kernel's own (`-y`) or as opened.
    path: String,
    /// Whether `path` came from `-y` (already resolved by the kernel).
    resolved: bool,
    writable: bool,
    /// Its device and inode, where the caller knew them (a live tracer
    /// reads them from the open descriptor: a memfd or a deleted file
    /// has no path to look up).
    id: Option<FileId>,
    mapped: std::cell::OnceCell<Arc<MappedFile>>,
}

struct Proc {
    space: Space,
    files: Files,
    /// The process the space was made for (its changes are recorded
    /// under it): this one, or the one whose space it shares.
    owner: u32,
    /// Shares another process's space without being one of its threads
    /// (`CLONE_VM` alone: a vfork child), until it execs.
    borrowed: bool,
}

/// One change a line of the log made to a process's address space (see
/// [`Replayer::record_changes`]).
#[derive(Clone, Debug)]
pub struct ReplayChange {
    /// The line (1-based).
    pub line: usize,
    /// The process whose address space changed (for threads, the one the
    /// space was made for: the first of its thread group in the log).
    pub pid: u32,
    /// What changed.
    pub change: Change,
    /// The old attributes' line of `/proc/PID/maps` over the change's
    /// range, as the process showed it before the line (with its
    /// `[heap]` or `[stack]` label, which a change's VMA alone does not
    /// know); none for a mapping.
    pub old_line: Option<String>,
    /// The new attributes' line, as the process shows it after the line;
    /// none for an unmapping or a move.
    pub new_line: Option<String>,
}

/// Changes heard by the spaces' observers, not yet given a line.
type Heard = Arc<Mutex<Vec<(u32, Change)>>>;

/// Reads an strace log line by line and keeps every process's address
/// space up to date; see [`replay`](crate::strace::replay) for the
/// one-call form.
pub struct Replayer {
    opts: ReplayOptions,
    procs: PidMap<Proc>,
    /// Pids in order of appearance.
    order: Vec<u32>,
    root: Option<u32>,
    initial: Option<AddressSpace>,
    /// Path → (major, minor, inode), from the initial maps file.
    known: HashMap<String, FileId>,
    /// Unfinished calls: name, arguments so far, the line they began on.
    pending: PidMap<(String, String, usize)>,
    /// In spaces only partly known: the ranges calls since mapped or
    /// unmapped, where the model knows every page.
    known_ranges: HashMap<*const RefCell<AddressSpace>, Ranges>,
    /// Whether a returned address off the layout's pages was reported.
    misaligned: bool,
    /// The first part of a call's line that strace's own message cut, and
    /// the message.
    partial: Option<(usize, String, String)>,
    /// Spaces with calls in flight: see `order`.
    overlaps: HashMap<*const RefCell<AddressSpace>, order::Overlap>,
    /// Calls applied in trying orders so far (see `order::PER_REPLAY`).
    order_spent: usize,
    /// Lines of pids not created yet while a clone is in flight.
    deferred: PidMap<Vec<(usize, String)>>,
    clones_in_flight: usize,
    /// The program break learned from the log: (start, current).
    brk: PidMap<(Option<u64>, Option<u64>)>,
    /// Address spaces that began empty at an execve (the layout the kernel
    /// gave the new program is not in the log): calls on them may fail in
    /// the model, which is no disagreement worth reporting.
    unknown: std::collections::HashSet<*const RefCell<AddressSpace>>,
    /// Paths looked up on this machine: the resolved path and its identity.
    lookups: HashMap<String, (String, Option<FileId>)>,
    /// Processes that have exited (or were killed).
    exited: std::collections::HashSet<u32>,
    /// Exits seen, counted (see [`process_events`](Self::process_events)).
    exits: usize,
    /// System V segments made in the log (`shmget`), by id: what `shmat`
    /// maps (segments are the system's, not a process's).
    segments: HashMap<u64, ShmSegment>,
    stats: ReplayStats,
    /// With [`record_changes`](Self::record_changes): what the spaces'
    /// observers heard, the line being applied, and the changes given
    /// their lines.
    heard: Option<Heard>,
    line_now: Option<usize>,
    changes: Vec<ReplayChange>,
    /// Each process's labels as they stood before the line being applied
    /// (for the old side of its changes).
    shown: PidMap<crate::space::Shown>,
}

impl fmt::Debug for Replayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replayer").field("processes", &self.order).field("stats", &self.stats).finish_non_exhaustive()
    }
}

/// The address spaces a log left behind.
#[derive(Debug)]
pub struct Replay {
    /// Every process seen, in order of appearance, with its final address
    /// space (threads share theirs).
    pub processes: Vec<(u32, AddressSpace)>,
    /// The first process.
    pub root: Option<u32>,
    /// The threads (made with `CLONE_THREAD`), each with the process it
    /// belongs to: their spaces are their process's.
    pub threads: Vec<(u32, u32)>,
    /// Counts and disagreements.
    pub stats: ReplayStats,
    /// With [`Replayer::record_changes`]: the changes not taken yet (those
    /// of lines held back to the end: lines of processes never created).
    pub changes: Vec<ReplayChange>,
}

impl Replay {
    /// The final address space of `pid`.
    pub fn space(&self, pid: u32) -> Option<&AddressSpace> {
        self.processes.iter().find(|(p, _)| *p == pid).map(|(_, s)| s)
    }

    /// The process `pid` is a thread of, if it is one.
    pub fn process_of(&self, pid: u32) -> Option<u32> {
        self.threads.iter().find(|(t, _)| *t == pid).map(|&(_, p)| p)
    }

    /// The threads of process `pid`, in order of appearance.
    pub fn threads_of(&self, pid: u32) -> Vec<u32> {
        self.threads.iter().filter(|(_, p)| *p == pid).map(|&(t, _)| t).collect()
    }
}

/// Calls that make a process (or thread).
fn is_clone(name: &str) -> bool {
    matches!(name, "clone" | "clone3" | "fork" | "vfork")
}

fn is_memory_call(name: &str) -> bool {
    matches!(
        name,
        "mmap"
            | "mmap2"
            | "munmap"
            | "mprotect"
            | "pkey_mprotect"
            | "mremap"
            | "madvise"
            | "prctl"
            | "mlock"
            | "mlock2"
            | "munlock"
            | "mlockall"
            | "munlockall"
            | "mseal"
            | "shmat"
            | "shmdt"
            | "mbind"
            | "remap_file_pages"
            | "process_madvise"
    )
}

/// Whether memory call `name` names the range it changes as its first
/// two arguments (address and length).
fn names_range(name: &str) -> bool {
    matches!(
        name,
        "munmap"
            | "mprotect"
            | "pkey_mprotect"
            | "madvise"
            | "mlock"
            | "mlock2"
            | "munlock"
            | "mseal"
            | "mbind"
            | "remap_file_pages"
            | "mremap"
    )
}

mod order;

impl Replayer {
    /// A replayer; `initial` is the root process's address space at the
    /// `from` line (from a maps file), if known.
    pub fn new(opts: ReplayOptions, initial: Option<AddressSpace>) -> Replayer {
        let mut known = HashMap::new();
        if let Some(mm) = &initial {
            for v in mm.iter() {
                if let Some(f) = v.file() {
                    if !f.anon_shmem {
                        known.insert(f.path.clone(), (f.dev_major, f.dev_minor, f.inode));
                    }
                }
            }
        }
        Replayer {
            opts,
            procs: PidMap::default(),
            order: Vec::new(),
            root: None,
            initial,
            known,
            pending: PidMap::default(),
            overlaps: HashMap::new(),
            order_spent: 0,
            partial: None,
            misaligned: false,
            known_ranges: HashMap::new(),
            deferred: PidMap::default(),
            clones_in_flight: 0,
            brk: PidMap::default(),
            unknown: std::collections::HashSet::new(),
            lookups: HashMap::new(),
            exited: std::collections::HashSet::new(),
            exits: 0,
            segments: HashMap::new(),
            stats: ReplayStats::default(),
            heard: None,
            line_now: None,
            changes: Vec::new(),
            shown: PidMap::default(),
        }
    }

    /// Records every change each applied line makes to a process's address
    /// space (what an [`Observer`](crate::Observer) would hear, with the
    /// line and the process), to be taken with
    /// [`take_changes`](Self::take_changes). A fork tells the child's
    /// pages mapped, an `execve` the old program's unmapped; the initial
    /// maps are told mapped at the line they describe (the first, without
    /// `from`). Call before the first line.
    ///
    /// ```
    /// use maple_mm::strace::{ReplayOptions, Replayer};
    /// let mut r = Replayer::new(ReplayOptions::default(), None);
    /// r.record_changes();
    /// r.feed(1, "100 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f0000000000")?;
    /// r.feed(2, "100 mprotect(0x7f0000000000, 4096, PROT_READ) = 0")?;
    /// let lines: Vec<String> = r.take_changes().iter().map(|c| format!("{} {} {}", c.line, c.pid, c.change)).collect();
    /// assert_eq!(lines, ["1 100 mapped 7f0000000000-7f0000002000 rw-p", "2 100 changed 7f0000000000-7f0000001000 rw-p -> r--p"]);
    /// # Ok::<(), maple_mm::strace::ReplayError>(())
    /// ```
    pub fn record_changes(&mut self) {
        if self.heard.is_some() {
            return;
        }
        self.heard = Some(Heard::default());
        let pids: Vec<u32> = self.order.clone();
        for pid in pids {
            let space = Rc::clone(&self.procs[&pid].space);
            self.watch(pid, &mut space.borrow_mut());
        }
        // (The initial maps are told when they become a process's space.)
    }

    /// The changes recorded since the last call, in order (see
    /// [`record_changes`](Self::record_changes)).
    pub fn take_changes(&mut self) -> Vec<ReplayChange> {
        self.collect_changes(self.line_now.unwrap_or(0));
        std::mem::take(&mut self.changes)
    }

    /// Gives `space`, the space of `pid`, an observer that records its
    /// changes (when recording).
    fn watch(&self, pid: u32, space: &mut AddressSpace) {
        if let Some(heard) = &self.heard {
            let heard = Arc::clone(heard);
            space
                .set_observer(move |c: &Change| heard.lock().unwrap_or_else(|p| p.into_inner()).push((pid, c.clone())));
        }
    }

    /// `pid` (known) execs: `fresh` becomes its own space, which it shares
    /// with no one; the pid keeps its files. When recording, the old
    /// space's pages are told unmapped under its owner, unless the pid
    /// only borrowed it (a vfork child: its parent keeps them), and
    /// `fresh`'s mapped under `pid`.
    fn exec_into(&mut self, pid: u32, mut fresh: AddressSpace) -> Space {
        let proc = &self.procs[&pid];
        let old = if proc.borrowed { None } else { Some((proc.owner, Rc::clone(&proc.space))) };
        if let Some((owner, old)) = old {
            self.tell(owner, &old.borrow(), &AddressSpace::new());
        }
        self.replaced(pid, &AddressSpace::new(), &mut fresh);
        let space = Rc::new(RefCell::new(fresh));
        let proc = self.procs.get_mut(&pid).expect("known");
        // (Threads of the old process are gone.)
        proc.space = Rc::clone(&space);
        proc.owner = pid;
        proc.borrowed = false;
        space
    }

    /// `after` becomes the space of `pid` in place of `before` (a fork's
    /// child, an exec, the initial maps): when recording, the changes
    /// from one to the other are told as made by `pid`, and `after` is
    /// watched from now on.
    fn replaced(&self, pid: u32, before: &AddressSpace, after: &mut AddressSpace) {
        self.tell(pid, before, after);
        self.watch(pid, after);
    }

    /// When recording, tells the changes from `before` to `after` as made
    /// by `pid`.
    fn tell(&self, pid: u32, before: &AddressSpace, after: &AddressSpace) {
        if let Some(heard) = &self.heard {
            let mut h = heard.lock().unwrap_or_else(|p| p.into_inner());
            h.extend(before.diff(after).map(|c| (pid, c)));
        }
    }

    /// Gives the changes heard so far the line `no`.
    fn collect_changes(&mut self, no: usize) {
        let Some(heard) = &self.heard else { return };
        let drained: Vec<(u32, Change)> = heard.lock().unwrap_or_else(|p| p.into_inner()).drain(..).collect();
        let root = self.root.unwrap_or(0);
        for (pid, change) in drained {
            // The unnamed first process (strace names no pid until a
            // second exists) is the root.
            let pid = if pid == 0 { root } else { pid };
            let before = self.shown.get(&pid).copied().unwrap_or_default();
            let after = self.procs.get(&pid).map(|p| p.space.borrow().shown()).unwrap_or_default();
            let old_line = change.old_vma().map(|v| before.line(&v));
            let new_line = change.vma().map(|v| after.line(&v));
            self.changes.push(ReplayChange { line: no, pid, change, old_line, new_line });
            self.shown.insert(pid, after);
        }
    }

    fn applying(&self, line: usize) -> bool {
        self.opts.from.is_none_or(|f| line > f)
    }

    /// Whether the memory call on `line` is applied: after `from`, and
    /// up to it too while an initial space waits, to spaces that are then
    /// replaced (the root's by the initial maps, at `from`), only to learn
    /// the flags a maps file does not show (see [`ReplayOptions::from`]).
    fn memory_calls_apply(&self, line: usize) -> bool {
        self.applying(line) || self.initial.is_some()
    }

    /// Marks `space` as only partly known, nothing of it known yet (its
    /// address may be a dropped space's).
    fn mark_unknown(&mut self, space: &Space) {
        let key = Rc::as_ptr(space);
        self.unknown.insert(key);
        self.known_ranges.remove(&key);
    }

    fn disagree(&mut self, line: usize, msg: String) {
        self.stats.disagreements.push(Disagreement { line, msg });
    }

    /// Makes `pid` known: the root (with the initial space), or a process
    /// sharing the root's space.
    fn ensure(&mut self, pid: u32) {
        if self.procs.contains_key(&pid) {
            return;
        }
        let proc = match self.root.and_then(|r| self.procs.get(&r)) {
            Some(root) => Proc {
                space: Rc::clone(&root.space),
                files: Rc::clone(&root.files),
                owner: root.owner,
                borrowed: false,
            },
            None => {
                self.root = Some(pid);
                // Without `from`, the initial space is the first process's;
                // with it, the space of the process on line `from`.
                let space = if self.opts.from.is_none() { self.initial.take() } else { None };
                let mut space = space.unwrap_or_else(|| AddressSpace::with_layout(self.opts.layout.clone()));
                self.replaced(pid, &AddressSpace::new(), &mut space);
                let space = Rc::new(RefCell::new(space));
                if self.opts.from.is_some() {
                    // Before `from`, a shadow: its calls may fail in the
                    // model (it began empty) with nothing to report.
                    self.mark_unknown(&space);
                }
                Proc { space, files: Rc::default(), owner: pid, borrowed: false }
            }
        };
        self.procs.insert(pid, proc);
        self.order.push(pid);
    }

    /// Every process seen so far and not exited, in order of appearance,
    /// with its address space as it stands (threads share one).
    pub fn processes(&self) -> Vec<(u32, std::cell::Ref<'_, AddressSpace>)> {
        self.order
            .iter()
            .filter(|p| !self.exited.contains(p))
            .filter_map(|p| self.procs.get(p).map(|pr| (*p, pr.space.borrow())))
            .collect()
    }

    /// Every process and thread seen so far, in order of appearance, with
    /// its address space (as it was at its exit, for one that has exited)
    /// and whether it has exited.
    pub fn every_process(&self) -> Vec<(u32, std::cell::Ref<'_, AddressSpace>, bool)> {
        self.order
            .iter()
            .filter_map(|p| self.procs.get(p).map(|pr| (*p, pr.space.borrow(), self.exited.contains(p))))
            .collect()
    }

    /// A count that changes whenever a process or thread appears or
    /// exits: a drawing samples the spaces then, so that none is missed.
    pub fn process_events(&self) -> usize {
        self.order.len() + self.exits
    }

    /// The address space of `pid` as it stands (shared with its threads),
    /// if the process is known.
    pub fn space(&self, pid: u32) -> Option<std::cell::Ref<'_, AddressSpace>> {
        self.procs.get(&pid).map(|p| p.space.borrow())
    }

    /// The address space of `pid`, to change outside the log (what a live
    /// tracer learns from the process itself, such as pages written).
    pub fn space_mut(&self, pid: u32) -> Option<std::cell::RefMut<'_, AddressSpace>> {
        self.procs.get(&pid).map(|p| p.space.borrow_mut())
    }

    /// Gives `pid` the address space `space` as its own, as an `execve`
    /// does, where the new program's image is known (a live tracer reads
    /// it from `/proc/PID` at the exec): the pid shares it with no one, and
    /// its program break is learned anew. Calls made later apply to it as
    /// logged; the changes from the old space to this one are recorded
    /// (see [`record_changes`](Self::record_changes)) at line `no`.
    pub fn exec_with(&mut self, no: usize, pid: u32, space: AddressSpace) {
        self.collect_changes(self.line_now.unwrap_or(no));
        self.ensure(pid);
        self.exec_into(pid, space);
        self.brk.remove(&pid);
        self.exited.remove(&pid);
        self.collect_changes(no);
    }

    /// The first process, once known.
    pub fn root(&self) -> Option<u32> {
        self.root
    }

    /// Gives the unnamed first process (pid 0) its pid.
    fn rename_root(&mut self, pid: u32) {
        if let Some(p) = self.procs.remove(&0) {
            self.procs.insert(pid, p);
        }
        for o in &mut self.order {
            if *o == 0 {
                *o = pid;
            }
        }
        if let Some(p) = self.pending.remove(&0) {
            self.pending.insert(pid, p);
        }
        if let Some(b) = self.brk.remove(&0) {
            self.brk.insert(pid, b);
        }
        for p in self.procs.values_mut().filter(|p| p.owner == 0) {
            p.owner = pid;
        }
        self.root = Some(pid);
    }

    /// Counts line number `no` as skipped for `msg` (lenient replay of a
    /// line the caller could not even hand over, such as one that is not
    /// UTF-8); without `lenient` it is an error, as a malformed line is.
    pub fn skip(&mut self, no: usize, msg: String) -> Result<(), ReplayError> {
        self.bad(no, msg)
    }

    /// Reads line number `no` (1-based).
    pub fn feed(&mut self, no: usize, line: &str) -> Result<(), ReplayError> {
        if self.opts.to.is_some_and(|t| no >= t) {
            return Ok(());
        }
        // strace writing to a terminal or a pipe with the program's own
        // output puts its messages in the middle of a call's line
        // (`clone(…SIGCHLDstrace: Process 7 attached` then `, …) = 7`):
        // the call is joined with the next line, and the message follows
        // it (the process it names is the call's child).
        if let Some((_, head, msg)) = self.partial.take() {
            let joined = format!("{head}{}", line.trim_start_matches(['\n', '\r']));
            self.feed(no, &joined)?;
            return self.feed(no, &msg);
        }
        let parsed = match parse_line(line) {
            Ok(p) => p,
            Err(ParseError(msg)) => {
                // (Only a line that does not parse is looked at for one.)
                if let Some(at) = line.find("strace: ").filter(|&at| at > 0) {
                    let head = &line[..at];
                    if !head.trim().is_empty() && !head.trim_end().ends_with(')') {
                        self.partial = Some((no, head.to_string(), line[at..].trim_end().to_string()));
                        return Ok(());
                    }
                }
                self.stats.lines += 1;
                return self.bad(no, msg);
            }
        };
        self.stats.lines += 1;
        let pid = parsed.pid.or(self.root).unwrap_or(0);
        if self.root == Some(0) && pid != 0 && !self.procs.contains_key(&pid) {
            // strace writing to stderr names no pid until a second process
            // exists; the first pid it names that is not a new child (or
            // that resumes the unnamed process's call) is the first process.
            let resumes = matches!(&parsed.event, Event::Resumed { name, .. } if self.pending.get(&0).is_some_and(|p| p.0 == *name));
            if resumes || self.clones_in_flight == 0 {
                self.rename_root(pid);
            }
        }
        if !self.procs.contains_key(&pid) && self.root.is_some() && self.clones_in_flight > 0 {
            // Perhaps the child of a clone that has not returned yet.
            self.deferred.entry(pid).or_default().push((no, line.to_string()));
            return Ok(());
        }
        self.ensure(pid);
        if self.heard.is_some() {
            let now = self.procs[&pid].space.borrow().shown();
            self.shown.insert(pid, now);
        }
        if self.opts.from == Some(no) {
            if let Some(mut initial) = self.initial.take() {
                // The maps file describes this process at this line; the
                // calls logged before it add what maps lines do not show.
                let space = Rc::clone(&self.procs[&pid].space);
                initial.adopt_hidden_flags(&space.borrow());
                self.unknown.remove(&Rc::as_ptr(&space));
                self.replaced(pid, &space.borrow(), &mut initial);
                *space.borrow_mut() = initial;
                self.root = Some(pid);
            }
        }
        self.event(no, pid, parsed.event)
    }

    fn event(&mut self, no: usize, pid: u32, event: Event<'_>) -> Result<(), ReplayError> {
        if self.heard.is_none() {
            return self.event_inner(no, pid, event);
        }
        // What was heard so far belongs to the line being applied (a
        // clone's, whose child's held-back lines are applied inside it).
        let outer = self.line_now.replace(no);
        self.collect_changes(outer.unwrap_or(no));
        let res = self.event_inner(no, pid, event);
        self.collect_changes(no);
        self.line_now = outer;
        res
    }

    fn event_inner(&mut self, no: usize, pid: u32, event: Event<'_>) -> Result<(), ReplayError> {
        match event {
            Event::Call { name, args, ret, ret_text } => {
                if self.overlapping(pid, name) {
                    let line = format!("{pid} {name}({args}) = {ret_text}");
                    return self.ordered(order::Logged { no, entry: no, pid, line });
                }
                self.call(no, pid, name, args, ret, ret_text)
            }
            Event::Unfinished { name, args } => {
                if is_clone(name) {
                    self.clones_in_flight += 1;
                }
                self.pending.insert(pid, (name.to_string(), args.to_string(), no));
                Ok(())
            }
            Event::Resumed { name, args, ret, ret_text } => {
                let Some((pname, head, entry)) = self.pending.remove(&pid) else {
                    // The first half came before the log starts (or `to`).
                    return Ok(());
                };
                if pname != name {
                    return self.bad(no, format!("{name} resumed, but {pname} was unfinished"));
                }
                if is_clone(name) {
                    self.clones_in_flight -= 1;
                }
                let full = format!("{head}{args}");
                if self.overlapping(pid, name) {
                    let line = format!("{pid} {name}({full}) = {ret_text}");
                    return self.ordered(order::Logged { no, entry, pid, line });
                }
                self.call(no, pid, name, &full, ret, ret_text)
            }
            Event::Exited(_) | Event::Killed => {
                self.exits += usize::from(self.exited.insert(pid));
                Ok(())
            }
            Event::Signal | Event::Attached(_) | Event::Other => Ok(()),
        }
    }

    fn bad(&mut self, no: usize, msg: String) -> Result<(), ReplayError> {
        if self.opts.lenient {
            self.stats.skipped += 1;
            if self.stats.skipped_lines.len() < SKIPPED_KEPT {
                self.stats.skipped_lines.push((no, msg));
            }
            Ok(())
        } else {
            Err(ReplayError { line: no, msg })
        }
    }

    fn call(
        &mut self,
        no: usize,
        pid: u32,
        name: &str,
        args: &str,
        ret: Ret<'_>,
        ret_text: &str,
    ) -> Result<(), ReplayError> {
        // strace before 6.10 does not know `mseal` (system call 462 on
        // every 64-bit Linux) and shows it by number.
        let name = if name == "syscall_0x1ce" { "mseal" } else { name };
        // Most lines need nothing: calls we do not model, failed opens.
        let relevant = match name {
            _ if is_clone(name) => true,
            "execve" | "execveat" | "brk" | "exit_group" => true,
            "openat" | "open" | "creat" | "close" | "shmget" | "setrlimit" | "prlimit64" => {
                matches!(ret, Ret::Value(_))
            }
            _ => is_memory_call(name) && self.memory_calls_apply(no),
        };
        if !relevant {
            return Ok(());
        }
        if let Err(ParseError(msg)) = self.call_inner(no, pid, name, args, ret, ret_text) {
            return self.bad(no, format!("{name}: {msg}"));
        }
        match ret {
            // The lines a new child wrote before its clone returned, now
            // that its address space exists.
            Ret::Value(child) if is_clone(name) && child > 0 => self.replay_deferred(child as u32),
            _ => Ok(()),
        }
    }

    fn replay_deferred(&mut self, child: u32) -> Result<(), ReplayError> {
        for (n, l) in self.deferred.remove(&child).unwrap_or_default() {
            // Each was parsed once already, when it was held back.
            if let Ok(parsed) = parse_line(&l) {
                self.event(n, child, parsed.event)?;
            }
        }
        Ok(())
    }

    fn call_inner(
        &mut self,
        no: usize,
        pid: u32,
        name: &str,
        args: &str,
        ret: Ret<'_>,
        ret_text: &str,
    ) -> Result<(), ParseError> {
        let a = split_args(args);
        let num = |i: usize, table: &[(&str, u64)]| -> Result<u64, ParseError> {
            let s = a.get(i).ok_or_else(|| ParseError(format!("missing argument {}", i + 1)))?;
            arg_value(s, table).map_err(|ParseError(e)| ParseError(format!("argument {}: {e}", i + 1)))
        };
        match name {
            _ if is_clone(name) => {
                let Ret::Value(child) = ret else { return Ok(()) };
                if child <= 0 {
                    return Ok(());
                }
                let flags = match name {
                    "fork" => 0,
                    "vfork" => names::CLONE_VM | names::CLONE_VFORK,
                    _ => {
                        let f = a
                            .iter()
                            .flat_map(|x| x.trim_start_matches('{').split(", "))
                            .find_map(|x| x.strip_prefix("flags="));
                        match f {
                            Some(f) => arg_value(f.trim_end_matches('}'), names::CLONE)?,
                            None => 0,
                        }
                    }
                };
                self.spawn(no, pid, child as u32, flags);
                return Ok(());
            }
            "execve" | "execveat" => {
                if ret == Ret::Value(0) {
                    // A new program: a new heap (its start is the next brk(NULL)).
                    self.brk.remove(&pid);
                    if self.applying(no) {
                        let fresh = AddressSpace::with_layout(self.procs[&pid].space.borrow().layout().clone());
                        let space = self.exec_into(pid, fresh);
                        self.mark_unknown(&space);
                        self.stats.execs.push((no, pid));
                    }
                }
                return Ok(());
            }
            "exit_group" => {
                self.exits += usize::from(self.exited.insert(pid));
                return Ok(());
            }
            "brk" => {
                if let Ret::Value(r) = ret {
                    self.brk_call(no, pid, num(0, &[])?, r as u64);
                }
                return Ok(());
            }
            "openat" | "open" | "creat" => {
                if let Ret::Value(fd) = ret {
                    let (path_arg, flags_arg) = if name == "openat" { (1, 2) } else { (0, 1) };
                    // With -y strace shows the path the kernel resolved.
                    let (path, resolved) = match decoration(ret_text) {
                        Some(shown) => (shown.to_string(), true),
                        None => (a.get(path_arg).and_then(|p| arg_string(p)).unwrap_or_default(), false),
                    };
                    let flags = if name == "creat" { "O_WRONLY" } else { a.get(flags_arg).copied().unwrap_or("") };
                    let writable = flags.contains("O_RDWR") || flags.contains("O_WRONLY");
                    let open = OpenFile { path, resolved, writable, id: None, mapped: std::cell::OnceCell::new() };
                    self.procs[&pid].files.borrow_mut().insert(fd, Rc::new(open));
                }
                return Ok(());
            }
            "shmget" => {
                if let Ret::Value(id) = ret {
                    let key = num(0, names::IPC)? as i32;
                    self.segments.insert(id as u64, ShmSegment { key, id: id as i32, size: num(1, &[])? });
                }
                return Ok(());
            }
            "close" => {
                if ret == Ret::Value(0) {
                    let fd = num(0, &[])? as i64;
                    self.procs[&pid].files.borrow_mut().remove(&fd);
                }
                return Ok(());
            }
            // Resource limits the model follows: RLIMIT_AS and RLIMIT_STACK
            // (a process's own, or with prlimit64 another's it knows).
            "setrlimit" | "prlimit64" => {
                if ret == Ret::Value(0) {
                    let (target, at) = if name == "prlimit64" { (num(0, &[])? as u32, 1) } else { (0, 0) };
                    let target = if target == 0 { pid } else { target };
                    let new = a.get(at + 1).ok_or_else(|| ParseError(format!("missing argument {}", at + 2)))?;
                    if let (Some(p), Some(limit)) = (self.procs.get(&target), rlim_cur(new)?) {
                        match a.get(at).map(|r| r.trim()) {
                            Some("RLIMIT_AS") => p.space.borrow_mut().set_as_limit(limit),
                            Some("RLIMIT_STACK") => p.space.borrow_mut().set_stack_limit(limit),
                            Some("RLIMIT_DATA") => p.space.borrow_mut().set_data_limit(limit),
                            _ => {}
                        }
                    }
                }
                return Ok(());
            }
            _ => {}
        }
        if !is_memory_call(name) || !self.memory_calls_apply(no) {
            return Ok(());
        }
        // A call that failed changes nothing, except mprotect and madvise
        // over holes, which Linux applies in part before failing.
        let failed = match ret {
            Ret::Error(e) => Some(e),
            Ret::Unknown => return Ok(()),
            Ret::Value(_) => None,
        };
        let space = Rc::clone(&self.procs[&pid].space);
        // Calls whose ENOMEM may come after a partial change that Linux
        // keeps. A lock's may also be the process's RLIMIT_MEMLOCK, which
        // the model does not know and which changes nothing: a failed lock
        // is replayed only if the model fails it too (a hole, or a page it
        // cannot fault in, after which Linux keeps the locks), or if the
        // range holds pages the model cannot tell faultable (files of
        // unknown size; VMAs that may hold guard pages, which a space read
        // from a maps snapshot does not know).
        // A seal refuses an munmap (which may leave a cut, as the model
        // does), an mprotect or an madvise after it changed what came
        // before the sealed VMA.
        let sealed = failed == Some("EPERM") && matches!(name, "munmap" | "mprotect" | "pkey_mprotect" | "madvise");
        // A file's mmap refusing MAP_SYNC (off DAX) after a MAP_FIXED has
        // unmapped the range leaves a hole.
        let synced = failed == Some("EOPNOTSUPP")
            && matches!(name, "mmap" | "mmap2")
            && num(3, names::MAP)? & u64::from((MapFlags::FIXED | MapFlags::SYNC).bits())
                == u64::from((MapFlags::FIXED | MapFlags::SYNC).bits());
        let partial = sealed
            || synced
            || failed == Some("ENOMEM")
                && match name {
                    "mprotect" | "pkey_mprotect" | "madvise" | "munlock" => true,
                    // A fixed mapping refused by RLIMIT_AS leaves the VMAs
                    // it would replace cut: replayed where the model, which
                    // then knows the limit, refuses it too.
                    "mmap" | "mmap2" if num(3, names::MAP)? & u64::from(MapFlags::FIXED.bits()) != 0 => {
                        let (addr, len, prot) = (num(0, &[])?, num(1, &[])?, num(2, names::PROT)?);
                        let flags = MapFlags::from_bits_retain(num(3, names::MAP)? as u32);
                        let anon = flags.contains(MapFlags::ANONYMOUS);
                        let mut trial = space.borrow().clone();
                        anon && trial.layout().as_limit != u64::MAX
                            && trial.mmap(addr, len, Prot::from_bits_retain(prot as u32), flags, None, 0)
                                == Err(Errno::ENOMEM)
                    }
                    "mlock" | "mlock2" => {
                        let flags = if name == "mlock2" { num(2, names::MLOCK)? as u32 } else { 0 };
                        let (addr, len) = (num(0, &[])?, num(1, &[])?);
                        let mut trial = space.borrow().clone();
                        let unknown = trial.range(addr, addr.saturating_add(len)).any(|v| {
                            v.flags().contains(VmFlags::MAYBE_GUARD) || v.file().is_some_and(|f| f.size.is_none())
                        });
                        unknown || trial.mlock2(addr, len, MlockFlags::from_bits_retain(flags)).is_err()
                    }
                    _ => false,
                };
        if failed.is_some() && !partial {
            return Ok(());
        }
        // A segment made before the log began: its size is unknown.
        let segment = match name {
            "shmat" => match self.segments.get(&num(0, &[])?) {
                Some(&s) => Some(s),
                None if failed.is_some() => return Ok(()),
                None => {
                    let id = num(0, &[])?;
                    self.disagree(
                        no,
                        format!("shmat: segment {id} was made before the log began (its size is unknown)"),
                    );
                    return Ok(());
                }
            },
            _ => None,
        };
        let mut mm = space.borrow_mut();
        let result: Result<(), Errno> = match name {
            "mmap" | "mmap2" => {
                let at = match ret {
                    Ret::Value(at) => at,
                    // A failed fixed mapping (above), at its address.
                    _ => num(0, &[])? as i64,
                };
                let (len, prot, flags) = (num(1, &[])?, num(2, names::PROT)?, num(3, names::MAP)?);
                let off = num(5, &[])?.wrapping_mul(if name == "mmap2" { 4096 } else { 1 });
                let flags = MapFlags::from_bits_retain(flags as u32);
                // The kernel returns page-aligned addresses: one off this
                // layout's pages comes from a machine with smaller ones.
                if failed.is_none() && !mm.page_size().is_aligned(at as u64) && !self.misaligned {
                    self.misaligned = true;
                    let page = mm.page_size().bytes();
                    drop(mm);
                    self.disagree(
                        no,
                        format!("{name} returned {at:#x}, not on this layout's {page}-byte pages: the log comes from a machine with smaller pages (--layout)"),
                    );
                    return Ok(());
                }
                if flags.contains(MapFlags::ANONYMOUS | MapFlags::HUGETLB) && failed.is_none() {
                    drop(mm);
                    self.disagree(
                        no,
                        format!("{name}: MAP_HUGETLB succeeded: the machine had huge pages reserved (vm.nr_hugepages), which the model does not have; the mapping is left out"),
                    );
                    return Ok(());
                }
                let file = if flags.contains(MapFlags::ANONYMOUS) {
                    None
                } else {
                    let fd = num(4, &[])? as i64;
                    let dec = a.get(4).and_then(|s| decoration(s)).map(str::to_string);
                    Some(self.fd_file(pid, fd, dec))
                };
                // Where the kernel chose, or refused to replace, the range
                // was free: in the model too, or a call is out of order.
                let chosen = !flags.contains(MapFlags::FIXED) && failed.is_none();
                if chosen && mm.find_vma_intersection(at as u64, (at as u64).saturating_add(len)).is_some() {
                    drop(mm);
                    self.disagree(
                        no,
                        format!("{name}: the kernel placed it at {at:#x}, where the model has a mapping"),
                    );
                    return Ok(());
                }
                let flags = (flags - MapFlags::FIXED_NOREPLACE) | MapFlags::FIXED;
                mm.mmap(at as u64, len, Prot::from_bits_retain(prot as u32), flags, file, off).map(drop)
            }
            "munmap" => mm.munmap(num(0, &[])?, num(1, &[])?),
            "shmat" => {
                let (Ret::Value(at), Some(segment)) = (ret, segment) else { return Ok(()) };
                let mut flags = ShmFlags::from_bits_retain(num(2, names::SHM)? as u32);
                // Where the kernel placed it, if it chose.
                let addr = match num(1, &[])? {
                    0 => {
                        flags |= ShmFlags::REMAP;
                        at as u64
                    }
                    addr => addr,
                };
                mm.shmat(&segment, addr, flags).map(drop)
            }
            "shmdt" => mm.shmdt(num(0, &[])?),
            "mbind" => {
                let nodes = node_mask(a.get(3).copied().unwrap_or("NULL"))?;
                // The nodes the log's machine had memory on include those
                // a call it accepted used.
                if failed.is_none() {
                    mm.layout.numa_nodes |= nodes;
                }
                let (addr, len, mode) = (num(0, &[])?, num(1, &[])?, num(2, names::MPOL)? as u32);
                mm.mbind(addr, len, mode, nodes, MbindFlags::from_bits_retain(num(5, names::MPOL_MF)? as u32))
            }
            "remap_file_pages" => {
                let (start, size, prot) = (num(0, &[])?, num(1, &[])?, num(2, names::PROT)?);
                mm.remap_file_pages(start, size, prot, num(3, &[])?, num(4, names::MAP)?)
            }
            "process_madvise" => {
                // Only advice to the calling process changes this space;
                // another's takes none that changes mappings.
                let own = a.first().and_then(|s| decoration(s)).and_then(|d| d.strip_prefix("pid:"));
                let Some(target) = own.and_then(|p| p.parse::<u32>().ok()) else {
                    drop(mm);
                    self.disagree(
                        no,
                        "process_madvise: the log does not say which process the pidfd names (strace -yy shows it)"
                            .into(),
                    );
                    return Ok(());
                };
                let same = self.procs.get(&target).is_some_and(|p| Rc::ptr_eq(&p.space, &space));
                if !same {
                    return Ok(());
                }
                let ranges = iovecs(a.get(1).copied().unwrap_or(""))?;
                let flags = num(4, &[])?;
                match Advice::from_code(num(3, names::MADV)? as i32) {
                    Some(adv) => match (mm.process_madvise(&ranges, adv, flags), ret) {
                        (Ok(n), Ret::Value(k)) if n != k as u64 => {
                            drop(mm);
                            self.disagree(no, format!("process_madvise: the kernel advised {k} bytes, the model {n}"));
                            return Ok(());
                        }
                        (r, _) => r.map(drop),
                    },
                    None => Err(Errno::EINVAL),
                }
            }
            "mlock" => mm.mlock(num(0, &[])?, num(1, &[])?),
            "mlock2" => {
                let flags = MlockFlags::from_bits_retain(num(2, names::MLOCK)? as u32);
                mm.mlock2(num(0, &[])?, num(1, &[])?, flags)
            }
            "munlock" => mm.munlock(num(0, &[])?, num(1, &[])?),
            "mlockall" => mm.mlockall(MclFlags::from_bits_retain(num(0, names::MCL)? as u32)),
            "munlockall" => mm.munlockall(),
            "mseal" => mm.mseal(num(0, &[])?, num(1, &[])?, num(2, &[])?),
            "mprotect" | "pkey_mprotect" => {
                mm.mprotect(num(0, &[])?, num(1, &[])?, Prot::from_bits_retain(num(2, names::PROT)? as u32))
            }
            "madvise" => match Advice::from_code(num(2, names::MADV)? as i32) {
                Some(adv) => mm.madvise(num(0, &[])?, num(1, &[])?, adv),
                None => Err(Errno::EINVAL),
            },
            "mremap" => {
                let Ret::Value(to) = ret else { return Ok(()) };
                let (old, old_len, new_len) = (num(0, &[])?, num(1, &[])?, num(2, &[])?);
                let mut flags = MremapFlags::from_bits_retain(num(3, names::MREMAP)? as u32);
                let to = to as u64;
                let chosen = to != old && !flags.contains(MremapFlags::FIXED);
                if chosen && mm.find_vma_intersection(to, to.saturating_add(new_len)).is_some() {
                    drop(mm);
                    self.disagree(no, format!("mremap: the kernel moved it to {to:#x}, where the model has a mapping"));
                    return Ok(());
                }
                if to != old || flags.contains(MremapFlags::FIXED) || flags.contains(MremapFlags::DONTUNMAP) {
                    flags |= MremapFlags::MAYMOVE | MremapFlags::FIXED;
                } else {
                    flags.remove(MremapFlags::MAYMOVE);
                }
                mm.mremap(old, old_len, new_len, flags, to).map(drop)
            }
            "prctl" => {
                // Only PR_SET_VMA / PR_SET_VMA_ANON_NAME changes a mapping;
                // any other option (PR_SET_NAME, …) is none of our business.
                let is =
                    |i: usize, want: u64| a.get(i).is_some_and(|x| arg_value(x, names::PRCTL).is_ok_and(|v| v == want));
                if !is(0, names::PR_SET_VMA) || !is(1, 0) {
                    return Ok(());
                }
                let name = a.get(4).and_then(|s| arg_string(s));
                mm.set_anon_name(num(2, &[])?, num(3, &[])?, name.as_deref())
            }
            _ => return Ok(()),
        };
        drop(mm);
        self.stats.applied += 1;
        let key = Rc::as_ptr(&space);
        if self.unknown.contains(&key) {
            // A space only partly known (a new program's, whose image the
            // log does not show) is checked where the calls since made
            // every page known: what they mapped or unmapped.
            let page = space.borrow().page_size().bytes();
            let span = |s: u64, l: u64| (s & !(page - 1), s.saturating_add(l).saturating_add(page - 1) & !(page - 1));
            let known = self.known_ranges.entry(key).or_default();
            // The range the call names, for the calls that name one.
            let named = if names_range(name) { Some((num(0, &[])?, num(1, &[])?)) } else { None };
            let checked = named.is_some_and(|(s, l)| {
                let r = span(s, l);
                known.covers(r.0, r.1)
            });
            match (name, ret, named) {
                ("mmap" | "mmap2", Ret::Value(at), _) => {
                    let r = span(at as u64, num(1, &[])?);
                    known.add(r.0, r.1);
                }
                ("munmap", Ret::Value(_), Some((s, l))) => {
                    let r = span(s, l);
                    known.add(r.0, r.1);
                }
                ("mremap", Ret::Value(to), Some((s, l))) if to as u64 != s => {
                    let (old, new) = (span(s, l), span(to as u64, num(2, &[])?));
                    known.add(old.0, old.1);
                    known.add(new.0, new.1);
                }
                _ => {}
            }
            if !checked {
                return Ok(());
            }
        }
        let want = failed.map(|e| e.to_string());
        let got = result.err().map(|e| e.name().to_string());
        if got != want {
            let fmt = |r: &Option<String>| r.clone().unwrap_or_else(|| "success".into());
            self.disagree(no, format!("{name}: the kernel gave {}, the model {}", fmt(&want), fmt(&got)));
        }
        Ok(())
    }

    /// The open file behind `fd` in `pid`, made from strace's `-y`
    /// decoration if the log did not show it being opened.
    fn fd_file(&mut self, pid: u32, fd: i64, shown: Option<String>) -> Arc<MappedFile> {
        let files = Rc::clone(&self.procs[&pid].files);
        let known = files.borrow().get(&fd).cloned();
        let open = match known {
            Some(f) if shown.as_deref().is_none_or(|p| p == f.path) => f,
            _ => {
                let (path, resolved) = match shown {
                    Some(p) => (p, true),
                    None => (format!("fd {fd}"), false),
                };
                let f =
                    Rc::new(OpenFile { path, resolved, writable: true, id: None, mapped: std::cell::OnceCell::new() });
                files.borrow_mut().insert(fd, Rc::clone(&f));
                f
            }
        };
        if let Some(file) = open.mapped.get() {
            return Arc::clone(file);
        }
        let file = match open.id {
            Some((maj, min, ino)) => {
                let mut f = MappedFile::new(maj, min, ino, open.path.clone());
                f.writable = open.writable;
                Arc::new(f)
            }
            None => self.file_for(&open.path, open.resolved, open.writable),
        };
        Arc::clone(open.mapped.get_or_init(|| file))
    }

    /// Tells the replayer the device and inode of the file open as `fd` in
    /// `pid`, at `path` (the kernel's name for it, as `-y` shows it),
    /// before a line maps it: a live tracer reads them from the open
    /// descriptor, where a path cannot be looked up (a memfd, shmem, a
    /// file deleted since). An open file already mapped keeps what it
    /// has; an unknown pid is ignored.
    pub fn learn_fd(&mut self, pid: u32, fd: i64, path: &str, dev_major: u32, dev_minor: u32, inode: u64) {
        let Some(proc) = self.procs.get(&pid) else { return };
        let files = Rc::clone(&proc.files);
        let mut files = files.borrow_mut();
        let writable = match files.get(&fd) {
            Some(f) if f.path == path && (f.mapped.get().is_some() || f.id.is_some()) => return,
            Some(f) if f.path == path => f.writable,
            _ => true,
        };
        let id = Some((dev_major, dev_minor, inode));
        let open =
            OpenFile { path: path.to_string(), resolved: true, writable, id, mapped: std::cell::OnceCell::new() };
        files.insert(fd, Rc::new(open));
    }

    /// A new open file for `path`: its identity from the initial maps file
    /// if it is there, else from this machine's file system (looked up
    /// once per path), else unknown.
    fn file_for(&mut self, path: &str, resolved: bool, writable: bool) -> Arc<MappedFile> {
        let (path, id) = match self.known.get(path) {
            Some(&id) => (path.to_string(), Some(id)),
            None => {
                let log_only = self.opts.log_only;
                let next = self.lookups.len() as u64 + 1;
                let entry = self.lookups.entry(path.to_string()).or_insert_with(|| {
                    if log_only {
                        return (path.to_string(), Some((0, 0, next)));
                    }
                    // The kernel shows the file's resolved path (`/lib/…`
                    // opened through a symlink shows as `/usr/lib/…`).
                    match look_up(path, resolved) {
                        Some((resolved, id)) => (resolved, Some(id)),
                        None => (path.to_string(), None),
                    }
                });
                let (resolved, id) = entry.clone();
                let id = self.known.get(&resolved).copied().or(id);
                (resolved, id)
            }
        };
        let (maj, min, ino) = id.unwrap_or((0, 0, 0));
        let mut f = MappedFile::new(maj, min, ino, path);
        f.writable = writable;
        Arc::new(f)
    }

    fn brk_call(&mut self, no: usize, pid: u32, arg: u64, result: u64) {
        let entry = self.brk.entry(pid).or_insert((None, None));
        if entry.0.is_none() && arg == 0 {
            // The first brk(NULL) after exec: the heap's start.
            entry.0 = Some(result);
        }
        entry.1 = Some(result);
        if !self.applying(no) {
            return;
        }
        let space = Rc::clone(&self.procs[&pid].space);
        let mut mm = space.borrow_mut();
        if mm.brk_state().is_none() {
            let start = self.brk[&pid].0.unwrap_or(result);
            let _ = mm.set_brk_base(start);
            // The break before this call, if the log showed it.
            let cur = self.brk[&pid].1.unwrap_or(start);
            mm.brk(cur.max(start));
        }
        let got = mm.brk(arg);
        drop(mm);
        self.stats.applied += 1;
        if got != result && arg != 0 && !self.unknown.contains(&Rc::as_ptr(&space)) {
            self.disagree(no, format!("brk: the kernel set the break to {result:#x}, the model to {got:#x}"));
        }
    }

    fn spawn(&mut self, no: usize, parent: u32, child: u32, flags: u64) {
        let parent_space = Rc::clone(&self.procs[&parent].space);
        let shares = flags & (names::CLONE_VM | names::CLONE_THREAD) != 0;
        let owner = if shares { self.procs[&parent].owner } else { child };
        let borrowed = shares && flags & names::CLONE_THREAD == 0;
        let space = if shares {
            parent_space
        } else {
            let forked = parent_space.borrow().fork();
            let mut s = forked.unwrap_or_else(|e| {
                self.disagree(no, format!("fork failed in the model: {e}"));
                AddressSpace::with_layout(parent_space.borrow().layout().clone())
            });
            self.replaced(child, &AddressSpace::new(), &mut s);
            Rc::new(RefCell::new(s))
        };
        let parent_key = Rc::as_ptr(&self.procs[&parent].space);
        if self.unknown.contains(&parent_key) && !Rc::ptr_eq(&space, &self.procs[&parent].space) {
            // A fork's copy is known where its parent's was.
            let known = self.known_ranges.get(&parent_key).map(|r| Ranges(r.0.clone()));
            self.mark_unknown(&space);
            if let Some(k) = known {
                self.known_ranges.insert(Rc::as_ptr(&space), k);
            }
        }
        let p = &self.procs[&parent];
        let files = if flags & names::CLONE_FILES != 0 {
            Rc::clone(&p.files)
        } else {
            Rc::new(RefCell::new(p.files.borrow().clone()))
        };
        if let Some(b) = self.brk.get(&parent).copied() {
            self.brk.insert(child, b);
        }
        if !self.procs.contains_key(&child) {
            self.order.push(child);
        }
        self.procs.insert(child, Proc { space, files, owner, borrowed });
    }

    /// Ends the log: lines of pids never created go to the root's space.
    pub fn finish(mut self) -> Result<Replay, ReplayError> {
        // A call cut by a message and never continued: as it stands.
        if let Some((no, head, msg)) = self.partial.take() {
            self.feed(no, &head)?;
            self.feed(no, &msg)?;
        }
        self.clones_in_flight = 0;
        let mut deferred: Vec<(usize, String)> = self.deferred.drain().flat_map(|(_, v)| v).collect();
        deferred.sort_by_key(|d| d.0);
        for (n, l) in deferred {
            self.feed(n, &l)?;
            self.stats.lines -= 1;
        }
        self.flush_held()?;
        let threads = self
            .order
            .iter()
            .filter_map(|pid| {
                let p = &self.procs[pid];
                (p.owner != *pid && !p.borrowed && Rc::ptr_eq(&p.space, &self.procs.get(&p.owner)?.space))
                    .then_some((*pid, p.owner))
            })
            .collect();
        let mut seen: Vec<(*const RefCell<AddressSpace>, AddressSpace)> = Vec::new();
        let mut processes = Vec::new();
        for pid in &self.order {
            let space = &self.procs[pid].space;
            let key = Rc::as_ptr(space);
            let copy = match seen.iter().find(|(k, _)| *k == key) {
                Some((_, s)) => s.clone(),
                None => {
                    let s = space.borrow().clone();
                    seen.push((key, s.clone()));
                    s
                }
            };
            processes.push((*pid, copy));
        }
        // What the held-back lines changed, when recording.
        let changes = self.take_changes();
        Ok(Replay { processes, root: self.root, threads, stats: self.stats, changes })
    }
}

/// The path the kernel would show for `path` (`/lib/…` opened through a
/// symlink shows as `/usr/lib/…`) and the file's device and inode, looked
/// up on this machine. `None` for a relative path or a file that is not
/// here.
#[cfg(target_os = "linux")]
fn look_up(path: &str, resolved: bool) -> Option<(String, FileId)> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    if !path.starts_with('/') {
        return None;
    }
    if resolved {
        let m = std::fs::metadata(path).ok()?;
        return Some((path.to_string(), dev_ino(m.dev(), m.ino())));
    }
    // One walk of the path: open it without reading (`O_PATH` needs no
    // permission on the file), then ask the kernel for the name it keeps
    // (`realpath` would read every component's link separately).
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_PATH).open(path).ok()?;
    let m = f.metadata().ok()?;
    let resolved = {
        use std::os::fd::AsRawFd;
        std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd()))
            .ok()
            .and_then(|p| p.to_str().map(str::to_string))
            .or_else(|| std::fs::canonicalize(path).ok().and_then(|p| p.to_str().map(str::to_string)))?
    };
    Some((resolved, dev_ino(m.dev(), m.ino())))
}

#[cfg(all(unix, not(target_os = "linux")))]
fn look_up(path: &str, _resolved: bool) -> Option<(String, FileId)> {
    use std::os::unix::fs::MetadataExt;
    if !path.starts_with('/') {
        return None;
    }
    let resolved = std::fs::canonicalize(path).ok()?.to_str()?.to_string();
    let m = std::fs::metadata(&resolved).ok()?;
    Some((resolved, dev_ino(m.dev(), m.ino())))
}

#[cfg(not(unix))]
fn look_up(_: &str, _: bool) -> Option<(String, FileId)> {
    None
}

/// Major and minor device numbers (glibc's encoding of `dev_t`) and inode.
#[cfg(unix)]
fn dev_ino(dev: u64, ino: u64) -> FileId {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32, ino)
}

/// Replays a whole log (`lines` are the log's lines in order).
pub fn replay<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    opts: ReplayOptions,
    initial: Option<AddressSpace>,
) -> Result<Replay, ReplayError> {
    let mut r = Replayer::new(opts, initial);
    for (i, l) in lines.into_iter().enumerate() {
        r.feed(i + 1, l)?;
    }
    r.finish()
}

/// An `mbind` node mask as strace shows it: `NULL`, or the mask's words in
/// hex (`[0x00000000000003]`); nodes past 63 are not modelled.
fn node_mask(arg: &str) -> Result<u64, ParseError> {
    let arg = arg.trim();
    if arg == "NULL" {
        return Ok(0);
    }
    let words = arg
        .strip_prefix('[')
        .and_then(|a| a.strip_suffix(']'))
        .ok_or_else(|| ParseError(format!("not a node mask: {arg:?}")))?;
    if words.trim().is_empty() {
        return Ok(0);
    }
    let mut words = words.split(',').map(|w| arg_value(w, &[]));
    let first = words.next().transpose()?.unwrap_or(0);
    if words.any(|w| !matches!(w, Ok(0))) {
        return Err(ParseError(format!("nodes past 63 in {arg:?}")));
    }
    Ok(first)
}

/// The ranges of an iovec array as strace prints it:
/// `[{iov_base=0x7f…, iov_len=16384}, …]`.
fn iovecs(arg: &str) -> Result<Vec<(u64, u64)>, ParseError> {
    let field = |item: &str, name: &str| -> Result<u64, ParseError> {
        let at = item.find(name).ok_or_else(|| ParseError(format!("no {name} in {item:?}")))?;
        let rest = &item[at + name.len()..];
        let end = rest.find([',', '}']).unwrap_or(rest.len());
        arg_value(&rest[..end], &[])
    };
    arg.split("}, {")
        .filter(|item| item.contains("iov_base="))
        .map(|item| Ok((field(item, "iov_base=")?, field(item, "iov_len=")?)))
        .collect()
}

/// Disjoint ranges `[start, end)`, joined where they touch.
#[derive(Default)]
struct Ranges(Vec<(u64, u64)>);

impl Ranges {
    fn add(&mut self, s: u64, e: u64) {
        if s >= e {
            return;
        }
        // The ranges touching `[s, e)` are a run: joined into one.
        let lo = self.0.partition_point(|&(_, b)| b < s);
        let hi = self.0.partition_point(|&(a, _)| a <= e);
        let (s, e) = match self.0.get(lo..hi) {
            Some(run) if !run.is_empty() => (s.min(run[0].0), e.max(run[run.len() - 1].1)),
            _ => (s, e),
        };
        self.0.splice(lo..hi, [(s, e)]);
    }

    fn covers(&self, s: u64, e: u64) -> bool {
        let i = self.0.partition_point(|&(_, b)| b < e);
        s < e && self.0.get(i).is_some_and(|&(a, b)| a <= s && e <= b)
    }
}
