//! `maple replay`: rebuild the address spaces of an strace log.

use std::{
    fs::File,
    io::{self, BufRead, BufReader, Read, Write},
    path::Path,
    sync::mpsc,
};

use indicatif::{ProgressBar, ProgressStyle};
use maple_mm::{
    strace::{ReplayChange, ReplayOptions, Replayer},
    AddressSpace, Change, Layout,
};

/// Options of `maple replay`.
#[derive(Debug, Default)]
pub struct Args {
    /// The initial maps of the root process.
    pub maps: Option<String>,
    /// See [`ReplayOptions::from`].
    pub from: Option<usize>,
    /// See [`ReplayOptions::to`].
    pub to: Option<usize>,
    /// Which process to print (default: the root).
    pub pid: Option<u32>,
    /// Print every process.
    pub all: bool,
    /// Skip malformed lines.
    pub lenient: bool,
    /// Draw the address spaces over the log into this SVG file.
    pub svg: Option<String>,
    /// Print JSON instead of maps lines.
    pub json: bool,
    /// Look nothing up on this machine (see [`ReplayOptions::log_only`]).
    pub log_only: bool,
    /// Print each line's changes as JSON lines instead of the final maps
    /// (see [`Replayer::record_changes`]).
    pub events: bool,
    /// The layout of the machine the log was recorded on (see
    /// [`ReplayOptions::layout`]).
    pub layout: Layout,
}

/// Why `maple replay` failed: a message for the user and an exit code.
#[derive(Debug)]
pub struct Failure {
    /// What to print after `maple: `.
    pub msg: String,
    /// 2 for bad input, 1 otherwise.
    pub code: u8,
}

/// Refuses an output file that cannot be written before any work is
/// done. Nothing is left behind: a file that was not there is removed
/// again, one that was is opened without truncating it.
pub fn writable(path: &str) -> Result<(), Failure> {
    let existed = std::path::Path::new(path).exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| fail(format!("cannot create {path}: {}", crate::io_reason(&e))))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// `" (threads 12, 13)"` after a process's heading, or nothing.
pub fn threads_note(threads: &[u32]) -> String {
    if threads.is_empty() {
        return String::new();
    }
    let list: Vec<String> = threads.iter().map(u32::to_string).collect();
    format!(" (threads {})", list.join(", "))
}

impl Failure {
    /// Output that could not be written: exit 1 naming why; a reader
    /// that went away (a closed pipe, `| head`) ends maple quietly, as
    /// coreutils do (code 0, no message).
    pub fn output(e: &io::Error) -> Failure {
        if e.kind() == io::ErrorKind::BrokenPipe {
            return Failure { msg: String::new(), code: 0 };
        }
        Failure { msg: format!("cannot write the output: {}", crate::io_reason(e)), code: 1 }
    }
}

fn fail(msg: String) -> Failure {
    Failure { msg, code: 2 }
}

/// A reader that gets its bytes from a thread (used for xz, whose decoder
/// writes rather than reads).
struct ChannelReader {
    rx: mpsc::Receiver<io::Result<Vec<u8>>>,
    buf: Vec<u8>,
    pos: usize,
}

