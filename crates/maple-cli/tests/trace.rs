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
    let sections: HashMap<&str, &str> = text.split("# pid ").skip(1).map(|s| s.split_once('\n').unwrap()).collect();
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
