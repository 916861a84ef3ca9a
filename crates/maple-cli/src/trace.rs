//! `maple trace -- CMD`: run a command under `ptrace` and keep a model of
//! every address space it makes, from each program's real exec image.
//!
//! The tracee stops only on memory calls: a seccomp filter installed
//! before the command's `execve` sends those to the tracer
//! (`SECCOMP_RET_TRACE`) and lets everything else run at full speed, as
//! `strace --seccomp-bpf` does. At each memory call's exit the call and
//! the kernel's result are written as an strace line and fed to the
//! `Replayer`, which applies it (so a live trace and a replayed log go
//! through the same code); forks, clones and exits come from ptrace's
//! events, and at every exec the process's model is read from its
//! `/proc/PID` (`AddressSpace::from_pid`), so the exec image is exact.
//!
//! x86-64 only: the system call numbers and registers are in [`arch`];
//! another architecture plugs in there (its numbers, its
//! `user_regs_struct` fields, its `AUDIT_ARCH`).

use std::io::Write;

use crate::replay::Failure;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod gate;

/// Options of `maple trace`.
#[derive(Debug, Default)]
pub struct Args {
    /// The command and its arguments.
    pub cmd: Vec<String>,
    /// Compare the model with `/proc/PID/maps` after every N-th applied
    /// call (`Some(1)`: every call).
    pub verify: Option<u64>,
    /// Which process to print (default: the first one).
    pub pid: Option<u32>,
    /// Print every process.
    pub all: bool,
    /// Print the changes each call made (JSON lines) instead of the maps.
    pub json: bool,
    /// Also write the calls as an strace log `maple replay` reads.
    pub strace_log: Option<String>,
    /// Draw the address spaces over the trace into this SVG file.
    pub svg: Option<String>,
    /// Where maple's output goes (default: standard output, after the
    /// command has ended).
    pub output: Option<String>,
}

fn fail(msg: String) -> Failure {
    Failure { msg, code: 2 }
}

/// Runs `args.cmd` under the tracer, then prints what `args` asks for to
/// `out` (or `args.output`). Returns the exit status maple should end
/// with: the command's (`128 + N` if signal N killed it), or 1 if it
/// succeeded but `--verify` found a difference.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub fn run(args: &Args, out: &mut dyn Write) -> Result<u8, Failure> {
    live::run(args, out)
}

