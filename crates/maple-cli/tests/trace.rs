//! `maple trace` on real programs, live: every process's model checked
//! against the kernel's `/proc/PID/maps` after every call (`--verify`),
//! and the final maps of a process tree against what each process printed
//! of its own maps as its last act. The programs: the churn program,
//! python, sqlite, node, java, a static Go binary and the C compiler
//! (each traced where installed).
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::{Command, Output},
};

fn maple(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_maple"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("maple-trace-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Compiles a C file of the tests' data with `cc` (extra flags after).
fn cc(src: &str, out: &Path, flags: &[&str]) -> bool {
    let src = format!("{}/{src}", env!("CARGO_MANIFEST_DIR"));
    Command::new("cc")
        .args(["-O1", "-pthread", "-o"])
        .arg(out)
        .arg(&src)
        .args(flags)
        .status()
        .is_ok_and(|s| s.success())
}

fn installed(prog: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {prog}")]).output().is_ok_and(|o| o.status.success())
}

/// The verification summary's counts: (calls applied, differences).
fn summary(stderr: &str) -> (u64, u64) {
    let line = stderr.lines().find(|l| l.contains("calls applied")).unwrap_or_else(|| panic!("no summary in {stderr}"));
    let num = |after: &str| -> u64 {
        let words: Vec<&str> = line.split_whitespace().collect();
        let i = words.iter().position(|w| w.starts_with(after)).unwrap();
        words[i - 1].parse().unwrap()
    };
    (num("calls"), num("difference"))
}

/// How many comparisons with /proc the verification summary counts.
fn compared(stderr: &str) -> u64 {
    let line = stderr.lines().find(|l| l.contains("calls applied")).unwrap_or_else(|| panic!("no summary in {stderr}"));
    let after = line.split_once("/proc after ").map(|(_, r)| r).unwrap_or_else(|| panic!("no count in {line}"));
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|_| panic!("no count in {line}"))
}

