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
        // (A child that fails before reading its input closes the pipe.)
        let _ = input.write_all(s.as_bytes());
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
        ("# fine\nstore 1 2 x\n", ":2: \"x\" is not a number"),
        ("hello world\n", ":1: unknown operation \"hello\""),
        ("load ff\n", ":1: \"ff\" is not a decimal number (write hex as 0xff)"),
        ("gap 1 2 3 4\n", ":1: gap takes 3"),
        ("load 18446744073709551616\n", ":1: \"18446744073709551616\" does not fit in 64 bits"),
    ] {
        let out = maple(&["ops", "-"], Some(log));
        assert_eq!(out.status.code(), Some(2), "{log:?}");
        let err = String::from_utf8(out.stderr).unwrap().replace("maple: -:", "maple: <stdin>:");
        assert!(err.contains(msg.trim_start_matches("<stdin>")), "{log:?}: {err}");
        assert!(out.stdout.is_empty(), "nothing is applied from a malformed log");
    }
}

/// A file that is not UTF-8 is a parse error naming the bad line, from a
/// file and from stdin alike.
#[test]
fn non_utf8_input_names_its_line() {
    let dir = std::env::temp_dir().join(format!("maple-cli-utf8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.ops");
    std::fs::write(&path, b"insert 1 2 3\r\n# ok\nload \xff\xfe\nload 1\n").unwrap();
    let out = maple(&["ops", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("bad.ops:3: not valid UTF-8"), "{err}");
    assert!(out.stdout.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
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

mod fuzz {
    use maple_cli::ops;
    use proptest::prelude::*;

    /// Words an op log is made of, plus garbage around them.
    fn token() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "store",
                "insert",
                "clear",
                "erase",
                "load",
                "next",
                "prev",
                "gap",
                "rgap",
                "STORE",
                "#",
                "0x",
                "-1",
                "0xffffffffffffffff",
                "18446744073709551615",
                "18446744073709551616",
                "0x1_0",
                "",
                "\t",
                "é",
                "\0",
            ])
            .prop_map(str::to_string),
            any::<u64>().prop_map(|n| n.to_string()),
            (0u64..200).prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| format!("{n:#x}")),
            "[ -~]{0,6}",
        ]
    }

    fn line() -> impl Strategy<Value = String> {
        prop::collection::vec(token(), 0..6).prop_map(|t| t.join(" "))
    }

    /// Numbers where bugs live: 0, 1, near the top, and small ones that
    /// make ranges overlap.
    fn edge_number() -> impl Strategy<Value = u64> {
        prop_oneof![Just(0u64), Just(1), Just(u64::MAX), Just(u64::MAX - 1), 0u64..300, any::<u64>()]
    }

    /// A well-formed op with edge-case numbers (ranges may be inverted,
    /// sizes zero, windows empty).
    fn op_line() -> impl Strategy<Value = String> {
        let n = edge_number;
        prop_oneof![
            (prop::sample::select(vec!["store", "insert", "gap", "rgap"]), n(), n(), n())
                .prop_map(|(w, a, b, c)| format!("{w} {a} {b:#x} {c}")),
            (n(), n()).prop_map(|(a, b)| format!("clear {a} {b}")),
            (prop::sample::select(vec!["erase", "load", "next", "prev"]), n()).prop_map(|(w, a)| format!("{w} {a}")),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Well-formed logs with extreme numbers parse and replay, with
        /// every invariant checked after every op, without a panic.
        #[test]
        fn well_formed_logs_replay(lines in prop::collection::vec(op_line(), 1..80), gaps: bool) {
            let text = lines.join("\n");
            let parsed = ops::parse("fuzz.ops", &text).unwrap();
            prop_assert_eq!(parsed.len(), lines.len());
            let mut out = Vec::new();
            ops::run("fuzz.ops", &parsed, gaps, true, &mut out).unwrap();
            prop_assert!(String::from_utf8(out).unwrap().contains("contents "));
        }

        /// No input makes the parser or the replay panic: a log either
        /// parses or names its first bad line, and a parsed log replays
        /// (validating every step) to completion.
        #[test]
        fn any_log_parses_or_names_its_line(lines in prop::collection::vec(line(), 0..40), gaps: bool) {
            let text = lines.join("\n");
            match ops::parse("fuzz.ops", &text) {
                Ok(parsed) => {
                    let mut out = Vec::new();
                    ops::run("fuzz.ops", &parsed, gaps, true, &mut out).unwrap();
                    prop_assert!(String::from_utf8(out).unwrap().contains("contents "));
                }
                Err(e) => {
                    prop_assert_eq!(e.file.as_str(), "fuzz.ops");
                    prop_assert!(e.line >= 1 && e.line <= lines.len().max(1), "line {} of {}", e.line, lines.len());
                    prop_assert!(!e.msg.is_empty());
                }
            }
        }
    }
}