impl Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.buf.len() {
            match self.rx.recv() {
                Ok(Ok(chunk)) => {
                    self.buf = chunk;
                    self.pos = 0;
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

struct ChannelWriter(mpsc::SyncSender<io::Result<Vec<u8>>>);

impl Write for ChannelWriter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.send(Ok(b.to_vec())).map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "reader gone"))?;
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Opens a log: plain, gzip or xz (by content), or standard input for `-`.
/// Also returns the compressed size for the progress bar, if known.
pub fn open_log(path: &str) -> Result<(Box<dyn BufRead>, Option<u64>), Failure> {
    let raw: Box<dyn Read + Send> = if path == "-" {
        Box::new(io::stdin())
    } else {
        Box::new(File::open(path).map_err(|e| fail(format!("cannot read {path}: {}", crate::io_reason(&e))))?)
    };
    let size = (path != "-").then(|| std::fs::metadata(path).map(|m| m.len()).ok()).flatten();
    let mut r = BufReader::with_capacity(1 << 16, raw);
    let head = r.fill_buf().map_err(|e| fail(format!("cannot read {path}: {}", crate::io_reason(&e))))?.to_vec();
    if head.starts_with(&[0x1f, 0x8b]) {
        return Ok((Box::new(BufReader::with_capacity(1 << 16, flate2::bufread::MultiGzDecoder::new(r))), size));
    }
    if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        let (tx, rx) = mpsc::sync_channel(16);
        std::thread::spawn(move || {
            let mut r = r;
            let mut w = io::BufWriter::with_capacity(1 << 16, ChannelWriter(tx.clone()));
            let res = lzma_rs::xz_decompress(&mut r, &mut w)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()));
            let res = res.and_then(|()| w.flush());
            if let Err(e) = res {
                let _ = tx.send(Err(e));
            }
        });
        let reader = ChannelReader { rx, buf: Vec::new(), pos: 0 };
        return Ok((Box::new(BufReader::with_capacity(1 << 16, reader)), size));
    }
    Ok((Box::new(r), size))
}

/// For each line of a merged log: the file (its index) and line it came
/// from.
type Origins = Vec<(usize, usize)>;

/// The lines of `strace -ff` per-process files (`LOG.PID`, one process
/// each, without the pid column), merged into one `strace -f` log in
/// timestamp order, and where each merged line came from.
fn merge_per_process(files: &[String]) -> Result<(Vec<u8>, Origins), Failure> {
    let mut lines: Vec<(f64, usize, usize, String)> = Vec::new();
    for (f, name) in files.iter().enumerate() {
        let pid: u32 = name
            .rsplit_once('.')
            .and_then(|(_, p)| p.parse().ok())
            .filter(|&p| p != 0)
            .ok_or_else(|| fail(format!("{name}: not a per-process file (strace -ff names them LOG.PID)")))?;
        let (mut log, _) = open_log(name)?;
        let mut buf = Vec::new();
        let mut no = 0;
        loop {
            buf.clear();
            let n = log
                .read_until(b'\n', &mut buf)
                .map_err(|e| fail(format!("cannot read {name}: {}", crate::io_reason(&e))))?;
            if n == 0 {
                break;
            }
            no += 1;
            let text = std::str::from_utf8(&buf).map_err(|_| fail(format!("{name}:{no}: not valid UTF-8")))?;
            let text = text.trim_end_matches(['\n', '\r']);
            let ts = timestamp(text).ok_or_else(|| {
                fail(format!("{name}:{no}: no timestamp: per-process files are put in order by their timestamps (record with strace -ff -tt or -ttt)"))
            })?;
            lines.push((ts, f, no, format!("{pid} {text}\n")));
        }
    }
    // Stable: lines of one file with equal stamps keep their order.
    lines.sort_by(|a, b| a.0.total_cmp(&b.0));
    let origin = lines.iter().map(|l| (l.1, l.2)).collect();
    Ok((lines.into_iter().flat_map(|l| l.3.into_bytes()).collect(), origin))
}

/// The timestamp a line starts with, in seconds: `-tt` (`HH:MM:SS.micro`),
/// `-t` (`HH:MM:SS`) or `-ttt` (`seconds.micro`).
fn timestamp(line: &str) -> Option<f64> {
    let word = line.split_whitespace().next()?;
    let parts: Vec<&str> = word.split(':').collect();
    match parts[..] {
        [h, m, sec] => Some(h.parse::<f64>().ok()? * 3600.0 + m.parse::<f64>().ok()? * 60.0 + sec.parse::<f64>().ok()?),
        [t] if t.contains('.') => t.parse().ok(),
        _ => None,
    }
}