/// Runs maple with `args`, killing it if it has not ended after `secs`
/// (a tracer that deadlocks its command fails the test, not the run).
fn maple_within(args: &[&str], secs: u64) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_maple"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("maple {args:?} still ran after {secs} s: {}", String::from_utf8_lossy(&o.stderr));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Four threads map, protect, move and unmap at once, map `MAP_FIXED`
/// over an arena the others map too, and fork now and then: the tracer
/// applies their calls in the order the kernel ran them, and compares the
/// model with /proc after every one of them. Twenty runs in a row.
#[test]
fn threads_racing_over_one_space_verify_after_every_call() {
    let dir = scratch("race");
    let race = dir.join("race");
    assert!(cc("tests/data/race.c", &race, &[]), "cc failed");
    for run in 0..20 {
        let o = maple_within(&["trace", "--verify", "-o", "/dev/null", "--", race.to_str().unwrap(), "4", "600"], 120);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "run {run}: {stderr}");
        let (applied, differences) = summary(&stderr);
        assert_eq!(differences, 0, "run {run}: {stderr}");
        assert!(applied > 4 * 600 && compared(&stderr) * 100 >= applied * 99, "run {run}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The race program recorded by `strace -f` (four threads, their calls
/// overlapping on most lines): replayed without a disagreement, its
/// arena at the end as the program saw it in its own maps.
#[test]
fn threads_racing_recorded_by_strace_replay_without_a_disagreement() {
    let dir = format!("{}/tests/data/race", env!("CARGO_MANIFEST_DIR"));
    // (race3: 2,000 rounds, where a wrong order shows 230 lines later;
    // race4: a call in flight for 750 lines, which others need not wait
    // for; race5: two calls that agree in either order, decided 750 lines
    // later, past the calls kept for reordering.)
    for run in ["race1", "race2", "race3", "race4", "race5"] {
        let log = format!("{dir}/{run}.strace.gz");
        let o = maple(&["replay", &log], &[]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{run}: {stderr}");
        assert!(!stderr.contains(".strace.gz:") || stderr.lines().all(|l| l.contains("execve at")), "{run}: {stderr}");
        let fin = std::fs::read_to_string(format!("{dir}/{run}.final")).unwrap();
        let (head, kernel) = fin.split_once('\n').unwrap();
        let bound = |i: usize| u64::from_str_radix(head.split_whitespace().nth(i).unwrap(), 16).unwrap();
        let (lo, hi) = (bound(1), bound(2));
        let arena = |maps: &str| -> Vec<String> {
            maps.lines()
                .filter(|l| {
                    let (s, e) = l.split_once(' ').unwrap().0.split_once('-').unwrap();
                    u64::from_str_radix(e, 16).unwrap() > lo && u64::from_str_radix(s, 16).unwrap() < hi
                })
                .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
                .collect()
        };
        let model = String::from_utf8_lossy(&o.stdout);
        assert_eq!(arena(&model), arena(kernel), "{run}");
        assert!(arena(kernel).len() > 10, "{run}: the arena is cut up");
    }
}

/// A call that sleeps until another thread of the program acts (here a
/// populate of a userfaultfd range, filled by a thread that maps a page
/// first) does not deadlock the program: its space is let loose, said in
/// the summary, and the model still agrees with /proc.
#[test]
fn a_call_asleep_on_another_thread_does_not_deadlock() {
    let dir = scratch("asleep");
    let asleep = dir.join("asleep");
    assert!(cc("tests/data/asleep.c", &asleep, &[]), "cc failed");
    let o = maple_within(&["trace", "--verify", "-o", "/dev/null", "--", asleep.to_str().unwrap()], 60);
    let stderr = String::from_utf8_lossy(&o.stderr);
    if o.status.code() == Some(3) {
        eprintln!("userfaultfd refused here: nothing to sleep on");
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert_eq!(summary(&stderr).1, 0, "{stderr}");
    assert!(stderr.contains("slept over"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every memory call of this kernel and its flags (droppable memory,
/// validated and synchronous mappings, huge page sizes, stacks, every
/// advice with guard regions, `process_madvise`, locks, seals, System V
/// segments with every flag, `remap_file_pages`, memfd and names, the
/// fork-like calls and an exec), traced with the model compared after
/// every call; and the same program recorded by `strace -f -yy`, replayed
/// without a disagreement.
#[test]
fn every_memory_call_of_this_kernel_verifies() {
    let dir = scratch("calls");
    let calls = dir.join("calls");
    assert!(cc("tests/data/calls.c", &calls, &[]), "cc failed");
    let (calls, dir_s) = (calls.to_str().unwrap(), dir.to_str().unwrap());
    let o = maple_within(&["trace", "--verify", "-o", "/dev/null", "--", calls, dir_s], 60);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let (applied, differences) = summary(&stderr);
    assert!(applied > 200 && differences == 0, "{stderr}");
    assert_eq!(compared(&stderr), applied, "{stderr}");
    assert!(!stderr.contains("event log line"), "a call the model answered otherwise: {stderr}");
    if installed("strace") {
        let log = dir.join("calls.strace");
        let st = Command::new("strace").args(["-f", "-yy", "-o"]).arg(&log).args([calls, dir_s]).output().unwrap();
        assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
        let o = maple(&["replay", log.to_str().unwrap()], &[]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{stderr}");
        assert!(!stderr.contains(", the model "), "{stderr}");
    } else {
        eprintln!("strace not installed: the recorded log not replayed");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_process_tree_ends_as_each_process_saw_itself() {
    let dir = scratch("tree");
    let tree = dir.join("tree");
    assert!(cc("tests/data/tree.c", &tree, &[]), "cc failed");
    // The exec'd child: a static binary where the C library allows one.
    let child = dir.join("tree-static");
    let child = if cc("tests/data/tree.c", &child, &["-static"]) { child } else { tree.clone() };
    let out = dir.join("out");
    let o = maple(
        &[
            "trace",
            "--verify",
            "--all",
            "-o",
            out.to_str().unwrap(),
            "--",
            tree.to_str().unwrap(),
            dir.to_str().unwrap(),
            child.to_str().unwrap(),
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let (applied, differences) = summary(&stderr);
    assert!(applied > 20 && differences == 0, "{stderr}");
    let text = std::fs::read_to_string(&out).unwrap();
    // One section a process, headed `# pid N` and its threads, if any:
    // `# pid N (threads 12, 13)`.
    let sections: HashMap<&str, &str> = text
        .split("# pid ")
        .skip(1)
        .map(|s| s.split_once('\n').unwrap())
        .map(|(head, maps)| (head.split_once(" (threads ").map_or(head, |(pid, _)| pid), maps))
        .collect();
    assert!(text.contains(" (threads "), "the tree's threads are named under their process: {text}");
    let mut compared = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let Some(pid) = name.strip_prefix("maps.") else { continue };
        let want = std::fs::read_to_string(dir.join(&name)).unwrap();
        assert_eq!(sections.get(pid).copied(), Some(want.as_str()), "process {pid}");
        compared += 1;
    }
    // The root, the forked child and the exec'd one.
    assert_eq!(compared, 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_dropped_call_is_a_difference() {
    let dir = scratch("drop");
    let tree = dir.join("tree");
    assert!(cc("tests/data/tree.c", &tree, &[]), "cc failed");
    let o = maple(
        &["trace", "--verify", "--", tree.to_str().unwrap(), dir.to_str().unwrap()],
        &[("MAPLE_TRACE_DROP_CALL", "12")],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(summary(&stderr).1 > 0, "{stderr}");
    assert!(stderr.contains("/proc/") && stderr.contains("model:"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn real_programs_verify_without_a_difference() {
    let dir = scratch("real");
    let churn = dir.join("churn");
    let src = "../maple-mm/tests/data/recorded/churn.c";
    let mut runs: Vec<Vec<String>> = Vec::new();
    if cc(src, &churn, &[]) {
        runs.push(vec![churn.to_str().unwrap().into()]);
    }
    // A static Go binary, its runtime's own threads and mappings.
    let goprog = dir.join("goprog");
    if installed("go") {
        let built = Command::new("go")
            .args(["build", "-o"])
            .arg(&goprog)
            .arg(".")
            .current_dir(format!("{}/tests/data/goprog", env!("CARGO_MANIFEST_DIR")))
            .env("CGO_ENABLED", "0")
            .status()
            .is_ok_and(|s| s.success());
        assert!(built, "go build failed");
        runs.push(vec![goprog.to_str().unwrap().into()]);
    } else {
        eprintln!("go not installed: no Go program traced");
    }
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let tree_c = format!("{}/tests/data/tree.c", env!("CARGO_MANIFEST_DIR"));
    let tree_o = dir.join("tree.o");
    runs.push(s(&["cc", "-c", "-O1", "-o", tree_o.to_str().unwrap(), &tree_c]));
    for (prog, args) in [
        ("python3", s(&["python3", "-c", "import json, sqlite3; print(json.dumps([1]))"])),
        ("sqlite3", s(&["sqlite3", ":memory:", "create table t(a); insert into t values (1); select a from t;"])),
        ("node", s(&["node", "-e", "console.log([1, 2].map(x => x * 2))"])),
        ("java", s(&["java", "-Xshare:auto", "-version"])),
    ] {
        if installed(prog) {
            runs.push(args);
        } else {
            eprintln!("{prog} not installed: not traced");
        }
    }
    assert!(!runs.is_empty());
    for cmd in runs {
        let mut args = vec!["trace", "--verify", "-o", "/dev/null", "--"];
        args.extend(cmd.iter().map(String::as_str));
        let o = maple(&args, &[]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{cmd:?}: {stderr}");
        let (applied, differences) = summary(&stderr);
        assert!(applied > 0 && differences == 0, "{cmd:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// As strace: the command follows the options without `--` (its own
/// options are its own), and maple's output goes to standard error,
/// leaving standard output to the command.
#[test]
fn the_command_needs_no_dashes_and_keeps_standard_output() {
    let o = maple(&["trace", "--verify", "sh", "-c", "echo out; echo err >&2"], &[]);
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout, "out\n");
    assert!(stderr.contains("err\n") && stderr.contains("[stack]") && stderr.contains("calls applied"), "{stderr}");
    // `--verify=N` takes its count with `=`, so a command is never taken
    // for one.
    let o = maple(&["trace", "--verify=2", "-o", "/dev/null", "true"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn the_command_s_status_is_maple_s() {
    let o = maple(&["trace", "-o", "/dev/null", "--", "sh", "-c", "exit 3"], &[]);
    assert_eq!(o.status.code(), Some(3));
    let o = maple(&["trace", "-o", "/dev/null", "--", "false"], &[]);
    assert_eq!(o.status.code(), Some(1));
    let o = maple(&["trace", "-o", "/dev/null", "--", "sh", "-c", "kill -9 $$"], &[]);
    assert_eq!(o.status.code(), Some(128 + 9));
    let o = maple(&["trace", "--", "/nonexistent/command"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot run /nonexistent/command"));
}

/// Ctrl-C (SIGINT to the terminal's process group) is the command's: it
/// ends, and maple ends with it, with its status.
#[test]
fn ctrl_c_ends_both() {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(env!("CARGO_BIN_EXE_maple"))
        .args(["trace", "-o", "/dev/null", "--", "sleep", "30"])
        .process_group(0)
        .spawn()
        .unwrap();
    // Once the command runs under maple (a `sleep` whose parent is maple).
    let running = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let Some((comm, rest)) = stat.split_once(") ") else { return false };
            comm.ends_with("(sleep") && rest.split_whitespace().nth(1) == Some(&child.id().to_string())
        })
    };
    let start = std::time::Instant::now();
    while !running() {
        assert!(start.elapsed().as_secs() < 20, "the command never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let group = format!("-{}", child.id());
    assert!(Command::new("kill").args(["-INT", "--", &group]).status().unwrap().success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 2));
}