/// `maple trace` is not available here.
#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
pub fn run(_args: &Args, _out: &mut dyn Write) -> Result<u8, Failure> {
    Err(fail(
        "maple trace runs on Linux x86-64 only (another architecture needs its system call numbers and registers in trace.rs's arch module)"
            .into(),
    ))
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod arch {
    //! x86-64: system call numbers, the registers of a stopped tracee, the
    //! seccomp filter's architecture.

    /// The length of the mapping call `nr` (arguments `a`) placed where
    /// the kernel chose, if it did, at `ret`: an `mmap`, an `shmat` (its
    /// length unknown here: 0), an `mremap` that moved.
    pub fn placed(nr: u64, a: [u64; 6], ret: i64) -> Option<u64> {
        // The calls' numbers.
        const MMAP: u64 = 9;
        const MREMAP: u64 = 25;
        const SHMAT: u64 = 30;
        // (User addresses are below 2^63; errors are negative.)
        if ret <= 0 {
            return None;
        }
        match nr {
            MMAP => Some(a[1]),
            SHMAT => Some(0),
            MREMAP if ret as u64 != a[0] => Some(a[2]),
            _ => None,
        }
    }

    /// `AUDIT_ARCH_X86_64`: what `seccomp_data.arch` holds for a 64-bit
    /// call (32-bit calls through `int 0x80` are let through untraced).
    pub const AUDIT_ARCH: u32 = 0xc000_003e;

    /// The calls the tracer stops on, with their names.
    pub const MEMORY_CALLS: [(u64, &str); 20] = [
        (9, "mmap"),
        (10, "mprotect"),
        (11, "munmap"),
        (12, "brk"),
        (25, "mremap"),
        (28, "madvise"),
        (29, "shmget"),
        (30, "shmat"),
        (67, "shmdt"),
        (149, "mlock"),
        (150, "munlock"),
        (151, "mlockall"),
        (152, "munlockall"),
        (157, "prctl"),
        (216, "remap_file_pages"),
        (237, "mbind"),
        (325, "mlock2"),
        (329, "pkey_mprotect"),
        (440, "process_madvise"),
        (462, "mseal"),
    ];

    /// `clone`, `fork`, `vfork`, `clone3`: they stop too, since a fork
    /// copies the space and so is ordered with the calls that change it.
    pub const CLONE: u64 = 56;
    pub const FORK: u64 = 57;
    pub const VFORK: u64 = 58;
    pub const CLONE3: u64 = 435;
    pub const FORKS: [u64; 4] = [CLONE, FORK, VFORK, CLONE3];
    /// `CLONE_VM`: the child shares the address space (a thread, a vfork).
    pub const CLONE_VM: u64 = 0x100;

    /// A stopped tracee's call: its number, arguments and (at its exit)
    /// result.
    pub fn call(r: &libc::user_regs_struct) -> (u64, [u64; 6], i64) {
        (r.orig_rax, [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9], r.rax as i64)
    }
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod live {
    use std::{
        collections::{HashMap, HashSet},
        fs::File,
        io::{BufWriter, Write},
        os::unix::process::CommandExt,
        process::Command,
        time::{Duration, Instant},
    };

    use maple_mm::{
        strace::{ReplayOptions, Replayer},
        AddressSpace, Errno, PAGE_SIZE,
    };
    use nix::{
        errno::Errno as NixErrno,
        sys::{
            ptrace::{self, Event, Options},
            signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal},
            wait::{waitpid, WaitPidFlag, WaitStatus},
        },
        unistd::Pid,
    };

    use super::{arch, fail, gate::Gate, Args};
    use crate::replay::Failure;

    /// Installs the seccomp filter in the process about to exec the
    /// command: memory calls of the native architecture stop for the
    /// tracer, everything else runs.
    fn install_filter() -> std::io::Result<()> {
        const RET_ALLOW: u32 = 0x7fff_0000;
        const RET_TRACE: u32 = 0x7ff0_0000;
        let stmt = |code: u32, k: u32| libc::sock_filter { code: code as u16, jt: 0, jf: 0, k };
        let jump = |k: u32, jt: u8, jf: u8| libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt,
            jf,
            k,
        };
        let load = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
        let ret = libc::BPF_RET | libc::BPF_K;
        let traced: Vec<u64> = arch::MEMORY_CALLS.iter().map(|c| c.0).chain(arch::FORKS).collect();
        let n = traced.len();
        // seccomp_data: `nr` at offset 0, `arch` at 4.
        let mut prog = vec![stmt(load, 4), jump(arch::AUDIT_ARCH, 1, 0), stmt(ret, RET_ALLOW), stmt(load, 0)];
        for (i, nr) in traced.iter().enumerate() {
            // To the trace return after the last comparison.
            let to_trace = (n - i) as u8;
            prog.push(jump(*nr as u32, to_trace, 0));
        }
        prog.push(stmt(ret, RET_ALLOW));
        prog.push(stmt(ret, RET_TRACE));
        let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_mut_ptr() };
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fprog` points at `prog`, a valid BPF program of `len`
        // instructions, both alive across the call (the kernel copies it).
        if unsafe { libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &fprog as *const libc::sock_fprog) }
            != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Why `ptrace` was refused, and what to do.
    fn ptrace_refused(e: &std::io::Error) -> String {
        let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").ok();
        let why = match scope.as_deref().map(str::trim) {
            Some("3") => "Yama's ptrace_scope is 3, which forbids all tracing until reboot".to_string(),
            Some("2") => "Yama's ptrace_scope is 2: only a process with CAP_SYS_PTRACE may trace (run maple as root, or set kernel.yama.ptrace_scope to 1)".to_string(),
            _ => "in a container this needs CAP_SYS_PTRACE and a seccomp profile that allows ptrace (docker run --cap-add SYS_PTRACE)".to_string(),
        };
        format!("ptrace refused ({e}): {why}")
    }

    /// A maps file without what a tracer cannot know (see
    /// [`unseen_removed`](crate::maps::unseen_removed)).
    fn normalized(maps: &str) -> Vec<String> {
        maps.lines().map(crate::maps::unseen_removed).collect()
    }

    /// A thread being traced.
    struct Tracee {
        /// The call it stopped in (number, arguments), until its exit:
        /// held or running (see [`Gate`]).
        call: Option<(u64, [u64; 6])>,
        /// Its address space, numbered by the tracer (a `CLONE_VM` clone
        /// shares its parent's; a fork or an exec makes a new one).
        mm: u64,
        /// Its `/proc/PID/pagemap`, open from its first use to its next
        /// exec (the file reads the space it was opened on).
        pagemap: Option<File>,
    }

    impl Tracee {
        fn new(mm: u64) -> Tracee {
            Tracee { call: None, mm, pagemap: None }
        }
    }

    /// How long a call may run, asleep, while it holds other threads of
    /// its space (see [`gate`](super::gate)).
    const ASLEEP: Duration = Duration::from_millis(100);

    struct Tracer<'a> {
        replayer: Replayer,
        tracees: HashMap<Pid, Tracee>,
        /// Which calls may run: one per space.
        gate: Gate,
        /// The last space number given.
        spaces: u64,
        /// Calls that slept while holding others, with what they held.
        asleep: Vec<String>,
        /// New threads that stopped before their parent's fork event named
        /// them, held until it does; and those it named that have not
        /// stopped yet.
        early: HashSet<Pid>,
        expected: HashSet<Pid>,
        line: usize,
        log: Option<BufWriter<File>>,
        args: &'a Args,
        applied: u64,
        verified: u64,
        skipped: u64,
        /// Bytes the model wrote as the live process had (a page per VMA).
        synced: u64,
        /// Comparisons equal but for files unlinked since they were mapped.
        deleted: u64,
        /// A call not to apply (`MAPLE_TRACE_DROP_CALL`, for tests).
        drop: Option<u64>,
        divergences: Vec<String>,
        events: Vec<String>,
        /// With `--svg`: the spaces sampled as the trace goes.
        timeline: crate::picture::Timeline,
    }

    impl Tracer<'_> {
        /// Numbers the next line of the event log, `line`, and writes it to
        /// the strace log if one is kept.
        fn next_line(&mut self, line: &str) -> Result<usize, Failure> {
            self.line += 1;
            if let Some(log) = &mut self.log {
                writeln!(log, "{line}")
                    .map_err(|e| fail(format!("cannot write the strace log: {}", crate::io_reason(&e))))?;
            }
            Ok(self.line)
        }

        /// With `--json`: the changes the replayer recorded, as JSON lines.
        fn collect_events(&mut self) {
            if self.args.json {
                for c in self.replayer.take_changes() {
                    self.events.push(crate::replay::change_json(&c).to_string());
                }
            }
        }

        /// Feeds one strace line for `pid` (and logs it).
        fn feed(&mut self, pid: Pid, text: &str) -> Result<(), Failure> {
            let line = format!("{pid} {text}");
            let no = self.next_line(&line)?;
            self.replayer.feed(no, &line).map_err(|e| fail(format!("event log line {}: {}", e.line, e.msg)))?;
            self.collect_events();
            if self.args.svg.is_some() {
                // (A process that appeared or exited: drawn, however brief.)
                self.timeline.sample_if(false, self.line, &self.replayer, self.args.pid);
            }
            Ok(())
        }

        /// Brings the model's written pages in `windows` of `pid`'s space
        /// up to the live process's (see `AddressSpace::sync_written`):
        /// faults are not calls, and a written VMA merges differently.
        fn sync_written(&mut self, pid: Pid, windows: &[(u64, u64)]) {
            if windows.is_empty() {
                return;
            }
            let Some(tracee) = self.tracees.get_mut(&pid) else { return };
            let name = format!("/proc/{pid}/pagemap");
            if tracee.pagemap.is_none() {
                tracee.pagemap = File::open(&name).ok();
            }
            let Some(pagemap) = &tracee.pagemap else { return };
            let Some(mut mm) = self.replayer.space_mut(pid.as_raw() as u32) else { return };
            for &(s, e) in windows {
                if let Ok(n) = mm.sync_written_from(pagemap, &name, s, e) {
                    self.synced += n;
                }
            }
        }

        /// The ranges whose VMAs' written pages memory call `nr` of `pid`
        /// depends on, from its arguments (before it runs): its range and
        /// a page either side, whose VMAs it may merge with. An `munmap`
        /// merges nothing and what it unmaps whole is gone: only the VMAs
        /// it cuts matter, each by a page beside the cut.
        fn windows(&self, pid: Pid, nr: u64, a: [u64; 6]) -> Vec<(u64, u64)> {
            let name = arch::MEMORY_CALLS.iter().find(|(n, _)| *n == nr).map_or("", |c| c.1);
            const MAP_FIXED: u64 = 0x10;
            const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
            match name {
                "munmap" => {
                    let (s, e) = (a[0] & !(PAGE_SIZE - 1), a[0].saturating_add(a[1]));
                    let Some(mm) = self.replayer.space(pid.as_raw() as u32) else { return Vec::new() };
                    let mut cut = Vec::new();
                    for v in mm.range(s, e) {
                        if v.start() < s {
                            cut.push((s - PAGE_SIZE, s));
                        }
                        if v.end() > e {
                            cut.push((e, e.saturating_add(PAGE_SIZE)));
                        }
                    }
                    cut
                }
                "mmap" if a[3] & (MAP_FIXED | MAP_FIXED_NOREPLACE) != 0 => vec![around(a[0], a[1])],
                "mprotect" | "pkey_mprotect" | "madvise" | "mlock" | "munlock" | "mlock2" | "mseal" | "mbind"
                | "remap_file_pages" => vec![around(a[0], a[1])],
                "mremap" => vec![around(a[0], a[1]), around(a[4], a[2])],
                "prctl" => vec![around(a[2], a[3])],
                _ => Vec::new(),
            }
        }

        /// Tells the replayer the device and inode of `pid`'s open file
        /// `fd`, read from the descriptor itself: a memfd, shmem or a file
        /// deleted since has no path to look them up by.
        fn learn_fd(&mut self, pid: Pid, fd: i32) {
            use std::os::unix::fs::MetadataExt;
            if fd < 0 {
                return;
            }
            let link = format!("/proc/{pid}/fd/{fd}");
            let (Ok(path), Ok(meta)) = (std::fs::read_link(&link), std::fs::metadata(&link)) else { return };
            let dev = meta.dev();
            // Linux's encoding of a device number (`MAJOR`, `MINOR`).
            let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
            let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
            let path = path.to_string_lossy();
            self.replayer.learn_fd(pid.as_raw() as u32, i64::from(fd), &path, major as u32, minor as u32, meta.ino());
        }

        /// A word of the tracee's memory.
        fn word(pid: Pid, addr: u64) -> Option<u64> {
            ptrace::read(pid, addr as ptrace::AddressType).ok().map(|w| w as u64)
        }

        /// A NUL-terminated string of the tracee's memory (at most 256 bytes).
        fn string(pid: Pid, addr: u64) -> Option<String> {
            let mut bytes = Vec::new();
            for i in 0..32 {
                let w = Self::word(pid, addr + 8 * i)?;
                for b in w.to_le_bytes() {
                    if b == 0 {
                        return Some(String::from_utf8_lossy(&bytes).into_owned());
                    }
                    bytes.push(b);
                }
            }
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }

        /// The strace line of memory call `nr` with `a` and result `ret`,
        /// or `None` for one that changes no mapping (a `prctl` other than
        /// `PR_SET_VMA`).
        fn call_line(pid: Pid, nr: u64, a: [u64; 6], ret: i64) -> Option<String> {
            let name = arch::MEMORY_CALLS.iter().find(|(n, _)| *n == nr)?.1;
            let ptr = |v: u64| if v == 0 { "NULL".to_string() } else { format!("{v:#x}") };
            let args = match name {
                "mmap" => {
                    let fd = a[4] as i32;
                    let dec = if fd >= 0 {
                        std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
                            .map(|p| format!("<{}>", p.display()))
                            .unwrap_or_default()
                    } else {
                        String::new()
                    };
                    format!("{}, {}, {:#x}, {:#x}, {fd}{dec}, {:#x}", ptr(a[0]), a[1], a[2], a[3], a[5])
                }
                "mprotect" | "madvise" | "mlock2" | "mseal" => format!("{}, {}, {:#x}", ptr(a[0]), a[1], a[2]),
                "pkey_mprotect" => format!("{}, {}, {:#x}, {}", ptr(a[0]), a[1], a[2], a[3] as i32),
                "munmap" | "mlock" | "munlock" => format!("{}, {}", ptr(a[0]), a[1]),
                "brk" | "shmdt" => ptr(a[0]),
                "mremap" => format!("{}, {}, {}, {:#x}, {}", ptr(a[0]), a[1], a[2], a[3], ptr(a[4])),
                // As strace prints them: the mode in C's octal, the flags
                // by number.
                "shmget" => format!("{}, {}, 0{:o}", a[0] as i32, a[1], a[2]),
                "shmat" => format!("{}, {}, {:#x}", a[0] as i32, ptr(a[1]), a[2]),
                "mlockall" => format!("{:#x}", a[0]),
                "remap_file_pages" => format!("{}, {}, {:#x}, {}, {:#x}", ptr(a[0]), a[1], a[2], a[3], a[4]),
                "process_madvise" => {
                    // The process the pidfd names, as `strace -yy` shows it.
                    let fdinfo =
                        std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", a[0] as i32)).unwrap_or_default();
                    let target = fdinfo.lines().find_map(|l| l.strip_prefix("Pid:")).map(str::trim);
                    let dec = target.map(|t| format!("<pid:{t}>")).unwrap_or_default();
                    // (The kernel takes at most UIO_MAXIOV ranges.)
                    let iov: Vec<String> = (0..a[2].min(1024))
                        .map_while(|i| {
                            let base = Self::word(pid, a[1] + 16 * i)?;
                            let len = Self::word(pid, a[1] + 16 * i + 8)?;
                            Some(format!("{{iov_base={base:#x}, iov_len={len}}}"))
                        })
                        .collect();
                    format!("{}{dec}, [{}], {}, {:#x}, {:#x}", a[0] as i32, iov.join(", "), a[2], a[3], a[4])
                }
                "munlockall" => String::new(),
                "prctl" => {
                    const PR_SET_VMA: u64 = 0x5356_4d41;
                    if a[0] != PR_SET_VMA || a[1] != 0 {
                        return None;
                    }
                    let name = if a[4] == 0 {
                        "NULL".to_string()
                    } else {
                        let s = Self::string(pid, a[4]).unwrap_or_default();
                        format!("{s:?}")
                    };
                    format!("{PR_SET_VMA:#x}, 0, {}, {}, {name}", ptr(a[2]), a[3])
                }
                "mbind" => {
                    let mask = if a[3] == 0 {
                        "NULL".to_string()
                    } else {
                        format!("[{:#x}]", Self::word(pid, a[3]).unwrap_or(0))
                    };
                    format!("{}, {}, {}, {mask}, {}, {:#x}", ptr(a[0]), a[1], a[2], a[4], a[5])
                }
                _ => return None,
            };
            let ret = if (-4095..0).contains(&ret) {
                let code = (-ret) as i32;
                let e = Errno::name_of(code).map_or_else(|| format!("E{code}"), str::to_string);
                format!("-1 {e} ({})", NixErrno::from_raw(code).desc())
            } else if matches!(name, "mmap" | "mremap" | "brk" | "shmat") {
                format!("{ret:#x}")
            } else {
                ret.to_string()
            };
            Some(format!("{name}({args}) = {ret}"))
        }

        /// Compares `pid`'s model with its `/proc/PID/maps`.
        fn verify(&mut self, pid: Pid) {
            let Some(every) = self.args.verify else { return };
            if self.applied % every.max(1) != 0 {
                return;
            }
            // The gate runs one call per space: every other thread of the
            // space runs code that changes no mapping or is held before its
            // call, unless a call slept and the space was let loose.
            if !self.gate.alone(pid.as_raw()) {
                self.skipped += 1;
                return;
            }
            let Ok(kernel) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else { return };
            let Some(model) = self.replayer.space(pid.as_raw() as u32).map(|s| s.maps()) else { return };
            self.verified += 1;
            if model == kernel {
                return;
            }
            if normalized(&model) == normalized(&kernel) {
                self.deleted += 1;
                return;
            }
            let (k, m): (Vec<&str>, Vec<&str>) = (kernel.lines().collect(), model.lines().collect());
            let first = k.iter().zip(&m).position(|(a, b)| a != b).unwrap_or(k.len().min(m.len()));
            let around = |v: &[&str]| {
                v[first.saturating_sub(2)..(first + 3).min(v.len())]
                    .iter()
                    .map(|l| format!("    {l}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            self.divergences.push(format!(
                "after event log line {} (pid {pid}), maps line {}:\n  /proc/{pid}/maps:\n{}\n  model:\n{}",
                self.line,
                first + 1,
                around(&k),
                around(&m)
            ));
        }

        /// A fork, vfork or clone event of `pid` that made `child`.
        fn forked(&mut self, pid: Pid, child: Pid) -> Result<(), Failure> {
            let regs = ptrace::getregs(pid).map_err(|e| fail(format!("cannot read pid {pid}'s registers: {e}")))?;
            let (nr, a, _) = arch::call(&regs);
            let flags = Self::clone_flags(pid, nr, a);
            let text = match nr {
                arch::FORK => format!("fork() = {child}"),
                arch::VFORK => format!("vfork() = {child}"),
                _ => format!("clone(child_stack=NULL, flags={flags:#x}) = {child}"),
            };
            if flags & arch::CLONE_VM == 0 {
                // The child inherits the anon_vma of every VMA written by
                // the fork, which decides its merges: the parent's pages
                // as the fork left them (it is stopped here) say which.
                self.sync_written(pid, &[(0, u64::MAX)]);
            }
            self.feed(pid, &text)?;
            let mm = match self.tracees.get(&pid) {
                Some(t) if flags & arch::CLONE_VM != 0 => t.mm,
                _ => self.new_space(),
            };
            self.tracees.insert(child, Tracee::new(mm));
            if self.early.remove(&child) {
                let _ = ptrace::cont(child, None);
            } else {
                self.expected.insert(child);
            }
            Ok(())
        }

        /// A number for a new address space.
        fn new_space(&mut self) -> u64 {
            self.spaces += 1;
            self.spaces
        }

        /// The flags of the fork-like call `nr` with `a` (`CLONE_VM`
        /// among them for a thread or a vfork).
        fn clone_flags(pid: Pid, nr: u64, a: [u64; 6]) -> u64 {
            match nr {
                arch::FORK => 0,
                arch::VFORK => arch::CLONE_VM,
                // (`clone3` passes its flags first in a structure.)
                arch::CLONE3 => Self::word(pid, a[0]).unwrap_or(0),
                _ => a[0],
            }
        }

        /// `pid` stopped at the entry of call `nr` (its seccomp stop): it
        /// runs now, or waits at the gate while its space runs another.
        fn entered(&mut self, pid: Pid, nr: u64, a: [u64; 6]) {
            if arch::FORKS.contains(&nr) && Self::clone_flags(pid, nr, a) & arch::CLONE_VM != 0 {
                // A thread or a vfork copies nothing: it needs no turn.
                let _ = ptrace::cont(pid, None);
                return;
            }
            let Some(tracee) = self.tracees.get_mut(&pid) else {
                let _ = ptrace::cont(pid, None);
                return;
            };
            tracee.call = Some((nr, a));
            if self.gate.enter(pid.as_raw(), tracee.mm, Instant::now()) {
                self.start(pid);
            }
        }

        /// Lets `pid`'s call run (to its exit stop), and whatever the gate
        /// lets run after it if `pid` is gone.
        fn start(&mut self, pid: Pid) {
            let mut next = Some(pid);
            while let Some(pid) = next.take() {
                let call = self.tracees.get(&pid).and_then(|t| t.call);
                if let Some((nr, a)) = call {
                    let windows = self.windows(pid, nr, a);
                    self.sync_written(pid, &windows);
                }
                if call.is_none() || ptrace::syscall(pid, None).is_err() {
                    next = self.gate.leave(pid.as_raw(), Instant::now()).map(Pid::from_raw);
                }
            }
        }

        /// `pid`'s call has ended, or `pid` is gone: the next held call of
        /// its space runs.
        fn left(&mut self, pid: Pid) {
            if let Some(tracee) = self.tracees.get_mut(&pid) {
                tracee.call = None;
            }
            if let Some(next) = self.gate.leave(pid.as_raw(), Instant::now()) {
                self.start(Pid::from_raw(next));
            }
        }

        /// Lets loose the spaces whose running call has slept past
        /// [`ASLEEP`] with other threads held behind it.
        fn wake_held(&mut self) {
            for tid in self.gate.overdue(Instant::now(), ASLEEP) {
                let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).unwrap_or_default();
                // The state follows the command's name in parentheses.
                let state = stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
                if !matches!(state, Some('S' | 'D')) {
                    continue;
                }
                let name = self
                    .tracees
                    .get(&Pid::from_raw(tid))
                    .and_then(|t| t.call)
                    .and_then(|(nr, _)| Self::name_of(nr))
                    .unwrap_or("?");
                let held = self.gate.loosen(tid);
                self.asleep.push(format!(
                    "thread {tid}'s {name} slept over {} ms with {} thread(s) of its space held: they ran at once, applied in the order they returned",
                    ASLEEP.as_millis(),
                    held.len()
                ));
                for h in held {
                    self.start(Pid::from_raw(h));
                }
            }
        }

        /// The name of call `nr`.
        fn name_of(nr: u64) -> Option<&'static str> {
            match nr {
                arch::CLONE => Some("clone"),
                arch::FORK => Some("fork"),
                arch::VFORK => Some("vfork"),
                arch::CLONE3 => Some("clone3"),
                _ => arch::MEMORY_CALLS.iter().find(|(n, _)| *n == nr).map(|c| c.1),
            }
        }

        /// `pid` has just exec'd: its model is read from /proc.
        fn execd(&mut self, pid: Pid) -> Result<(), Failure> {
            if let Some(t) = self.tracees.get_mut(&pid) {
                t.pagemap = None;
            }
            let space = AddressSpace::from_pid(pid.as_raw() as u32)
                .map_err(|e| Failure { msg: format!("cannot read pid {pid}'s maps at its exec: {e}"), code: 1 })?;
            // (A log read back starts this process empty here: see the docs.)
            let no = self.next_line(&format!("{pid} execve(\"?\", [], NULL) = 0"))?;
            self.replayer.exec_with(no, pid.as_raw() as u32, space);
            self.collect_events();
            Ok(())
        }
    }

    /// The range a call on `[start, start + len)` may merge across: the
    /// range and a page either side, from page boundaries.
    fn around(start: u64, len: u64) -> (u64, u64) {
        (start.saturating_sub(PAGE_SIZE) & !(PAGE_SIZE - 1), start.saturating_add(len).saturating_add(PAGE_SIZE))
    }

    /// The next stop of any tracee. A tracee that makes memory calls one
    /// after another stops again within microseconds: the tracer polls
    /// for up to `spin` before it sleeps, since waking a sleeping CPU for
    /// every stop (an interrupt, and on a virtual machine an exit to the
    /// host) costs more than the call.
    fn next_stop(spin: Duration) -> nix::Result<WaitStatus> {
        let start = Instant::now();
        while start.elapsed() < spin {
            match waitpid(None, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
                // (A yield, not a spin: a tracee waiting for this CPU runs.)
                Ok(WaitStatus::StillAlive) => std::thread::yield_now(),
                other => return other,
            }
        }
        waitpid(None, Some(WaitPidFlag::__WALL))
    }

    /// How long [`next_stop`] polls: 50 µs where the tracer has a CPU of
    /// its own to poll on; where it shares one with its tracees, polling
    /// would only keep them from running.
    fn spin() -> Duration {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus > 1 {
            Duration::from_micros(50)
        } else {
            Duration::ZERO
        }
    }

    /// A timer that interrupts the tracer's `waitpid` every few
    /// milliseconds while the gate holds a thread, so that a call asleep
    /// past [`ASLEEP`] is seen even when no other event comes.
    struct Alarm {
        armed: bool,
    }

    impl Alarm {
        fn new() -> Alarm {
            extern "C" fn wake(_: libc::c_int) {}
            // No SA_RESTART: the signal ends a waiting `waitpid` with EINTR.
            let action = SigAction::new(SigHandler::Handler(wake), SaFlags::empty(), SigSet::empty());
            // SAFETY: the handler does nothing, so it is async-signal-safe
            // and touches no state.
            let _ = unsafe { sigaction(Signal::SIGALRM, &action) };
            Alarm { armed: false }
        }

        /// Arms (every 20 ms) or disarms the timer.
        fn set(&mut self, on: bool) {
            if on == self.armed {
                return;
            }
            self.armed = on;
            let every = libc::timeval { tv_sec: 0, tv_usec: if on { 20_000 } else { 0 } };
            let timer = libc::itimerval { it_interval: every, it_value: every };
            // SAFETY: `timer` is a valid itimerval for the call's duration;
            // a null old value is allowed.
            unsafe { libc::setitimer(libc::ITIMER_REAL, &timer, std::ptr::null_mut()) };
        }
    }

    impl Drop for Alarm {
        fn drop(&mut self) {
            self.set(false);
        }
    }

    pub(super) fn run(args: &Args, out: &mut dyn Write) -> Result<u8, Failure> {
        let Some((prog, rest)) = args.cmd.split_first() else { return Err(fail("no command given".into())) };
        // Every output file is refused before the command runs.
        for path in [&args.svg, &args.output].into_iter().flatten() {
            crate::replay::writable(path)?;
        }
        let log = match &args.strace_log {
            Some(path) => Some(BufWriter::new(
                File::create(path).map_err(|e| fail(format!("cannot create {path}: {}", crate::io_reason(&e))))?,
            )),
            None => None,
        };
        let mut cmd = Command::new(prog);
        cmd.args(rest);
        // Ctrl-C is the command's to handle (it reaches it as a signal the
        // tracer passes on); maple ends when the command does, and prints.
        // SAFETY: setting a signal's disposition to ignore installs no
        // handler; nothing else in maple relies on SIGINT.
        unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
        // SAFETY: between fork and exec the closure calls only ptrace,
        // prctl and signal, which are async-signal-safe, and allocates
        // the filter program (the child is a copy of a single-threaded
        // maple at this point, so the allocator's locks are free).
        unsafe {
            cmd.pre_exec(|| {
                // An ignored signal stays ignored across exec: the
                // command gets Ctrl-C's default back.
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                ptrace::traceme().map_err(std::io::Error::from)?;
                install_filter()
            });
        }
        let child = cmd.spawn().map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM) => fail(ptrace_refused(&e)),
            _ => fail(format!("cannot run {prog}: {}", crate::io_reason(&e))),
        })?;
        let root = Pid::from_raw(child.id() as i32);
        let mut t = Tracer {
            replayer: Replayer::new(ReplayOptions::default(), None),
            tracees: HashMap::new(),
            gate: Gate::default(),
            spaces: 0,
            asleep: Vec::new(),
            early: HashSet::new(),
            expected: HashSet::new(),
            line: 0,
            log,
            args,
            applied: 0,
            verified: 0,
            skipped: 0,
            synced: 0,
            deleted: 0,
            drop: std::env::var("MAPLE_TRACE_DROP_CALL").ok().and_then(|v| v.parse().ok()),
            divergences: Vec::new(),
            events: Vec::new(),
            timeline: crate::picture::Timeline::default(),
        };
        if args.json {
            t.replayer.record_changes();
        }
        // The command stops after its exec (PTRACE_TRACEME's SIGTRAP).
        match waitpid(root, Some(WaitPidFlag::__WALL)) {
            Ok(WaitStatus::Stopped(_, Signal::SIGTRAP)) => {}
            other => return Err(Failure { msg: format!("{prog} did not stop at its exec: {other:?}"), code: 1 }),
        }
        let opts = Options::PTRACE_O_TRACESYSGOOD
            | Options::PTRACE_O_TRACEFORK
            | Options::PTRACE_O_TRACEVFORK
            | Options::PTRACE_O_TRACECLONE
            | Options::PTRACE_O_TRACEEXEC
            | Options::PTRACE_O_TRACESECCOMP
            | Options::PTRACE_O_EXITKILL;
        ptrace::setoptions(root, opts).map_err(|e| fail(format!("cannot set ptrace options: {e}")))?;
        let mm = t.new_space();
        t.tracees.insert(root, Tracee::new(mm));
        t.execd(root)?;
        let _ = ptrace::cont(root, None);
        let mut status = 0u8;
        let mut alarm = Alarm::new();
        let spin = spin();
        loop {
            alarm.set(t.gate.holding());
            let ws = next_stop(spin);
            if t.gate.holding() {
                t.wake_held();
            }
            let ws = match ws {
                Ok(ws) => ws,
                Err(NixErrno::ECHILD) => break,
                Err(NixErrno::EINTR) => continue,
                Err(e) => return Err(Failure { msg: format!("waitpid: {e}"), code: 1 }),
            };
            match ws {
                WaitStatus::PtraceEvent(pid, _, ev) if ev == Event::PTRACE_EVENT_SECCOMP as i32 => {
                    match ptrace::getregs(pid) {
                        Ok(regs) => {
                            let (nr, a, _) = arch::call(&regs);
                            t.entered(pid, nr, a);
                        }
                        Err(_) => {
                            let _ = ptrace::cont(pid, None);
                        }
                    }
                }
                WaitStatus::PtraceSyscall(pid) => {
                    let mut continued = false;
                    let call = t.tracees.get(&pid).and_then(|tr| tr.call);
                    if let (Some((nr, a)), Ok(regs)) = (call, ptrace::getregs(pid)) {
                        let ret = arch::call(&regs).2;
                        // A mapping placed (or moved) where the kernel
                        // chose: its new neighbours decide its merges.
                        if let Some(len) = arch::placed(nr, a, ret) {
                            t.sync_written(pid, &[around(ret as u64, len)]);
                        }
                        if nr == 9 && ret >= 0 {
                            t.learn_fd(pid, a[4] as i32);
                        }
                        let text = Tracer::call_line(pid, nr, a, ret);
                        // Everything read from the stopped thread: without
                        // a comparison to make at this very point, it runs
                        // on while the model takes the call (its next
                        // memory call stops until this one is applied).
                        if args.verify.is_none() {
                            continued = ptrace::cont(pid, None).is_ok();
                        }
                        if let Some(text) = text {
                            t.applied += 1;
                            // The tests' proof that verification sees a
                            // lost call: the N-th is not applied.
                            if t.drop != Some(t.applied) {
                                t.feed(pid, &text)?;
                            }
                            t.verify(pid);
                            if args.svg.is_some() {
                                t.timeline.sample_if(t.applied % 16 == 0, t.line, &t.replayer, args.pid);
                            }
                        }
                    }
                    // Applied (and compared): the next call of the space runs.
                    t.left(pid);
                    if !continued {
                        let _ = ptrace::cont(pid, None);
                    }
                }
                WaitStatus::PtraceEvent(pid, _, ev)
                    if ev == Event::PTRACE_EVENT_FORK as i32
                        || ev == Event::PTRACE_EVENT_VFORK as i32
                        || ev == Event::PTRACE_EVENT_CLONE as i32 =>
                {
                    if let Ok(child) = ptrace::getevent(pid) {
                        t.forked(pid, Pid::from_raw(child as i32))?;
                    }
                    // The space is copied: the next call of it runs. (The
                    // fork's exit is not stopped at.)
                    t.left(pid);
                    let _ = ptrace::cont(pid, None);
                }
                WaitStatus::PtraceEvent(pid, _, ev) if ev == Event::PTRACE_EVENT_EXEC as i32 => {
                    // (A thread that exec'd took the leader's pid; the
                    // others are gone.)
                    if let Ok(former) = ptrace::getevent(pid) {
                        let former = Pid::from_raw(former as i32);
                        if former != pid {
                            t.left(former);
                            t.tracees.remove(&former);
                        }
                    }
                    // (The leader may have been held in the old space.)
                    t.left(pid);
                    let mm = t.new_space();
                    t.tracees.insert(pid, Tracee::new(mm));
                    t.execd(pid)?;
                    let _ = ptrace::cont(pid, None);
                }
                WaitStatus::PtraceEvent(pid, _, _) => {
                    let _ = ptrace::cont(pid, None);
                }
                WaitStatus::Stopped(pid, sig) => {
                    if !t.tracees.contains_key(&pid) && sig == Signal::SIGSTOP {
                        // A new thread's first stop.
                        if t.expected.remove(&pid) {
                            let _ = ptrace::cont(pid, None);
                        } else {
                            t.early.insert(pid);
                        }
                        continue;
                    }
                    if t.expected.remove(&pid) && sig == Signal::SIGSTOP {
                        let _ = ptrace::cont(pid, None);
                        continue;
                    }
                    // A signal for the command: delivered.
                    let _ = ptrace::cont(pid, sig);
                }
                WaitStatus::Exited(pid, code) => {
                    t.left(pid);
                    if t.tracees.remove(&pid).is_some() {
                        t.feed(pid, &format!("+++ exited with {code} +++"))?;
                    }
                    if pid == root {
                        status = code as u8;
                    }
                }
                WaitStatus::Signaled(pid, sig, _) => {
                    t.left(pid);
                    if t.tracees.remove(&pid).is_some() {
                        t.feed(pid, &format!("+++ killed by {} +++", sig.as_str()))?;
                    }
                    if pid == root {
                        status = 128 + sig as u8;
                    }
                }
                _ => {}
            }
        }
        if let Some(svg) = &args.svg {
            t.timeline.sample(t.line, &t.replayer, args.pid);
            crate::picture::draw(&t.timeline, svg, &args.cmd.join(" ")).map_err(|msg| Failure { msg, code: 1 })?;
            eprintln!("maple trace: wrote {svg}");
        }
        if let Some(mut log) = t.log.take() {
            log.flush().map_err(|e| fail(format!("cannot write the strace log: {}", crate::io_reason(&e))))?;
        }
        report(t, args, out, status)
    }

    /// The output, the verification's summary and maple's exit status.
    fn report(t: Tracer<'_>, args: &Args, out: &mut dyn Write, status: u8) -> Result<u8, Failure> {
        let io = |e: std::io::Error| Failure::output(&e);
        let mut file;
        let out: &mut dyn Write = match &args.output {
            Some(path) => {
                file = BufWriter::new(
                    File::create(path).map_err(|e| fail(format!("cannot create {path}: {}", crate::io_reason(&e))))?,
                );
                &mut file
            }
            None => out,
        };
        let Tracer { replayer, applied, verified, skipped, synced, deleted, divergences, events, asleep, .. } = t;
        let done =
            replayer.finish().map_err(|e| Failure { msg: format!("event log line {}: {}", e.line, e.msg), code: 1 })?;
        if args.json {
            for e in &events {
                writeln!(out, "{e}").map_err(io)?;
            }
            for c in &done.changes {
                writeln!(out, "{}", crate::replay::change_json(c)).map_err(io)?;
            }
        } else if args.all {
            // Processes, each once, its threads named under it.
            for (pid, space) in done.processes.iter().filter(|(pid, _)| done.process_of(*pid).is_none()) {
                writeln!(out, "# pid {pid}{}", crate::replay::threads_note(&done.threads_of(*pid))).map_err(io)?;
                write!(out, "{}", space.maps()).map_err(io)?;
            }
        } else {
            let pid = args.pid.or(done.root).unwrap_or(0);
            let space = done.space(pid).ok_or_else(|| fail(format!("pid {pid} is not in the trace")))?;
            write!(out, "{}", space.maps()).map_err(io)?;
        }
        out.flush().map_err(io)?;
        for d in done.stats.disagreements.iter().take(10) {
            eprintln!("maple trace: event log line {}: {}", d.line, d.msg);
        }
        if args.verify.is_some() {
            let loose = if skipped > 0 {
                format!(" ({skipped} not: their space was let loose while a call slept)")
            } else {
                String::new()
            };
            eprintln!(
                "maple trace: {applied} calls applied, the model compared with /proc after {verified}{loose}, {} difference(s); {} VMA(s) learned written from /proc/PID/pagemap (page faults are not calls)",
                divergences.len(),
                synced / PAGE_SIZE
            );
            for a in &asleep {
                eprintln!("maple trace: {a}");
            }
            if deleted > 0 {
                eprintln!("maple trace: {deleted} comparison(s) equal but for what a tracer cannot see: files unlinked after they were mapped (shown \"(deleted)\"), the kernel's inode numbers of shared anonymous memory");
            }
            for d in divergences.iter().take(3) {
                eprintln!("maple trace: {d}");
            }
            if !divergences.is_empty() && status == 0 {
                return Ok(1);
            }
        }
        Ok(status)
    }
}