/// One change as a JSON object (see `maple replay --events`).
pub fn change_json(c: &ReplayChange) -> serde_json::Value {
    // Each side's line as the process's maps file showed it (its heap and
    // stack labelled).
    let attrs = |v: Option<maple_mm::Vma<'_>>, line: &Option<String>| {
        v.map(|v| {
            let mut j = crate::maps::line_json(&v, line.clone().unwrap_or_else(|| v.to_string()));
            j["flags"] = v.flags().iter_names().map(|(n, _)| n).collect::<Vec<_>>().into();
            j
        })
    };
    let r = c.change.range();
    let kind = match &c.change {
        Change::Mapped { .. } => "mapped",
        Change::Unmapped { .. } => "unmapped",
        Change::Changed { .. } => "changed",
        Change::Moved { .. } => "moved",
    };
    let mut j = serde_json::json!({
        "line": c.line,
        "pid": c.pid,
        "change": kind,
        "start": r.start,
        "end": r.end,
    });
    if let Some(old) = attrs(c.change.old_vma(), &c.old_line) {
        j["old"] = old;
    }
    if let Some(new) = attrs(c.change.vma(), &c.new_line) {
        j["new"] = new;
    }
    if let Change::Moved { from, .. } = &c.change {
        j["from"] = serde_json::json!({ "start": from.start, "end": from.end });
    }
    j
}

/// Runs `maple replay` on `traces` (one `strace -f` log, or the
/// per-process files of `strace -ff`), printing to `out`.
pub fn run_logs(traces: &[String], args: &Args, out: &mut dyn Write) -> Result<(), Failure> {
    match traces {
        [one] => run(one, args, out),
        [] => Err(fail("no log given".into())),
        many => {
            if args.maps.is_some() || args.from.is_some() || args.to.is_some() {
                return Err(fail("--maps, --from and --to take a single log, not per-process files".into()));
            }
            let (text, origin) = merge_per_process(many)?;
            let locate = move |no: usize| match origin.get(no.wrapping_sub(1)) {
                Some(&(f, line)) => format!("{}:{line}", many[f]),
                None => format!("{}:?", many[0]),
            };
            run_on(Box::new(io::Cursor::new(text)), None, &many.join(" "), &locate, args, out)
        }
    }
}

/// Runs `maple replay` on `trace`, printing to `out`.
pub fn run(trace: &str, args: &Args, out: &mut dyn Write) -> Result<(), Failure> {
    let (log, size) = open_log(trace)?;
    run_on(log, size, trace, &|no| format!("{trace}:{no}"), args, out)
}

