//! Replaying real strace logs: the recorded sample must agree page for page
//! with the maps snapshots the traced program took of itself.

mod common;

use common::{matching_lines, page_diff};
use maple_mm::{
    strace::{replay, ReplayOptions},
    AddressSpace,
};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/strace-sample");

fn read(name: &str) -> String {
    std::fs::read_to_string(format!("{DIR}/{name}")).unwrap()
}

/// The line of the `openat` of `/proc/self/maps` just before the snapshot
/// file `name` is opened (the README's rule).
fn snapshot_line(log: &str, name: &str) -> usize {
    let lines: Vec<&str> = log.lines().collect();
    let at = lines.iter().position(|l| l.contains(&format!("\"{name}\""))).expect("snapshot open");
    (0..at).rev().find(|&i| lines[i].contains("\"/proc/self/maps\"")).expect("maps read") + 1
}

fn pid_of(log: &str, line: usize) -> u32 {
    log.lines().nth(line - 1).unwrap().split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn the_sample_replays_page_for_page() {
    let log = read("sample.strace");
    let from = snapshot_line(&log, "sample.start.maps");
    let initial = AddressSpace::from_maps(&read("sample.start.maps"), "sample.start.maps").unwrap();
    for snap in ["sample.child.maps", "sample.end.maps"] {
        let to = snapshot_line(&log, snap);
        let pid = pid_of(&log, to);
        let opts = ReplayOptions { from: Some(from), to: Some(to), ..ReplayOptions::default() };
        let r = replay(log.lines(), opts, Some(initial.clone())).unwrap();
        let got = r.space(pid).unwrap().maps();
        let want = read(snap);
        let diff = page_diff(&want, &got);
        assert!(diff.is_empty(), "{snap}: pages differ:\n{}\n--- got:\n{got}", diff.join("\n"));
        // Lines match exactly but for files the log names and nothing
        // identifies (the data file: not in the start snapshot, not on this
        // machine), whose device and inode are unknown.
        let (same, total) = matching_lines(&want, &got);
        assert!(
            same * 100 >= total * 95,
            "{snap}: {same} of {total} lines match exactly\n--- want:\n{want}--- got:\n{got}"
        );
        assert!(r.stats.disagreements.is_empty(), "{:?}", r.stats.disagreements);
        assert!(r.stats.applied >= 10);
    }
}

#[test]
fn malformed_lines_are_errors_or_skipped() {
    let log = "1 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10000000\n1 mmap(NULL, 4096\n1 munmap(0x10000000, 4096) = 0\n";
    let e = replay(log.lines(), ReplayOptions::default(), None).unwrap_err();
    assert_eq!(e.line, 2);
    let r = replay(log.lines(), ReplayOptions { lenient: true, ..Default::default() }, None).unwrap();
    assert_eq!(r.stats.skipped, 1);
    assert_eq!(r.space(1).unwrap().vma_count(), 0);
    let e = replay("1 mprotect(0x1000, 4096, PROT_BOGUS) = 0".lines(), ReplayOptions::default(), None).unwrap_err();
    assert!(e.msg.contains("PROT_BOGUS"), "{e}");
}

/// A child's lines that come before its parent's clone returns are held
/// and replayed once the child exists: into the child's own copy, and a
/// malformed one among them is still an error naming its line.
#[test]
fn lines_of_a_child_before_its_clone_returns() {
    let log = "\
1 mmap(0x10000000, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED, -1, 0) = 0x10000000
1 clone(child_stack=NULL, flags=SIGCHLD <unfinished ...>
2 munmap(0x10000000, 4096) = 0
1 <... clone resumed>) = 2
";
    let r = replay(log.lines(), ReplayOptions::default(), None).unwrap();
    assert_eq!(r.space(1).unwrap().stats().mapped, 8192, "the parent keeps both pages");
    assert_eq!(r.space(2).unwrap().stats().mapped, 4096, "the child unmapped one");
    let bad = log.replace("2 munmap(0x10000000, 4096) = 0", "2 mprotect(0x10000000, 4096, PROT_BOGUS) = 0");
    let e = replay(bad.lines(), ReplayOptions::default(), None).unwrap_err();
    assert_eq!(e.line, 3, "{e}");
    let r = replay(bad.lines(), ReplayOptions { lenient: true, ..Default::default() }, None).unwrap();
    assert_eq!(r.stats.skipped, 1);
}

/// Threads whose calls overlap in the log (`<unfinished ...>`): the
/// kernel ran them in some order between their halves, not necessarily
/// the order they returned in. Here thread 2's `mmap` returns the range
/// thread 1's `munmap`, still in flight, frees: applied in the order of
/// the lines, the `munmap` would then remove 2's mapping and its
/// `mprotect` fail in the model.
#[test]
fn overlapping_calls_of_threads_apply_in_an_order_their_results_allow() {
    let log = "\
1 clone(child_stack=0x7f0000000000, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM) = 2
1 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10000000
1 munmap(0x10000000, 8192 <unfinished ...>
2 mmap(NULL, 4096, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10000000
1 <... munmap resumed>) = 0
2 mprotect(0x10000000, 4096, PROT_READ) = 0
";
    let r = replay(log.lines(), ReplayOptions::default(), None).unwrap();
    assert!(r.stats.disagreements.is_empty(), "{:?}", r.stats.disagreements);
    assert_eq!(r.space(2).unwrap().maps(), "10000000-10001000 r--p 00000000 00:00 0 \n");
    // Calls that both agree in the order they returned, until a later one
    // shows the other order: thread 2's MAP_FIXED went first, and thread
    // 1's mremap moved what it had mapped, leaving the range free for the
    // last mmap.
    let log = "\
1 clone(child_stack=0x7f0000000000, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM) = 2
1 mmap(NULL, 12288, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x20000000
1 mremap(0x20000000, 12288, 20480, MREMAP_MAYMOVE <unfinished ...>
2 mmap(0x1ffff000, 16384, PROT_READ, MAP_PRIVATE|MAP_FIXED|MAP_ANONYMOUS, -1, 0 <unfinished ...>
1 <... mremap resumed>) = 0x40000000
2 <... mmap resumed>) = 0x1ffff000
1 munmap(0x40000000, 20480) = 0
2 mmap(NULL, 12288, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x20000000
";
    let r = replay(log.lines(), ReplayOptions::default(), None).unwrap();
    assert!(r.stats.disagreements.is_empty(), "{:?}", r.stats.disagreements);
    assert_eq!(
        r.space(1).unwrap().maps(),
        "1ffff000-20000000 r--p 00000000 00:00 0 \n20000000-20003000 rw-p 00000000 00:00 0 \n"
    );
    // Three calls that ran in the reverse of the order they returned:
    // thread 3's munmap freed the range thread 1's mremap moved to,
    // freeing the range thread 2's mmap got. The held calls wait for
    // each other, not only for the calls in flight.
    let log = "\
1 clone(child_stack=0x7f0000000000, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM) = 2
1 clone(child_stack=0x7f0000000000, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM) = 3
1 mmap(NULL, 4096, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10003000
3 mmap(NULL, 12288, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10000000
2 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0 <unfinished ...>
1 mremap(0x10003000, 4096, 12288, MREMAP_MAYMOVE <unfinished ...>
3 munmap(0x10000000, 12288 <unfinished ...>
2 <... mmap resumed>) = 0x10003000
1 <... mremap resumed>) = 0x10000000
3 <... munmap resumed>) = 0
";
    let r = replay(log.lines(), ReplayOptions::default(), None).unwrap();
    assert!(r.stats.disagreements.is_empty(), "{:?}", r.stats.disagreements);
    assert_eq!(
        r.space(1).unwrap().maps(),
        "10000000-10003000 rw-p 00000000 00:00 0 \n10003000-10004000 r--p 00000000 00:00 0 \n"
    );
    // No order agrees: reported once, at the call's line.
    let log = "\
1 clone(child_stack=0x7f0000000000, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM) = 2
1 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10000000
1 mprotect(0x10000000, 8192, PROT_READ <unfinished ...>
2 mprotect(0x30000000, 4096, PROT_READ) = 0
1 <... mprotect resumed>) = 0
";
    let r = replay(log.lines(), ReplayOptions::default(), None).unwrap();
    let lines: Vec<usize> = r.stats.disagreements.iter().map(|d| d.line).collect();
    assert_eq!(lines, [4], "{:?}", r.stats.disagreements);
    // The message says the log could not decide, and among which calls.
    let msg = &r.stats.disagreements[0].msg;
    assert!(msg.contains("overlapped the calls returned on lines 5; no order of them gives every result"), "{msg}");
}

/// A call no position fits waits only for the calls in flight that could
/// change its result. Here thread 3's `mmap` is in flight throughout; a
/// new mapping cannot free the place the kernel gave thread 2's second
/// `mmap`, so that call does not wait for it: it shows at once that
/// thread 2's `MAP_FIXED` ran before thread 1's `munmap`. (Held until
/// thread 3 returned, it would go after the calls that followed it and
/// disagree.)
#[test]
fn a_call_waits_only_for_calls_in_flight_that_could_change_its_result() {
    let log = "\
1 clone(child_stack=0x7f0000000000, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM) = 2
1 clone(child_stack=0x7f0000000000, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM) = 3
1 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10000000
3 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0 <unfinished ...>
1 munmap(0x10000000, 8192 <unfinished ...>
2 mmap(0x10001000, 4096, PROT_READ, MAP_PRIVATE|MAP_FIXED|MAP_ANONYMOUS, -1, 0 <unfinished ...>
1 <... munmap resumed>) = 0
2 <... mmap resumed>) = 0x10001000
2 mmap(NULL, 8192, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10000000
2 munmap(0x10000000, 8192) = 0
1 mmap(NULL, 4096, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10000000
3 <... mmap resumed>) = 0x50000000
";
    let r = replay(log.lines(), ReplayOptions::default(), None).unwrap();
    assert!(r.stats.disagreements.is_empty(), "{:?}", r.stats.disagreements);
    assert_eq!(
        r.space(1).unwrap().maps(),
        "10000000-10001000 rw-p 00000000 00:00 0 \n50000000-50001000 r--p 00000000 00:00 0 \n"
    );
}

/// Two calls that agree in either order but leave different layouts: the
/// model follows both orders, and a result far later (past the calls kept
/// for reordering) decides; where nothing decides, the replay says so.
#[test]
fn an_order_no_result_decides_is_followed_and_named() {
    let head = "\
1 clone(child_stack=0x7f0000000000, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM) = 2
1 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10000000
1 munmap(0x10000000, 4096 <unfinished ...>
2 mmap(0x10000000, 4096, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_FIXED|MAP_ANONYMOUS, -1, 0 <unfinished ...>
1 <... munmap resumed>) = 0
2 <... mmap resumed>) = 0x10000000
";
    // 600 calls elsewhere, then a mapping the kernel placed where thread
    // 2's MAP_FIXED went: the munmap ran last.
    let mut log = head.to_string();
    log.push_str("2 mmap(0x30000000, 4096, PROT_READ, MAP_PRIVATE|MAP_FIXED|MAP_ANONYMOUS, -1, 0) = 0x30000000\n");
    for i in 0..600 {
        let prot = if i % 2 == 0 { "PROT_NONE" } else { "PROT_READ" };
        log.push_str(&format!("2 mprotect(0x30000000, 4096, {prot}) = 0\n"));
    }
    log.push_str("1 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10000000\n");
    let r = replay(log.lines(), ReplayOptions::default(), None).unwrap();
    assert!(r.stats.disagreements.is_empty(), "{:?}", r.stats.disagreements);
    assert!(r.stats.undecided.is_empty(), "{:?}", r.stats.undecided);
    assert_eq!(
        r.space(1).unwrap().maps(),
        "10000000-10001000 r--p 00000000 00:00 0 \n30000000-30001000 r--p 00000000 00:00 0 \n"
    );
    // Nothing after: either layout may be the kernel's.
    let r = replay(head.lines(), ReplayOptions::default(), None).unwrap();
    assert!(r.stats.disagreements.is_empty(), "{:?}", r.stats.disagreements);
    assert_eq!(r.stats.undecided, [(5, 6)]);
}

/// After an `execve` the new program's image is not in the log, but what
/// its calls map and unmap is: calls there are still checked.
#[test]
fn calls_after_an_exec_are_checked_where_the_log_made_the_pages() {
    let log = "\
1 execve(\"/bin/true\", [\"true\"], 0x7ffd /* 20 vars */) = 0
1 mmap(NULL, 8192, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10000000
1 munmap(0x10000000, 8192) = 0
1 mprotect(0x10000000, 4096, PROT_READ) = 0
1 mprotect(0x20000000, 4096, PROT_READ) = 0
";
    let r = replay(log.lines(), ReplayOptions::default(), None).unwrap();
    let lines: Vec<usize> = r.stats.disagreements.iter().map(|d| d.line).collect();
    // The range the log unmapped is known empty; the other may be the
    // program's image.
    assert_eq!(lines, [4], "{:?}", r.stats.disagreements);
}

/// A mapped file shows under the path the kernel would show (symlinks
/// resolved) with its device and inode on this machine, whether the log
/// names it as opened (no `-y`) or as strace resolved it (`-y`).
#[cfg(target_os = "linux")]
#[test]
fn mapped_files_get_the_kernels_path_and_identity() {
    use std::os::unix::fs::MetadataExt;
    let dir = std::env::temp_dir().join(format!("maple-replay-files-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("real")).unwrap();
    let file = dir.join("real/lib.so");
    std::fs::write(&file, [0u8; 8192]).unwrap();
    let link = dir.join("link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(dir.join("real"), &link).unwrap();
    let want_path = std::fs::canonicalize(&file).unwrap().to_str().unwrap().to_string();
    let ino = std::fs::metadata(&file).unwrap().ino();
    let via_link = link.join("lib.so").to_str().unwrap().to_string();
    let logs = [
        format!(
            "7 openat(AT_FDCWD, \"{via_link}\", O_RDONLY|O_CLOEXEC) = 3\n\
             7 mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, 3, 0) = 0x7f0000000000\n\
             7 close(3) = 0\n"
        ),
        format!(
            "7 openat(AT_FDCWD</>, \"{via_link}\", O_RDONLY|O_CLOEXEC) = 3<{want_path}>\n\
             7 mmap(NULL, 8192, PROT_READ, MAP_PRIVATE, 3<{want_path}>, 0) = 0x7f0000000000\n\
             7 close(3<{want_path}>) = 0\n"
        ),
    ];
    for log in &logs {
        let r = replay(log.lines(), ReplayOptions::default(), None).unwrap();
        let maps = r.space(7).unwrap().maps();
        let line = maps.lines().next().unwrap();
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!((fields[4], fields[5]), (ino.to_string().as_str(), want_path.as_str()), "{line}");
        assert_ne!(fields[3], "00:00", "device looked up: {line}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A recorded program (`tests/data/strace-NAME`, see its README) replayed
/// from the maps read before its first snapshot (`NAME.start.maps`), on top
/// of it, up to the read before its second: the space of the process that
/// took them, and the second snapshot. No line may disagree.
fn replay_recorded(name: &str) -> (AddressSpace, String) {
    let dir = format!("{}/tests/data/strace-{name}", env!("CARGO_MANIFEST_DIR"));
    let read = |file: &str| std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
    let log = read(&format!("{name}.strace"));
    let (start, end) = (format!("{name}.start.maps"), format!("{name}.end.maps"));
    let (from, to) = (snapshot_line(&log, &start), snapshot_line(&log, &end));
    let initial = AddressSpace::from_maps(&read(&start), &start).unwrap();
    let opts = ReplayOptions { from: Some(from), to: Some(to), ..ReplayOptions::default() };
    let mut r = replay(log.lines(), opts, Some(initial)).unwrap();
    assert!(r.stats.disagreements.is_empty(), "{:?}", r.stats.disagreements);
    let pid = pid_of(&log, to);
    let space = r.processes.iter().position(|(p, _)| *p == pid).map(|i| r.processes.swap_remove(i).1);
    (space.expect("the snapshots' process"), read(&end))
}

/// A recorded program's System V shared memory (see
/// `tests/data/strace-sysv/README.md`): attaches where the kernel chose,
/// read-only, over a reservation, cut and detached, replayed on the first
/// snapshot, give the second line for line, segment ids and all.
#[test]
fn system_v_shared_memory_replays_line_for_line() {
    let (space, want) = replay_recorded("sysv");
    let got = space.maps();
    let diff = page_diff(&want, &got);
    assert!(diff.is_empty(), "pages differ:\n{}\n--- got:\n{got}", diff.join("\n"));
    let segments = |maps: &str| maps.lines().filter(|l| l.contains("/SYSV")).map(String::from).collect::<Vec<_>>();
    assert_eq!(segments(&got), segments(&want));
    assert_eq!(segments(&want).len(), 1, "one attach is left at the second snapshot");
}

/// A recorded program under an address-space limit it set itself (see
/// `tests/data/strace-aslimit/README.md`): the replayer follows the limit,
/// so the calls the kernel refused the model refuses too, and the failed
/// fixed mapping's cut is in the second snapshot, line for line.
#[test]
fn an_address_space_limit_replays_line_for_line() {
    let (space, want) = replay_recorded("aslimit");
    assert_ne!(space.layout().as_limit, u64::MAX, "the limit was followed");
    let got = space.maps();
    let (matching, total) = matching_lines(&want, &got);
    assert_eq!(matching, total, "lines differ:\n--- want:\n{want}\n--- got:\n{got}");
    assert_eq!(got.lines().count(), want.lines().count(), "{got}");
}

/// Resource limits as strace prints them: set by `setrlimit` or
/// `prlimit64` (not by a query, nor by a failed call); a malformed one is an
/// error naming its line.
#[test]
fn resource_limits_are_followed() {
    let log = "\
7 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f5fc8b4a000
7 prlimit64(0, RLIMIT_STACK, NULL, {rlim_cur=8192*1024, rlim_max=RLIM64_INFINITY}) = 0
7 prlimit64(0, RLIMIT_AS, {rlim_cur=100*1024*1024, rlim_max=RLIM64_INFINITY}, NULL) = 0
7 setrlimit(RLIMIT_STACK, {rlim_cur=RLIM_INFINITY, rlim_max=RLIM_INFINITY}) = 0
7 setrlimit(RLIMIT_AS, {rlim_cur=4096, rlim_max=4096}) = -1 EPERM (Operation not permitted)
";
    let r = replay(log.lines(), ReplayOptions::default(), None).unwrap();
    let layout = r.space(7).unwrap().layout();
    assert_eq!((layout.as_limit, layout.stack_limit), (100 << 20, u64::MAX));
    let bad = format!("{log}7 setrlimit(RLIMIT_AS, {{rlim_cur=lots, rlim_max=0}}) = 0\n");
    let e = replay(bad.lines(), ReplayOptions::default(), None).unwrap_err();
    assert_eq!(e.line, 6, "{e}");
}

/// `mbind` lines as strace prints them cut a VMA and merge it back; a
/// node on the log's machine counts as having memory there; a mask with
/// nodes past 63 is an error naming the line.
#[test]
fn memory_policies_replay() {
    let log = "\
7 mmap(NULL, 16384, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f5fc8b4a000
7 mbind(0x7f5fc8b4b000, 8192, MPOL_BIND, [0x00000000000001], 65, MPOL_MF_MOVE) = 0
7 mbind(0x7f5fc8b4b000, 4096, MPOL_INTERLEAVE|MPOL_F_STATIC_NODES, [0x00000000000006], 65, 0) = 0
7 mbind(0x7f5fc8b4a000, 4096, MPOL_BIND, [0x00000000000002], 65, 0) = -1 EINVAL (Invalid argument)
";
    let r = replay(log.lines(), ReplayOptions::default(), None).unwrap();
    assert!(r.stats.disagreements.is_empty(), "{:?}", r.stats.disagreements);
    assert_eq!(r.space(7).unwrap().vma_count(), 4, "{}", r.space(7).unwrap().maps());
    let back = format!("{log}7 mbind(0x7f5fc8b4a000, 16384, MPOL_DEFAULT, NULL, 0, 0) = 0\n");
    let r = replay(back.lines(), ReplayOptions::default(), None).unwrap();
    assert_eq!(r.space(7).unwrap().vma_count(), 1);
    let wide = "7 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f5fc8b4a000\n\
                7 mbind(0x7f5fc8b4a000, 4096, MPOL_BIND, [0x1, 0x1], 129, 0) = 0\n";
    let e = replay(wide.lines(), ReplayOptions::default(), None).unwrap_err();
    assert_eq!(e.line, 2, "{e}");
}

/// A log of a machine with huge pages reserved: the model has none, and
/// says so by name rather than as a wrong result.
#[test]
fn a_huge_page_mapping_the_model_cannot_have_is_named() {
    let log = "1 mmap(NULL, 2097152, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_HUGETLB, -1, 0) = 0x7f0000000000\n\
               1 mmap(NULL, 2097152, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_HUGETLB, -1, 0) = -1 ENOMEM (Cannot allocate memory)\n";
    let r = replay(log.lines(), ReplayOptions::default(), None).unwrap();
    let msgs: Vec<(usize, &str)> = r.stats.disagreements.iter().map(|d| (d.line, d.msg.as_str())).collect();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(msgs[0].0, 1);
    assert!(msgs[0].1.contains("MAP_HUGETLB succeeded") && msgs[0].1.contains("vm.nr_hugepages"), "{msgs:?}");
}