fn sample(name: &str) -> String {
    format!("{}/../maple-mm/tests/data/strace-sample/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The end snapshot, with the data file's device and inode as the log
/// shows them (unknown: it is in no earlier snapshot, nor on this machine).
fn end_maps_as_replayed() -> String {
    std::fs::read_to_string(sample("sample.end.maps"))
        .unwrap()
        .replace("fe:00 10035378                   /home", "00:00 0                          /home")
}

#[test]
fn replay_rebuilds_the_sample_from_plain_gzip_and_xz_logs() {
    let log = std::fs::read(sample("sample.strace")).unwrap();
    let dir = std::env::temp_dir().join(format!("maple-cli-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gz = dir.join("sample.strace.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&log).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let xz = dir.join("sample.strace.xz");
    let mut packed = Vec::new();
    lzma_rs::xz_compress(&mut &log[..], &mut packed).unwrap();
    std::fs::write(&xz, packed).unwrap();
    let maps = sample("sample.start.maps");
    for trace in [sample("sample.strace"), gz.display().to_string(), xz.display().to_string()] {
        let out = maple(&["replay", "--maps", &maps, "--from", "18", "--to", "38", &trace], None);
        assert!(out.status.success(), "{trace}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8(out.stdout).unwrap(), end_maps_as_replayed(), "{trace}");
    }
    // From standard input, every process.
    let text = String::from_utf8(log).unwrap();
    let out = maple(&["replay", "--maps", &maps, "--from", "18", "--all", "-"], Some(&text));
    assert!(out.status.success());
    let all = String::from_utf8(out.stdout).unwrap();
    assert!(all.contains("# pid 11146\n") && all.contains("# pid 11147\n"), "{all}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A window of lines that holds none is an error, not an empty address
/// space printed as if it were the answer.
#[test]
fn replay_rejects_an_empty_window() {
    let log = "1 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10000\n";
    for (args, msg) in [
        (&["--from", "0"][..], "--from 0: lines are numbered from 1"),
        (&["--to", "0"][..], "--to 0: lines are numbered from 1"),
        (&["--from", "5", "--to", "2"][..], "--from 5 is not before --to 2"),
        (&["--from", "3", "--to", "3"][..], "--from 3 is not before --to 3"),
        (&["--from", "5"][..], "-: --from 5 is past the end of the log (1 line)"),
    ] {
        let mut all = vec!["replay"];
        all.extend_from_slice(args);
        all.push("-");
        let out = maple(&all, Some(log));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(msg), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing printed");
    }
    // The last line as the window's start is fine.
    let out = maple(&["replay", "--from", "1", "-"], Some(log));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Two overlapping calls whose order no result in the log decides, the
/// layouts differing: the replay says so, naming both lines.
#[test]
fn replay_says_where_the_log_cannot_decide_an_order() {
    let log = "\
1 clone(child_stack=0x7f0000000000, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM) = 2
1 mmap(NULL, 12288, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10000000
1 mprotect(0x10001000, 8192, PROT_READ <unfinished ...>
2 mprotect(0x10000000, 12288, PROT_NONE <unfinished ...>
1 <... mprotect resumed>) = 0
2 <... mprotect resumed>) = 0
";
    let out = maple(&["replay", "-"], Some(log));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("-:5 and -:6: the log cannot decide the order of these calls"), "{err}");
}

#[test]
fn replay_errors_name_the_line() {
    let out = maple(
        &["replay", "-"],
        Some("1 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10000\n1 mmap(NULL\n"),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr).unwrap().contains("-:2: "));
    // A bad number names the argument and says a number was wanted.
    let out = maple(&["replay", "-"], Some("1 munmap(0xzz, 4096) = 0\n"));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("-:1: munmap: argument 1: not a number: \"0xzz\""), "{err}");
    let out = maple(&["replay", "--lenient", "-"], Some("1 mmap(NULL\n1 munmap(0x10000, 4096) = 0\n"));
    assert!(out.status.success());
    assert!(String::from_utf8(out.stderr).unwrap().contains("skipped 1 malformed line"));
    let out = maple(&["replay", "--pid", "99", "-"], Some("1 munmap(0x10000, 4096) = 0\n"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr).unwrap().contains("pid 99 does not appear"));
    let out = maple(&["replay", "/nonexistent/log"], None);
    assert_eq!(out.status.code(), Some(2));
    let out = maple(&["replay", "--maps", "/nonexistent/maps", "-"], Some(""));
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn maps_summary_find_and_diff() {
    let end = sample("sample.end.maps");
    let out = maple(&["maps", &end], None);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("31 VMAs"), "{text}");
    assert!(text.contains("largest gaps"));
    let out = maple(&["maps", &end, "--find", "0x7fc8ed633000"], None);
    assert!(String::from_utf8(out.stdout).unwrap().contains("7fc8ed632000-7fc8ed634000 rw-p"));
    let out = maple(&["maps", &end, "--find", "0x7fc8ed63c000"], None);
    assert!(String::from_utf8(out.stdout).unwrap().contains("is not mapped; the next mapping"));
    let out = maple(&["maps", "--diff", &sample("sample.start.maps"), &end], None);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("+ 7fc8ed838000-7fc8ed840000 r--s"), "{text}");
    assert!(text.contains("1 removed, 9 added"), "{text}");
    // This process, live.
    let out = maple(&["maps"], None);
    assert!(out.status.success());
    let out = maple(&["maps", "/nonexistent/maps"], None);
    assert_eq!(out.status.code(), Some(2));
    let bad = std::env::temp_dir().join(format!("maple-bad-maps-{}", std::process::id()));
    std::fs::write(&bad, "00400000-00401000 r-xp 00000000 08:01 12 /x\nnot a line\n").unwrap();
    let out = maple(&["maps", bad.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr).unwrap().contains(":2: "));
    std::fs::remove_file(bad).unwrap();
}

#[test]
fn replay_draws_an_svg() {
    let svg = std::env::temp_dir().join(format!("maple-replay-{}.svg", std::process::id()));
    let out = maple(&["replay", "--svg", svg.to_str().unwrap(), &sample("sample.strace")], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
    for what in ["VMAs per process", "mapped MiB per process", "where the first process", "11146: ", "11147: "] {
        assert!(text.contains(what), "missing {what}");
    }
    assert!(text.matches("<rect").count() > 5, "no bands drawn");
    std::fs::remove_file(svg).unwrap();
}

/// A child that lives for three lines of a long log is drawn, with its
/// last state, and the legend stands beside the charts.
#[test]
fn the_picture_shows_every_process_and_its_last_state() {
    let mut log = String::new();
    for i in 0..400u64 {
        log += &format!(
            "100 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = {:#x}\n",
            0x7f00_0000_0000u64 + i * 0x10000
        );
        if i == 201 {
            log += "100 clone(child_stack=NULL, flags=SIGCHLD) = 101\n";
            log += "101 mmap(NULL, 8192, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7e0000000000\n";
            log += "101 +++ exited with 0 +++\n";
        }
    }
    let dir = std::env::temp_dir().join(format!("maple-picture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (file, svg) = (dir.join("short.strace"), dir.join("short.svg"));
    std::fs::write(&file, log).unwrap();
    let out = maple(&["replay", "--svg", svg.to_str().unwrap(), file.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&svg).unwrap();
    // The child's last state: the parent's 202 VMAs and its own.
    assert!(text.contains("● 101: 203 VMAs"), "{text}");
    assert!(text.contains("○ 100: 400 VMAs"), "{text}");
    // The legend's text starts right of the charts (1,040 pixels wide).
    let legend_x: Vec<u32> = text
        .split("<text ")
        .skip(1)
        .filter(|t| t.contains("VMAs,"))
        .filter_map(|t| t.split("x=\"").nth(1)?.split('"').next()?.parse().ok())
        .collect();
    assert!(!legend_x.is_empty() && legend_x.iter().all(|&x| x >= 1040), "{legend_x:?}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[cfg(target_os = "linux")]
#[test]
fn swap_extents_of_a_file() {
    let dir = std::env::temp_dir().join(format!("maple-cli-swap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("swapfile");
    std::fs::write(&path, vec![7u8; 64 * 4096]).unwrap();
    let out = maple(&["swap-extents", "--json", path.to_str().unwrap()], None);
    if out.status.code() == Some(1) && String::from_utf8_lossy(&out.stderr).contains("does not report file extents") {
        eprintln!("FIEMAP not supported here: skipped");
    } else {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("\"pages\":64") && text.contains("\"first_page\":0"), "{text}");
        // The listing: every extent, swap pages to disk blocks.
        let out = maple(&["swap-extents", path.to_str().unwrap()], None);
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("of 64 pages") && text.contains("swap pages"), "{text}");
        let pages: u64 =
            text.lines().skip(2).map(|l| l.split_whitespace().last().unwrap().parse::<u64>().unwrap()).sum();
        assert_eq!(pages, 64, "{text}");
    }
    // Bad input: exit 2, the file named, the reason in words.
    let out = maple(&["swap-extents", "/nonexistent/swapfile"], None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/swapfile: no such file or directory") && !err.contains("os error"), "{err}");
    let out = maple(&["swap-extents", dir.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2), "a directory is not a swap file");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a regular file"));
    let empty = dir.join("empty");
    std::fs::write(&empty, b"").unwrap();
    let out = maple(&["swap-extents", empty.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2), "an empty file");
    // A file with a hole is refused, as swapon refuses it.
    let holey = dir.join("holey");
    let f = std::fs::File::create(&holey).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[1u8; 4096], 1 << 20).unwrap();
    f.sync_all().unwrap();
    let out = maple(&["swap-extents", holey.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_command_states_the_exit_status_rule() {
    let out = maple(&["--help"], None);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Exit status, every command: 0 success; 1"), "{text}");
    assert!(!text.contains("report"), "the report is a program of its own: {text}");
}

#[test]
fn addresses_read_as_proc_prints_them() {
    let file = data("../../../maple-mm/tests/data/strace-sample/sample.start.maps");
    // The first mapping's start, bare (as maps prints it), with 0x, and in
    // capitals: the same answer.
    let first = std::fs::read_to_string(&file).unwrap().split('-').next().unwrap().to_string();
    let bare = maple(&["maps", &file, "--find", &first], None);
    assert!(bare.status.success(), "{}", String::from_utf8_lossy(&bare.stderr));
    let with_0x = maple(&["maps", &file, "--find", &format!("0x{first}")], None);
    let upper = maple(&["maps", &file, "--find", &first.to_uppercase()], None);
    assert_eq!(bare.stdout, with_0x.stdout);
    assert_eq!(bare.stdout, upper.stdout);
    assert!(String::from_utf8(bare.stdout).unwrap().contains(" is in\n"));
    let bad = maple(&["maps", &file, "--find", "0xzz"], None);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn conflicting_or_unused_arguments_are_errors() {
    let maps = sample("sample.start.maps");
    for args in [
        &["maps", "12345678", "--diff", "a", "b"][..],
        &["maps", "--find", "0x0", "--diff", "a", "b"][..],
        &["replay", "--maps", &maps, &sample("sample.strace")][..],
        &["replay", "--all", "--pid", "1", &sample("sample.strace")][..],
    ] {
        let out = maple(args, None);
        assert_eq!(out.status.code(), Some(2), "{args:?} was accepted");
        assert!(out.stdout.is_empty(), "{args:?} printed output");
    }
}

#[test]
fn maps_and_replay_speak_json() {
    let file = sample("sample.start.maps");
    let out = maple(&["maps", "--json", &file], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lines = std::fs::read_to_string(&file).unwrap().lines().count();
    assert_eq!(v["vmas"].as_array().unwrap().len(), lines);
    let first = &v["vmas"][0];
    assert!(first["start"].as_u64().unwrap() < first["end"].as_u64().unwrap());
    assert_eq!(first["perms"].as_str().unwrap().len(), 4);
    let start = first["start"].as_u64().unwrap();
    let out = maple(&["maps", "--json", &file, "--find", &format!("{start:x}")], None);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((v["mapped"].as_bool(), v["in"]["start"].as_u64()), (Some(true), Some(start)));
    let out = maple(&["maps", "--json", "--diff", &file, &file], None);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["removed"].as_array().unwrap().len() + v["added"].as_array().unwrap().len(), 0);
    // Replay: the same VMAs as the maps lines it prints without --json.
    let log = sample("sample.strace");
    let text = String::from_utf8(maple(&["replay", &log], None).stdout).unwrap();
    let out = maple(&["replay", "--json", &log], None);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let json_lines: Vec<&str> = v["vmas"].as_array().unwrap().iter().map(|x| x["line"].as_str().unwrap()).collect();
    assert_eq!(json_lines, text.lines().collect::<Vec<_>>());
    let out = maple(&["replay", "--json", "--all", &log], None);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.as_array().unwrap().len() >= 2);
}

#[test]
fn lenient_replay_names_the_lines_it_skips() {
    let log = "11146 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f0000000000\n\
               11146 mmap(garbage\n\
               11146 munmap(0x7f0000000000, 4096) = 0\n\
               11146 mprotect(( = 0\n";
    let out = maple(&["replay", "--lenient", "-"], Some(log));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("skipped 2 malformed line(s)"), "{err}");
    assert!(err.contains("-:2: ") && err.contains("-:4: "), "{err}");
}

#[test]
fn log_only_replay_does_not_depend_on_this_machine() {
    let log = sample("sample.strace");
    let out = maple(&["replay", "--log-only", &log], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    // Files are told apart by path, numbered by first appearance; no
    // device or inode comes from this machine's file system.
    let libc: Vec<&str> = text.lines().filter(|l| l.ends_with("libc.so.6")).collect();
    assert!(!libc.is_empty(), "{text}");
    for l in &libc {
        let f: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(f[3], "00:00", "{l}");
        assert_eq!(f[4], libc[0].split_whitespace().nth(4).unwrap(), "one file, one inode: {l}");
        assert_ne!(f[4], "0");
    }
    assert!(text.lines().all(|l| l.split_whitespace().nth(3) == Some("00:00")), "{text}");
}

#[test]
fn a_log_without_pids_says_so() {
    let log: String = std::fs::read_to_string(sample("sample.strace"))
        .unwrap()
        .lines()
        .filter(|l| !l.contains("clone") && !l.contains("+++") && !l.contains("---") && !l.contains("wait4"))
        .map(|l| l.split_once(' ').map_or(l, |x| x.1).to_string() + "\n")
        .collect();
    let out = maple(&["replay", "--all", "-"], Some(&log));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("# the first process (the log names no pid for it"), "{text}");
    let out = maple(&["replay", "--json", "-"], Some(&log));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["pid"].is_null() && !v["vmas"].as_array().unwrap().is_empty());
}

#[test]
fn per_process_files_replay_as_one_log() {
    // The sample log with -tt timestamps, and the same lines split into
    // per-process files as `strace -ff -tt` writes them.
    let dir = std::env::temp_dir().join(format!("maple-ff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(sample("sample.strace")).unwrap();
    let mut single = String::new();
    let mut per: std::collections::BTreeMap<String, String> = Default::default();
    for (i, line) in text.lines().enumerate() {
        let (pid, rest) = line.split_once(' ').unwrap();
        let stamp = format!("12:00:{:02}.{:06}", i / 1000, i % 1000 * 7);
        single += &format!("{pid} {stamp} {rest}\n");
        *per.entry(pid.to_string()).or_default() += &format!("{stamp} {rest}\n");
    }
    let whole = dir.join("single.strace");
    std::fs::write(&whole, single).unwrap();
    let mut files = Vec::new();
    for (pid, lines) in &per {
        let f = dir.join(format!("log.{pid}"));
        std::fs::write(&f, lines).unwrap();
        files.push(f.to_str().unwrap().to_string());
    }
    assert!(files.len() >= 2, "the sample has a child");
    let want = maple(&["replay", "--all", whole.to_str().unwrap()], None);
    assert!(want.status.success(), "{}", String::from_utf8_lossy(&want.stderr));
    let mut args = vec!["replay", "--all"];
    args.extend(files.iter().map(String::as_str));
    let got = maple(&args, None);
    assert!(got.status.success(), "{}", String::from_utf8_lossy(&got.stderr));
    assert_eq!(String::from_utf8(got.stdout).unwrap(), String::from_utf8(want.stdout).unwrap());
    // Files without timestamps cannot be put in order: said, with the line.
    let bare = dir.join("bare.123");
    std::fs::write(&bare, "brk(NULL) = 0x1000\n").unwrap();
    let out = maple(&["replay", bare.to_str().unwrap(), &files[0]], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bare.123:1: no timestamp"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `replay --events`: one JSON object per change, with its line; the
/// bytes mapped and unmapped per process add up to each final space.
#[test]
fn replay_events_add_up_to_the_final_spaces() {
    let log = sample("sample.strace");
    let out = maple(&["replay", "--events", "--log-only", &log], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut mapped: std::collections::BTreeMap<u64, i64> = Default::default();
    let mut last_line = 0;
    let text = String::from_utf8(out.stdout).unwrap();
    for l in text.lines() {
        let j: serde_json::Value = serde_json::from_str(l).unwrap();
        let line = j["line"].as_u64().unwrap();
        assert!(line >= last_line, "changes out of order: {l}");
        last_line = line;
        let len = (j["end"].as_u64().unwrap() - j["start"].as_u64().unwrap()) as i64;
        let pid = j["pid"].as_u64().unwrap();
        match j["change"].as_str().unwrap() {
            "mapped" => *mapped.entry(pid).or_default() += len,
            "unmapped" => *mapped.entry(pid).or_default() -= len,
            "changed" => assert!(j["old"]["perms"].is_string() && j["new"]["perms"].is_string(), "{l}"),
            "moved" => assert!(j["from"]["start"].is_u64(), "{l}"),
            other => panic!("unknown change {other}"),
        }
    }
    assert!(text.lines().count() > 10);
    // The heap's pages are told with the label the maps file gives them.
    let heap =
        |j: &serde_json::Value| j["new"]["name"] == "[heap]" && j["new"]["line"].as_str().unwrap().ends_with("[heap]");
    assert!(text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).any(|j| heap(&j)), "{text}");
    let out = maple(&["replay", "--all", "--json", "--log-only", &log], None);
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for p in all.as_array().unwrap() {
        let pid = p["pid"].as_u64().unwrap();
        let total: i64 = p["vmas"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (v["end"].as_u64().unwrap() - v["start"].as_u64().unwrap()) as i64)
            .sum();
        assert_eq!(mapped.get(&pid).copied().unwrap_or(0), total, "pid {pid}");
    }
}

/// A log recorded on an arm64 machine with 64 KiB pages: lengths round to
/// its pages and the kernel's addresses lie in its 48-bit range; read as
/// x86-64, the model disagrees with the log from its first line on.
#[test]
fn replay_takes_the_recording_machines_layout() {
    let log = "100 mmap(NULL, 100, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0xfffff7ff0000\n\
               100 mprotect(0xfffff7ff0000, 1, PROT_READ) = 0\n\
               100 mmap(0xfff000000000, 4096, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED, -1, 0) = 0xfff000000000\n";
    let out = maple(&["replay", "--layout", "arm64-64k", "-"], Some(log));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text,
        "fff000000000-fff000010000 r--p 00000000 00:00 0 \nfffff7ff0000-fffff8000000 r--p 00000000 00:00 0 \n"
    );
    let out = maple(&["replay", "--layout", "x86-64", "-"], Some(log));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(":1: mmap: the kernel gave success, the model ENOMEM"), "{err}");
    assert!(out.stdout.is_empty());
    let out = maple(&["replay", "--layout", "sparc", "-"], Some(log));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("arm64-16k"));
}

/// A maps file saved on another machine is read with its layout; a live
/// process has this one's.
#[test]
fn maps_takes_a_files_layout() {
    let dir = std::env::temp_dir().join(format!("maple-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("maps");
    std::fs::write(
        &file,
        "fffff7fe0000-fffff8000000 rw-p 00000000 00:00 0 \nfffffffd0000-1000000000000 rw-p 00000000 00:00 0 [stack]\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let out = maple(&["maps", "--layout", "arm64-64k", f], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("2 VMAs"));
    // Above x86-64's top, and off 64 KiB pages: each refused with its line.
    let out = maple(&["maps", "--layout", "x86-64", f], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(":1: fffff7fe0000-fffff8000000 ends above the top of user space")
    );
    std::fs::write(&file, "fffff7fe0000-fffff7ff1000 rw-p 00000000 00:00 0 \n").unwrap();
    let out = maple(&["maps", "--layout", "arm64-64k", f], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(":1: fffff7fe0000-fffff7ff1000 is not on 64 KiB pages"));
    let out = maple(&["maps", "--layout", "arm64", &std::process::id().to_string()], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a live process"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Output that cannot be written (a full disk) is an error naming why,
/// exit 1, never a panic; a reader that goes away (`| head`) ends maple
/// quietly with success, as coreutils do. Every subcommand that prints.
#[cfg(target_os = "linux")]
#[test]
fn output_errors_are_errors_and_a_closed_pipe_ends_quietly() {
    use std::io::Read;
    let sample = format!("{}/../maple-mm/tests/data/strace-sample", env!("CARGO_MANIFEST_DIR"));
    let (maps, start) = (format!("{sample}/sample.end.maps"), format!("{sample}/sample.start.maps"));
    let ops = data("demo.ops");
    let log = format!("{}/tests/data/race/race1.strace.gz", env!("CARGO_MANIFEST_DIR"));
    let me = std::process::id().to_string();
    let runs: Vec<Vec<&str>> = vec![
        vec!["maps", &maps],
        vec!["maps", "--json", &maps],
        vec!["maps", &me],
        vec!["maps", "--diff", &start, &maps],
        vec!["swap-extents", &log],
        vec!["replay", "--all", &log],
        vec!["ops", "--validate", &ops],
    ];
    for args in &runs {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_maple")).args(args).stdout(full).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        // (A swap file refused for its extents writes nothing.)
        if o.status.code() != Some(2) {
            assert_eq!(o.status.code(), Some(1), "{args:?}: {stderr}");
            assert!(stderr.contains("no space left on device"), "{args:?}: {stderr}");
        }
        // A reader that takes ten bytes and goes.
        let mut child = Command::new(env!("CARGO_BIN_EXE_maple"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut head = [0u8; 10];
        let _ = child.stdout.take().unwrap().read(&mut head);
        let o = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!stderr.contains("panicked") && !stderr.contains("cannot write"), "{args:?}: {stderr}");
        assert!(matches!(o.status.code(), Some(0 | 2)), "{args:?}: {stderr}");
    }
}

/// Output paths are checked before any work, and a failed run leaves no
/// output behind; a log cut off mid-line (strace stopped) says how to
/// replay what is there.
#[test]
fn outputs_are_checked_first_and_a_cut_log_says_so() {
    let dir = std::env::temp_dir().join(format!("maple-cli-outputs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.log");
    std::fs::write(&empty, "").unwrap();
    let svg = dir.join("e.svg");
    let o = maple(&["replay", "--svg", svg.to_str().unwrap(), empty.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(!svg.exists(), "a picture of nothing was left behind");
    let o = maple(&["replay", "--svg", "/nonexistent/x.svg", empty.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot create /nonexistent/x.svg: no such file or directory"));
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        let mark = dir.join("ran");
        let touch = format!("touch {}", mark.display());
        let o = maple(&["trace", "--svg", "/nonexistent/x.svg", "sh", "-c", &touch], None);
        assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(!mark.exists(), "the command ran before its output was refused");
    }
    let cut = dir.join("cut.log");
    std::fs::write(
        &cut,
        "1 mmap(NULL, 4096, PROT_READ, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x10000\n1 munmap(0x10000, 40",
    )
    .unwrap();
    let o = maple(&["replay", cut.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(":2: ") && String::from_utf8_lossy(&o.stderr).contains("--lenient")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What strace prints besides calls: its own messages, even in the
/// middle of a call's line when it writes to a terminal with the
/// program's output (`clone(…strace: Process 7 attached` then the rest
/// of the call on the next line), the decorations of `-i`, `-n`, `-k` and
/// `--decode-pids=comm`: read, not refused.
#[test]
fn strace_messages_and_decorations_are_read() {
    let log = "\
mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f0000000000
clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLDstrace: Process 7 attached
, child_tidptr=0x7f1310902a10) = 7
[pid     7] munmap(0x7f0000000000, 4096) = 0
strace: Process 7 detached
9<sh> [  11] [00007f6cd1561ca3] munmap(0x7f0000001000, 4096) = 0
 > /usr/lib/x86_64-linux-gnu/libc.so.6(munmap+0xb) [0x11ba26]
[pid 7<sh>] [????????????????] +++ exited with 0 +++
";
    let o = maple(&["replay", "--all", "-"], Some(log));
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("# pid 7\n7f0000001000-7f0000002000 rw-p"), "{stdout}");
}

/// A log replayed with a layout of larger pages than the machine it was
/// recorded on had: said, not replayed silently.
#[test]
fn a_layout_with_larger_pages_than_the_log_s_is_reported() {
    let log = format!("{}/tests/data/race/race1.strace.gz", env!("CARGO_MANIFEST_DIR"));
    let o = maple(&["replay", "--layout", "arm64-16k", &log], None);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("not on this layout's 16384-byte pages"), "{stderr}");
    let o = maple(&["replay", &log], None);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("pages:"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `maple maps -x PID` lists every mapping of a live process, field by
/// field as its `/proc/PID/smaps` gives them; the totals add up.
#[test]
#[cfg(target_os = "linux")]
fn the_listing_of_a_live_process_is_its_smaps() {
    let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id().to_string();
    // Until its exec is done the child is this test's copy, and until
    // its loader is done it maps: it is settled asleep in its sleep.
    let exe = |p: &str| std::fs::read_link(format!("/proc/{p}/exe")).ok();
    let asleep = |p: &str| {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        stat.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('S'))
    };
    for _ in 0..1000 {
        if exe(&pid).is_some_and(|e| e.ends_with("sleep")) && asleep(&pid) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let out = maple(&["maps", "-x", &pid], None);
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    // smaps: each VMA's maps line, then its fields.
    let mut want = Vec::new();
    for l in smaps.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() >= 5 && f[0].contains('-') && !f[0].ends_with(':') {
            let (s, e) = f[0].split_once('-').unwrap();
            let name = if f.len() > 5 { f[5..].join(" ") } else { "[ anon ]".into() };
            let size = (u64::from_str_radix(e, 16).unwrap() - u64::from_str_radix(s, 16).unwrap()) / 1024;
            want.push(vec![
                format!("{:0>16}", s),
                size.to_string(),
                String::new(),
                f[1].to_string(),
                f[2].to_string(),
                f[3].to_string(),
                f[4].to_string(),
                name,
            ]);
        } else if let Some(kb) = l.strip_prefix("Rss:") {
            let last = want.last_mut().unwrap();
            last[2] = kb.trim().trim_end_matches(" kB").to_string();
            // smaps gives Size too: the same as the range's.
        } else if let Some(kb) = l.strip_prefix("Size:") {
            assert_eq!(want.last().unwrap()[1], kb.trim().trim_end_matches(" kB"));
        }
    }
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["Address", "Kbytes", "RSS", "Mode", "Offset", "Device", "Inode", "Mapping"]);
    let rows: Vec<Vec<String>> = lines
        .clone()
        .take_while(|l| !l.starts_with("total"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let mut row: Vec<String> = f[..7].iter().map(|s| s.to_string()).collect();
            row.push(f[7..].join(" "));
            row
        })
        .collect();
    assert_eq!(rows, want, "{text}");
    let total: Vec<&str> = lines.last().unwrap().split_whitespace().collect();
    let sum = |i: usize| want.iter().map(|r| r[i].parse::<u64>().unwrap()).sum::<u64>().to_string();
    assert_eq!(total, ["total", "kB", &sum(1), &sum(2)]);
    // The same in JSON, in bytes.
    let file = sample("sample.start.maps");
    let out = maple(&["maps", "-x", "--json", &file], None);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &v["vmas"][0];
    assert_eq!(first["size"].as_u64(), Some(first["end"].as_u64().unwrap() - first["start"].as_u64().unwrap()));
    assert!(first["rss"].is_null(), "a maps file has no resident sizes");
    let text = String::from_utf8(maple(&["maps", "-x", &file], None).stdout).unwrap();
    assert!(text.lines().nth(1).unwrap().split_whitespace().nth(2) == Some("-"), "{text}");
}

/// The summary's JSON holds every figure its text shows.
#[test]
fn the_summary_s_json_holds_what_its_text_shows() {
    let file = sample("sample.end.maps");
    let text = String::from_utf8(maple(&["maps", &file], None).stdout).unwrap();
    let out = maple(&["maps", "--json", &file], None);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in ["mapped", "file", "anonymous", "shared", "heap", "stack", "written"] {
        assert!(v[key].is_u64(), "{key}: {v}");
    }
    assert!(text.contains("heap") && v["heap"].as_u64().unwrap() > 0, "{text}");
    assert_eq!(v["guard_pages"]["pages"].as_u64(), Some(0));
    let limits: Vec<&str> = v["limits"].as_array().unwrap().iter().map(|l| l["resource"].as_str().unwrap()).collect();
    assert_eq!(limits, ["RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_MEMLOCK", "RLIMIT_STACK"]);
    for l in v["limits"].as_array().unwrap() {
        assert!(text.contains(l["resource"].as_str().unwrap()));
    }
    // The protections and gaps, as the text lists them.
    for (p, b) in v["by_protection"].as_object().unwrap() {
        assert!(text.contains(&format!("  {p} ")), "{p}");
        assert!(b.as_u64().unwrap() > 0);
    }
    let gaps = v["largest_gaps"].as_array().unwrap();
    assert!(!gaps.is_empty());
    for g in gaps {
        let (s, e) = (g["start"].as_u64().unwrap(), g["end"].as_u64().unwrap());
        assert!(text.contains(&format!("  {s:x}-{e:x}  ")), "{s:x}-{e:x}");
        assert_eq!(g["bytes"].as_u64(), Some(e - s));
    }
}

/// `--diff` marks a VMA that changed as changed, says which fields, and
/// counts apart what no memory call shows (as `trace --verify` does).
#[test]
fn a_diff_marks_what_changed() {
    let dir = std::env::temp_dir().join(format!("maple-diff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.maps"), dir.join("b.maps"));
    std::fs::write(
        &a,
        "00400000-00402000 r-xp 00000000 08:01 12 /bin/x\n\
         7f0000000000-7f0000004000 rw-p 00000000 00:00 0 \n\
         7f0000010000-7f0000011000 rw-s 00000000 00:01 1044 /dev/zero (deleted)\n\
         7f0000020000-7f0000021000 r--p 00000000 00:00 0 \n",
    )
    .unwrap();
    std::fs::write(
        &b,
        "00400000-00402000 r-xp 00000000 08:01 12 /bin/x\n\
         7f0000000000-7f0000002000 r--p 00000000 00:00 0 \n\
         7f0000010000-7f0000011000 rw-s 00000000 00:01 7 /dev/zero (deleted)\n\
         7f0000030000-7f0000031000 r--p 00000000 00:00 0 \n",
    )
    .unwrap();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let text = String::from_utf8(maple(&["maps", "--diff", a, b], None).stdout).unwrap();
    assert!(text.contains("~ 7f0000000000-7f0000004000 rw-p"), "{text}");
    assert!(text.contains("\n  7f0000000000-7f0000002000 r--p"), "{text}");
    assert!(text.contains("(end, perms changed)"), "{text}");
    assert!(text.contains("- 7f0000020000-7f0000021000") && text.contains("+ 7f0000030000-7f0000031000"), "{text}");
    assert!(!text.contains("- 7f0000000000"), "a change is not a removal: {text}");
    assert!(text.contains("1 removed, 1 added, 1 changed, 1 equal but for"), "{text}");
    let out = maple(&["maps", "--json", "--diff", a, b], None);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &v["changed"][0];
    assert_eq!(c["before"]["end"].as_u64(), Some(0x7f00_0000_4000));
    assert_eq!(c["after"]["perms"].as_str(), Some("r--p"));
    assert_eq!(c["fields"], serde_json::json!(["end", "perms"]));
    assert_eq!(v["removed"][0]["start"].as_u64(), Some(0x7f00_0002_0000));
    assert_eq!(v["equal_but_unseen"].as_u64(), Some(1));
    std::fs::remove_dir_all(dir).unwrap();
}

/// Every command says what it could not do in the same words: `maple:`,
/// then `cannot read PATH: reason` (lower case, no error number) for a
/// file it cannot read, and `no process PID` for a pid that is gone.
#[test]
fn errors_speak_in_one_voice() {
    let gone = "/nonexistent/x";
    let cases: Vec<(Vec<&str>, String)> = vec![
        (vec!["maps", gone], format!("cannot read {gone}: no such file or directory")),
        (vec!["maps", "-x", gone], format!("cannot read {gone}: no such file or directory")),
        (vec!["maps", "--diff", gone, gone], format!("cannot read {gone}: no such file or directory")),
        (vec!["maps", "99999999999"], "bad pid 99999999999".into()),
        (vec!["maps", "4194303"], "no process 4194303".into()),
        (vec!["replay", gone], format!("cannot read {gone}: no such file or directory")),
        (vec!["swap-extents", gone], format!("cannot read {gone}: no such file or directory")),
        (vec!["ops", gone], format!("cannot read {gone}: no such file or directory")),
    ];
    for (args, want) in cases {
        let out = maple(&args, None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end(), format!("maple: {want}"), "{args:?}");
    }
}