/// The replay of one log read from `log`; `locate` names the file and
/// line of a line number.
fn run_on(
    mut log: Box<dyn BufRead>,
    size: Option<u64>,
    trace: &str,
    locate: &dyn Fn(usize) -> String,
    args: &Args,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    // Line numbers count from 1, and the window must hold a line.
    for (name, n) in [("--from", args.from), ("--to", args.to)] {
        if n == Some(0) {
            return Err(fail(format!("{name} 0: lines are numbered from 1")));
        }
    }
    if let (Some(f), Some(t)) = (args.from, args.to) {
        if f >= t {
            return Err(fail(format!("--from {f} is not before --to {t}: no line would be replayed")));
        }
    }
    if let Some(svg) = &args.svg {
        writable(svg)?;
    }
    let initial = match &args.maps {
        Some(m) => Some(AddressSpace::from_maps_file_with(m, args.layout.clone()).map_err(|e| fail(e.to_string()))?),
        None => None,
    };
    let opts = ReplayOptions {
        from: args.from,
        to: args.to,
        lenient: args.lenient,
        log_only: args.log_only,
        layout: args.layout.clone(),
    };
    let mut replayer = Replayer::new(opts, initial);
    if args.events {
        replayer.record_changes();
    }
    let io = |e: io::Error| Failure::output(&e);
    let bar = progress(size);
    let mut line = Vec::new();
    let mut no = 0usize;
    let mut read = 0u64;
    let mut timeline = crate::picture::Timeline::default();
    // About 400 samples over a file of known size; every 256 lines else.
    let every = size.map_or(256, |s| ((s / 80) / 400).max(16)) as usize;
    loop {
        line.clear();
        let n = log
            .read_until(b'\n', &mut line)
            .map_err(|e| fail(format!("cannot read {trace}: {}", crate::io_reason(&e))))?;
        if n == 0 {
            break;
        }
        no += 1;
        read += n as u64;
        if no % 65_536 == 0 {
            if let Some(b) = &bar {
                b.set_position(read);
            }
        }
        if args.to.is_some_and(|t| no >= t) {
            break;
        }
        let text = match std::str::from_utf8(&line) {
            Ok(t) => t,
            Err(_) if args.lenient => {
                let _ = replayer.skip(no, "not valid UTF-8".into());
                continue;
            }
            Err(_) => return Err(fail(format!("{}: not valid UTF-8", locate(no)))),
        };
        // A last line without its newline: strace was stopped mid-line.
        let cut = !line.ends_with(b"\n");
        replayer.feed(no, text).map_err(|e| {
            let hint = if cut && e.line == no { " (the log ends mid-line; --lenient skips it)" } else { "" };
            fail(format!("{}: {}{hint}", locate(e.line), e.msg))
        })?;
        if args.events {
            for c in replayer.take_changes() {
                writeln!(out, "{}", change_json(&c)).map_err(io)?;
            }
        }
        if args.svg.is_some() {
            timeline.sample_if(no % every == 0, no, &replayer, args.pid);
        }
    }
    if args.svg.is_some() {
        timeline.sample(no, &replayer, args.pid);
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if let Some(f) = args.from.filter(|&f| f > no) {
        let s = if no == 1 { "" } else { "s" };
        return Err(fail(format!("{trace}: --from {f} is past the end of the log ({no} line{s})")));
    }
    let replay = replayer.finish().map_err(|e| fail(format!("{}: {}", locate(e.line), e.msg)))?;
    for c in &replay.changes {
        writeln!(out, "{}", change_json(c)).map_err(io)?;
    }
    // (Nothing to draw from a log without a process.)
    if args.svg.is_some() && replay.root.is_none() {
        return Err(fail(format!("{trace}: no process in the log")));
    }
    if let Some(svg) = &args.svg {
        crate::picture::draw(&timeline, svg, trace).map_err(|msg| Failure { msg, code: 1 })?;
        eprintln!("maple replay: wrote {svg}");
    }
    let s = &replay.stats;
    if s.skipped > 0 {
        let named: Vec<String> = s.skipped_lines.iter().map(|(no, msg)| format!("{}: {msg}", locate(*no))).collect();
        let more = if s.skipped > named.len() {
            format!("\n  … and {} more", s.skipped - named.len())
        } else {
            String::new()
        };
        eprintln!("maple replay: skipped {} malformed line(s):\n  {}{more}", s.skipped, named.join("\n  "));
    }
    if !s.execs.is_empty() {
        let shown: Vec<String> =
            s.execs.iter().take(5).map(|(line, pid)| format!("{} ({})", locate(*line), pid_name(*pid))).collect();
        let more = if s.execs.len() > 5 { format!(" and {} more", s.execs.len() - 5) } else { String::new() };
        eprintln!(
            "maple replay: execve at {}{more}: a new program's address space starts empty here (the layout the kernel gave it is not in the log; pass --maps and --from to start from a snapshot)",
            shown.join(", ")
        );
    }
    for d in s.disagreements.iter().take(10) {
        eprintln!("maple replay: {}: {}", locate(d.line), d.msg);
    }
    if s.disagreements.len() > 10 {
        eprintln!("maple replay: … {} more disagreements", s.disagreements.len() - 10);
    }
    if let Some(&(a, b)) = s.undecided.first() {
        let more = match s.undecided.len() {
            1 => String::new(),
            n => format!(" (and {} more pairs)", n - 1),
        };
        eprintln!(
            "maple replay: {} and {}: the log cannot decide the order of these calls{more}: they overlapped, either order gives every result it shows, and the layouts differ; the model took the order they returned in",
            locate(a),
            locate(b)
        );
    }
    if args.events {
        return Ok(());
    }
    let as_json = |pid: u32, space: &AddressSpace| serde_json::json!({ "pid": (pid != 0).then_some(pid), "vmas": space.iter().map(|v| crate::maps::vma_json(space, &v)).collect::<Vec<_>>() });
    if args.all {
        // Processes, each once, its threads named under it.
        let procs = replay.processes.iter().filter(|(pid, _)| replay.process_of(*pid).is_none());
        if args.json {
            let all: Vec<_> = procs
                .map(|(pid, space)| {
                    let mut j = as_json(*pid, space);
                    j["threads"] = serde_json::json!(replay.threads_of(*pid));
                    j
                })
                .collect();
            writeln!(out, "{}", serde_json::Value::Array(all)).map_err(io)?;
            return Ok(());
        }
        for (pid, space) in procs {
            writeln!(out, "# {}{}", pid_name(*pid), threads_note(&replay.threads_of(*pid))).map_err(io)?;
            write!(out, "{}", space.maps()).map_err(io)?;
        }
        return Ok(());
    }
    let pid = args.pid.or(replay.root).ok_or_else(|| fail(format!("{trace}: no process in the log")))?;
    let space = replay.space(pid).ok_or_else(|| fail(format!("{trace}: pid {pid} does not appear in the log")))?;
    if args.json {
        writeln!(out, "{}", as_json(pid, space)).map_err(io)?;
    } else {
        write!(out, "{}", space.maps()).map_err(io)?;
    }
    Ok(())
}

/// How a process is named in messages: its pid, or, in a log recorded
/// without `-f` (no pid on its lines), says so.
fn pid_name(pid: u32) -> String {
    if pid == 0 {
        "the first process (the log names no pid for it: strace names its lines only with -f and once another process exists; strace -f -o FILE names every line)".to_string()
    } else {
        format!("pid {pid}")
    }
}

fn progress(size: Option<u64>) -> Option<ProgressBar> {
    use std::io::IsTerminal;
    let size = size?;
    if !io::stderr().is_terminal() || size < (8 << 20) {
        return None;
    }
    let bar = ProgressBar::new(size);
    if let Ok(style) = ProgressStyle::with_template("{spinner} replaying {bytes}/{total_bytes} [{bar:30}] {eta}") {
        bar.set_style(style);
    }
    Some(bar)
}

/// Reads a maps source for `maple maps`: a pid (live process), a file, or
/// this process when none is given.
///
/// `layout` is for a maps file saved on another machine; a live process
/// has this machine's, and asking for another is an error.
pub fn load_maps(what: Option<&str>, layout: Option<&Layout>) -> Result<AddressSpace, Failure> {
    let live = |r| match layout {
        Some(_) => Err(fail(format!("--layout is for maps files: {r} is a live process, with this machine's layout"))),
        None => Ok(()),
    };
    let r = match what {
        None => {
            live("this process")?;
            AddressSpace::from_self()
        }
        Some(w) if !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()) => match w.parse() {
            Ok(pid) => {
                live(&format!("pid {pid}"))?;
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    return Err(fail(format!("no process {pid}")));
                }
                AddressSpace::from_pid(pid)
            }
            Err(_) => return Err(fail(format!("bad pid {w}"))),
        },
        Some(path) => {
            if !Path::new(path).exists() {
                return Err(fail(format!("cannot read {path}: no such file or directory")));
            }
            AddressSpace::from_maps_file_with(path, layout.cloned().unwrap_or_default())
        }
    };
    r.map_err(|e| match e.line {
        0 => fail(format!("cannot read {}: {}", e.file, e.msg)),
        _ => fail(e.to_string()),
    })
}
