//! End-to-end tests of the `maple` binary.

use std::{
    io::Write,
    process::{Command, Output, Stdio},
};

fn maple(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_maple"));
    cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn data(name: &str) -> String {
    format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn demo_log_gives_the_expected_output_on_both_flavours() {
    let want = std::fs::read_to_string(data("demo.expected")).unwrap();
    for flags in [&["--gaps", "--validate"][..], &["--validate"][..], &[][..]] {
        let file = data("demo.ops");
        let mut args = vec!["ops"];
        args.extend_from_slice(flags);
        args.push(&file);
        let out = maple(&args, None);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8(out.stdout).unwrap(), want, "flags {flags:?}");
    }
}

#[test]
fn every_op_and_answer_kind() {
    let log = "insert 10 19 1\ninsert 15 15 2\nstore 30 39 3\nload 35\nload 25\nnext 20\nnext 40\nprev 29\nprev 9\n\
               gap 0 100 10\ngap 10 39 1\nrgap 0 100 61\nrgap 0 100 0\nclear 12 13\nerase 12\nerase 11\n";
    let out = maple(&["ops", "--gaps", "--validate", "-"], Some(log));
    assert!(out.status.success());
    let want = "ok\nEEXIST\n30 39 3\nnone\n30 39 3\nnone\n10 19 1\nnone\n\
                0\n20\n40\nEINVAL\nnone\n10 11 1\ncontents 2\n14 19 1\n30 39 3\n";
    assert_eq!(String::from_utf8(out.stdout).unwrap(), want);
}

#[test]
fn malformed_lines_name_file_and_line() {
    for (log, msg) in [
        ("insert 1 2 3\nfrobnicate 1\n", "<stdin>:2: unknown operation"),
        ("load\n", ":1: load takes 1 number(s), got 0"),
        ("# fine\nstore 1 2 x\n", ":2: bad number \"x\""),
        ("gap 1 2 3 4\n", ":1: gap takes 3"),
        ("load 18446744073709551616\n", ":1: bad number"),
    ] {
        let out = maple(&["ops", "-"], Some(log));
        assert_eq!(out.status.code(), Some(2), "{log:?}");
        let err = String::from_utf8(out.stderr).unwrap().replace("maple: -:", "maple: <stdin>:");
        assert!(err.contains(msg.trim_start_matches("<stdin>")), "{log:?}: {err}");
        assert!(out.stdout.is_empty(), "nothing is applied from a malformed log");
    }
}

#[test]
fn missing_file_is_a_clear_error() {
    let out = maple(&["ops", "/nonexistent/x.ops"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr).unwrap().contains("cannot read /nonexistent/x.ops"));
}

#[test]
fn recorded_kernel_set_replays_with_validation() {
    // The CLI's own copy of a recorded sequence, converted to `maple ops` syntax.
    let text = std::fs::read_to_string(data("set10.ops")).unwrap();
    let log: String = text
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w[0] {
                "store" => format!("store {} {} {}\n", w[1], w[2], w[1]),
                "snull" => format!("clear {} {}\n", w[1], w[2]),
                _ => format!("erase {}\n", w[1]),
            }
        })
        .collect();
    let out = maple(&["ops", "--gaps", "--validate", "-"], Some(&log));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.lines().any(|l| l.starts_with("contents ")));
}
