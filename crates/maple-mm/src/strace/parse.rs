//! Reading `strace` output: one line into a pid, an optional timestamp and
//! an event, without allocating; arguments split and decoded on demand.
//!
//! Understood: `strace -f` with `-o` (`PID name(...)`) or to stderr
//! (`[pid PID] name(...)`, and no pid before the first child exists);
//! `-t`, `-tt`, `-ttt` and `-r` timestamps; `-y`/`-yy` file descriptor
//! decorations (`3</path>`); `-X raw|abbrev|verbose` flag styles; strings
//! cut by `-s`; `<unfinished ...>` / `<... NAME resumed>` pairs; signal,
//! exit, kill and attach lines. The return value is split at the last
//! `) = `, since arguments can contain that text.

use core::fmt;

/// One line of an strace log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line<'a> {
    /// The pid, if the line names one.
    pub pid: Option<u32>,
    /// What the line says.
    pub event: Event<'a>,
}

/// The return value of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ret<'a> {
    /// A value (addresses and pids included; negative values as such).
    Value(i64),
    /// `-1 ENAME (message)`: failed with this error name.
    Error(&'a str),
    /// `?`: no return (exit, or a call interrupted for good).
    Unknown,
}

/// What a line says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A whole call: `name(args) = ret`.
    Call {
        /// The system call.
        name: &'a str,
        /// The text between the parentheses.
        args: &'a str,
        /// The result.
        ret: Ret<'a>,
        /// The result as printed (with `-y`, `3</path>`).
        ret_text: &'a str,
    },
    /// The first half of a call: `name(args <unfinished ...>`.
    Unfinished {
        /// The system call.
        name: &'a str,
        /// The arguments printed so far.
        args: &'a str,
    },
    /// The second half: `<... name resumed>rest) = ret`.
    Resumed {
        /// The system call.
        name: &'a str,
        /// The rest of the arguments.
        args: &'a str,
        /// The result.
        ret: Ret<'a>,
        /// The result as printed.
        ret_text: &'a str,
    },
    /// `--- SIGNAME {...} ---`
    Signal,
    /// `+++ exited with N +++`
    Exited(i32),
    /// `+++ killed by SIGNAME +++`
    Killed,
    /// `strace: Process N attached` (or detached).
    Attached(u32),
    /// Anything else strace prints that is not a call.
    Other,
}

/// Why a line could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError(msg.into()))
}

/// Skips a timestamp (`10:11:12`, `10:11:12.123456`, `1700000000.123456`,
/// or `-r`'s `0.000123`) and the spaces after it.
fn skip_timestamp(s: &str) -> &str {
    let t = skip_spaces(s);
    let b = t.as_bytes();
    // A token of digits, ':' and '.' (at least one digit) ended by a space.
    let end = b.iter().position(|&c| !(c.is_ascii_digit() || c == b':' || c == b'.')).unwrap_or(b.len());
    if end > 0 && b.get(end) == Some(&b' ') && b[..end].iter().any(u8::is_ascii_digit) {
        skip_spaces(&t[end..])
    } else {
        s
    }
}

/// `s` without leading spaces.
#[inline]
fn skip_spaces(s: &str) -> &str {
    let n = s.bytes().take_while(|&c| c == b' ').count();
    &s[n..]
}

/// Parses a return value: `0x7f..`, `-1 ENOMEM (...)`, `3</path>`, `?`.
pub fn parse_ret(s: &str) -> Result<Ret<'_>, ParseError> {
    let s = s.trim_ascii();
    if s.starts_with('?') {
        return Ok(Ret::Unknown);
    }
    let tok = &s[..s.bytes().position(|c| c == b' ' || c == b'<').unwrap_or(s.len())];
    let v = parse_int(tok).ok_or_else(|| ParseError(format!("bad return value {s:?}")))?;
    if v < 0 {
        let rest = s[tok.len()..].trim_ascii_start();
        let name = &rest[..rest.bytes().position(|c| c == b' ').unwrap_or(rest.len())];
        if name.starts_with('E') {
            return Ok(Ret::Error(name));
        }
    }
    Ok(Ret::Value(v))
}

/// A decimal, `0x` hexadecimal, C-style octal (`0600`, as strace prints
/// modes and `shmat`'s flags) or negative integer (`u64` values above
/// `i64::MAX` wrap, as addresses do in registers).
pub fn parse_int(s: &str) -> Option<i64> {
    parse_int_bytes(s.as_bytes())
}

/// [`parse_int`] of bytes.
#[inline]
fn parse_int_bytes(s: &[u8]) -> Option<i64> {
    let (neg, body) = match s {
        [b'-', rest @ ..] => (true, rest),
        b => (false, b),
    };
    let v = match body {
        [b'0', b'x', hex @ ..] => parse_digits(hex, 16)?,
        [b'0', oct @ ..] if !oct.is_empty() => parse_digits(oct, 8)?,
        dec => parse_digits(dec, 10)?,
    };
    Some(if neg { (v as i64).wrapping_neg() } else { v as i64 })
}

/// A non-empty run of digits in `radix` (8, 10 or 16) that fits in a `u64`.
#[inline]
fn parse_digits(b: &[u8], radix: u64) -> Option<u64> {
    if b.is_empty() {
        return None;
    }
    let mut v = 0u64;
    for &c in b {
        let d = match c {
            b'0'..=b'9' if u64::from(c - b'0') < radix => c - b'0',
            b'a'..=b'f' if radix == 16 => c - b'a' + 10,
            b'A'..=b'F' if radix == 16 => c - b'A' + 10,
            _ => return None,
        };
        v = v.checked_mul(radix)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// Parses one line. Blank lines are `Other`.
pub fn parse_line(line: &str) -> Result<Line<'_>, ParseError> {
    let keep = line.bytes().rposition(|c| c != b'\n' && c != b'\r').map_or(0, |i| i + 1);
    let line = &line[..keep];
    let mut rest = skip_spaces(line);
    let mut pid = None;
    if let Some(r) = rest.strip_prefix("[pid") {
        let r = skip_spaces(r);
        let end = r.find(']').ok_or_else(|| ParseError("unterminated [pid ...]".into()))?;
        // (`--decode-pids=comm` adds the command: `[pid 12<sh>]`.)
        let n = r[..end].split('<').next().unwrap_or("").trim();
        pid = Some(n.parse().map_err(|_| ParseError(format!("bad pid {:?}", &r[..end])))?);
        rest = skip_spaces(&r[end + 1..]);
    } else if let Some(r) = rest.strip_prefix("strace: ") {
        // strace's own messages (on its standard error, among the calls).
        let n = r.strip_prefix("Process ").and_then(|r| r.strip_suffix(" attached"));
        return Ok(match n.and_then(|n| n.parse().ok()) {
            Some(p) => Line { pid: Some(p), event: Event::Attached(p) },
            None => Line { pid: None, event: Event::Other },
        });
    } else if rest.starts_with("> ") {
        // A stack frame of `-k`.
        return Ok(Line { pid: None, event: Event::Other });
    } else {
        let end = rest.bytes().position(|c| !c.is_ascii_digit()).unwrap_or(rest.len());
        // A pid is digits followed by spaces (a timestamp has ':' or '.'),
        // or by the command `--decode-pids=comm` names: `12<sh> `.
        let after = match rest.as_bytes().get(end) {
            Some(b' ') => Some(end),
            Some(b'<') => rest[end..].find("> ").map(|i| end + i + 1),
            _ => None,
        };
        if let Some(after) = after.filter(|_| end > 0) {
            let n = parse_digits(&rest.as_bytes()[..end], 10).and_then(|n| u32::try_from(n).ok());
            pid = Some(n.ok_or_else(|| ParseError(format!("bad pid {:?}", &rest[..end])))?);
            rest = skip_spaces(&rest[after..]);
        }
    }
    rest = skip_timestamp(rest);
    // `-n`'s call number and `-i`'s instruction pointer: `[  9] [00007f…] `.
    for _ in 0..2 {
        match rest.strip_prefix('[').and_then(|r| r.split_once("] ")) {
            Some((inner, r)) if inner.trim().bytes().all(|c| c.is_ascii_hexdigit() || c == b'?') => {
                rest = skip_spaces(r)
            }
            _ => break,
        }
    }
    let event = parse_event(rest)?;
    Ok(Line { pid, event })
}

fn parse_event(s: &str) -> Result<Event<'_>, ParseError> {
    if s.is_empty() {
        return Ok(Event::Other);
    }
    if let Some(r) = s.strip_prefix("+++ ") {
        if let Some(code) = r.strip_prefix("exited with ") {
            let n = code.split(' ').next().unwrap_or("");
            return n.parse().map(Event::Exited).map_err(|_| ParseError(format!("bad exit code {n:?}")));
        }
        if r.starts_with("killed by ") {
            return Ok(Event::Killed);
        }
        return Ok(Event::Other);
    }
    if s.starts_with("--- ") {
        return Ok(Event::Signal);
    }
    if let Some(r) = s.strip_prefix("<... ") {
        let end = r.find(" resumed>").ok_or_else(|| ParseError("bad <... resumed> line".into()))?;
        let name = &r[..end];
        let body = &r[end + " resumed>".len()..];
        let (args, ret, ret_text) = split_ret(body)?;
        return Ok(Event::Resumed { name, args, ret, ret_text });
    }
    // The name is short: a plain scan beats `memchr`'s set-up.
    let open = s.bytes().position(|c| c == b'(').ok_or_else(|| ParseError(format!("not a call: {:?}", cut(s))))?;
    let name = &s[..open];
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return err(format!("not a call: {:?}", cut(s)));
    }
    let body = &s[open + 1..];
    if let Some(args) = body.strip_suffix("<unfinished ...>") {
        return Ok(Event::Unfinished { name, args: args.trim_end() });
    }
    let (args, ret, ret_text) = split_ret(body)?;
    Ok(Event::Call { name, args, ret, ret_text })
}

/// Splits `args) = ret` at the last `) = ` (strace pads with spaces
/// before the `=`, so `)    = ` counts too); a line cut short is an error.
fn split_ret(body: &str) -> Result<(&str, Ret<'_>, &str), ParseError> {
    let b = body.as_bytes();
    let mut end = b.len();
    // Scan back for " = " whose left side, spaces trimmed, ends with ')'.
    while let Some(eq) = b[..end].iter().rposition(|&c| c == b'=') {
        end = eq;
        if eq == 0 || b[eq - 1] != b' ' || b.get(eq + 1) != Some(&b' ') {
            continue;
        }
        let mut h = eq - 1;
        while h > 0 && b[h - 1] == b' ' {
            h -= 1;
        }
        if h > 0 && b[h - 1] == b')' {
            let text = body[eq + 2..].trim_ascii();
            return Ok((&body[..h - 1], parse_ret(text)?, text));
        }
    }
    err(format!("no return value: {:?}", cut(body)))
}

fn cut(s: &str) -> &str {
    match s.char_indices().nth(60) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Most arguments [`split_args`] keeps apart; the rest stay in the last
/// one (no system call we read has more than six).
pub const MAX_ARGS: usize = 8;

/// The arguments of a call, split; derefs to a slice. No allocation.
#[derive(Clone, Copy, Debug)]
pub struct Args<'a> {
    items: [&'a str; MAX_ARGS],
    len: usize,
}

impl<'a> core::ops::Deref for Args<'a> {
    type Target = [&'a str];
    fn deref(&self) -> &[&'a str] {
        &self.items[..self.len]
    }
}

/// Bytes that [`split_args`] must look at outside strings; the rest are
/// skipped in one tight loop.
const SPLIT_STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    let stops = b"\"([{)]}<,";
    while i < stops.len() {
        t[stops[i] as usize] = true;
        i += 1;
    }
    t
};

/// Splits the argument text at top-level commas (not inside `()`, `[]`,
/// `{}`, strings or `<path>` decorations).
pub fn split_args(args: &str) -> Args<'_> {
    let mut out = Args { items: [""; MAX_ARGS], len: 0 };
    let b = args.as_bytes();
    let (mut depth, mut start, mut i) = (0i32, 0usize, 0usize);
    while i < b.len() {
        let c = b[i];
        if !SPLIT_STOP[usize::from(c)] {
            i += 1;
            continue;
        }
        match c {
            b'"' => {
                // To the closing quote, stepping over escapes.
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            // A decoration follows an fd: `3</path>`, `AT_FDCWD</dir>`.
            // (Not a shift: `16<<MAP_HUGE_SHIFT`.)
            b'<' if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') && b.get(i + 1) != Some(&b'<') => {
                if let Some(e) = b[i..].iter().position(|&c| c == b'>') {
                    i += e;
                }
            }
            b',' if depth == 0 && out.len < MAX_ARGS - 1 => {
                out.items[out.len] = args[start..i].trim_ascii();
                out.len += 1;
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    let last = args[start..].trim_ascii();
    if !last.is_empty() || out.len > 0 {
        out.items[out.len] = last;
        out.len += 1;
    }
    out
}

/// A numeric argument: a number (`-X raw`), `NULL`, a decorated fd
/// (`3</path>`), a flag expression with symbolic names (`-X abbrev`,
/// looked up with `names`), or `-X verbose`'s `0x3 /* PROT_READ|... */`.
pub fn arg_value(arg: &str, names: &[(&str, u64)]) -> Result<u64, ParseError> {
    let a = arg.trim_ascii();
    // Most arguments are plain numbers.
    if let Some(v) = parse_int(a) {
        return Ok(v as u64);
    }
    if a == "NULL" {
        return Ok(0);
    }
    // Comments go: `-X verbose`'s `0x3 /* PROT_READ|PROT_WRITE */`, and
    // a bit strace cannot name, `0x8 /* MAP_??? */|MAP_ANONYMOUS`.
    let uncommented;
    let a = if a.contains("/*") {
        uncommented = without_comments(a);
        uncommented.as_str()
    } else {
        a
    };
    // A number ends at a decoration (`3</path>`); a shift
    // (`21<<MAP_HUGE_SHIFT`) is none.
    let a = match decoration_start(a) {
        Some(i) if i > 0 => a[..i].trim_ascii_end(),
        _ => a,
    };
    if let Some(v) = parse_int(a) {
        return Ok(v as u64);
    }
    let mut v = 0u64;
    for part in a.as_bytes().split(|&c| c == b'|') {
        let part = part.trim_ascii();
        let named = |w: &[u8]| names.iter().find(|(n, _)| n.as_bytes() == w).map(|&(_, bits)| bits);
        if let Some(n) = parse_int_bytes(part) {
            v |= n as u64;
        } else if let Some(bits) = named(part) {
            v |= bits;
        } else if let Some((l, r)) = part.windows(2).position(|w| w == b"<<").map(|i| (&part[..i], &part[i + 2..])) {
            // A field shifted into place: `21<<MAP_HUGE_SHIFT`.
            let shift = parse_int_bytes(r).map(|r| r as u64).or_else(|| named(r));
            let (Some(l), Some(r)) = (parse_int_bytes(l), shift) else {
                return err(format!("unknown flag {:?}", String::from_utf8_lossy(part)));
            };
            v |= u32::try_from(r).ok().and_then(|r| (l as u64).checked_shl(r)).unwrap_or(0);
        } else if names.is_empty() {
            // A plain number was wanted (an address, a length, an fd).
            return err(format!("not a number: {a:?}"));
        } else {
            return err(format!("unknown flag {:?}", String::from_utf8_lossy(part)));
        }
    }
    Ok(v)
}

/// Where a decoration (`<…>`) starts in `a`: its first `<` that is not
/// half of a shift (`<<`).
fn decoration_start(a: &str) -> Option<usize> {
    let b = a.as_bytes();
    let mut from = 0;
    while let Some(i) = a[from..].find('<').map(|i| i + from) {
        if b.get(i + 1) != Some(&b'<') {
            return Some(i);
        }
        from = i + 2;
    }
    None
}

/// `arg` without its `/* … */` comments.
fn without_comments(arg: &str) -> String {
    let mut out = String::with_capacity(arg.len());
    let mut rest = arg;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        rest = rest[i..].find("*/").map_or("", |j| &rest[i + j + 2..]);
    }
    out.push_str(rest);
    out
}

/// The path of a decorated fd or return value (`3</usr/lib/libc.so.6>`).
pub fn decoration(arg: &str) -> Option<&str> {
    let i = arg.find('<')?;
    let rest = &arg[i + 1..];
    let end = rest.rfind('>')?;
    Some(&rest[..end])
}

/// A string argument's text (`"name"`, possibly cut: `"na"...`), with
/// strace's escapes undone for the common ones.
pub fn arg_string(arg: &str) -> Option<String> {
    let a = arg.trim();
    let a = a.strip_suffix("...").unwrap_or(a);
    let inner = a.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            '"' => out.push('"'),
            '\\' => out.push('\\'),
            'x' => {
                let h: String = chars.by_ref().take(2).collect();
                out.push(u8::from_str_radix(&h, 16).ok()? as char);
            }
            other => out.push(other),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_shapes() {
        let l = parse_line(
            "11146 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7fc8ed840000",
        )
        .unwrap();
        assert_eq!(l.pid, Some(11146));
        let Event::Call { name, args, ret, .. } = l.event else { panic!() };
        assert_eq!((name, ret), ("mmap", Ret::Value(0x7fc8ed840000)));
        assert_eq!(split_args(args).len(), 6);
        let l = parse_line("[pid  4242] 10:11:12.123456 munmap(0x7f0000000000, 4096 <unfinished ...>").unwrap();
        assert_eq!(l.pid, Some(4242));
        assert_eq!(l.event, Event::Unfinished { name: "munmap", args: "0x7f0000000000, 4096" });
        let l = parse_line("4242  1700000000.123456 <... munmap resumed>) = 0").unwrap();
        assert!(matches!(l.event, Event::Resumed { name: "munmap", args: "", ret: Ret::Value(0), .. }));
        let l = parse_line("mprotect(0x1000, 4096, PROT_READ) = -1 ENOMEM (Cannot allocate memory)").unwrap();
        assert_eq!(
            (l.pid, l.event.clone()),
            (
                None,
                Event::Call {
                    name: "mprotect",
                    args: "0x1000, 4096, PROT_READ",
                    ret: Ret::Error("ENOMEM"),
                    ret_text: "-1 ENOMEM (Cannot allocate memory)"
                }
            )
        );
        let l = parse_line("     0.000123 brk(NULL)                         = 0x55dbf438a000").unwrap();
        assert!(matches!(l.event, Event::Call { name: "brk", ret: Ret::Value(0x55db_f438_a000), .. }));
        assert_eq!(
            parse_line("11147 exit_group(0)                     = ?").unwrap().event,
            Event::Call { name: "exit_group", args: "0", ret: Ret::Unknown, ret_text: "?" }
        );
        let l = parse_line("5 openat(AT_FDCWD, \"/lib/libc.so.6\", O_RDONLY) = 3</usr/lib/libc.so.6>").unwrap();
        assert!(matches!(l.event, Event::Call { ret: Ret::Value(3), ret_text: "3</usr/lib/libc.so.6>", .. }));
        assert_eq!(parse_line("11146 --- SIGCHLD {si_signo=SIGCHLD} ---").unwrap().event, Event::Signal);
        assert_eq!(parse_line("11147 +++ exited with 0 +++").unwrap().event, Event::Exited(0));
        assert_eq!(parse_line("strace: Process 77 attached").unwrap().event, Event::Attached(77));
        // strace's other messages, and the decorations of -i, -n, -k and
        // --decode-pids=comm.
        assert_eq!(parse_line("strace: Process 77 detached").unwrap().event, Event::Other);
        let l = parse_line("28369<true> [   9] [00007f6cd1561ca3] munmap(0x1000, 4096) = 0").unwrap();
        assert_eq!(
            (l.pid, l.event),
            (Some(28369), Event::Call { name: "munmap", args: "0x1000, 4096", ret: Ret::Value(0), ret_text: "0" })
        );
        let l = parse_line("[pid 12<sh>] 10:11:12.123456 [  11] munmap(0x1000, 4096) = 0").unwrap();
        assert_eq!(l.pid, Some(12));
        assert_eq!(parse_line(" > /usr/lib/libc.so.6(mmap64+0x26) [0x11ba26]").unwrap().event, Event::Other);
        // The last ") = " splits, even if an argument contains one.
        let l = parse_line(r#"1 write(1, "f(x) = 3\n", 9) = 9"#).unwrap();
        assert!(matches!(l.event, Event::Call { name: "write", ret: Ret::Value(9), .. }));
        assert!(parse_line("1 mmap(NULL, 4096, PROT_READ").is_err());
        assert!(parse_line("garbage here").is_err());
    }

    #[test]
    fn octal_as_strace_prints_modes_and_shm_flags() {
        let shm = crate::strace::names::SHM;
        assert_eq!(arg_value("IPC_CREAT|0600", &[("IPC_CREAT", 0o1000)]), Ok(0o1600));
        assert_eq!(arg_value("020000", shm), Ok(0o20000));
        assert_eq!(arg_value("SHM_RND|SHM_RDONLY", shm), Ok(0o30000));
        assert_eq!(arg_value("0", shm), Ok(0));
        assert_eq!(arg_value("0x2000", shm), Ok(0o20000));
        assert_eq!(parse_int("0755"), Some(0o755));
        // Huge page sizes, shifted into place; droppable memory.
        let map = crate::strace::names::MAP;
        assert_eq!(
            arg_value("MAP_PRIVATE|MAP_ANONYMOUS|MAP_HUGETLB|21<<MAP_HUGE_SHIFT", map),
            Ok(0x2 | 0x20 | 0x40000 | (21 << 26))
        );
        assert_eq!(arg_value("MAP_DROPPABLE|MAP_ANONYMOUS", map), Ok(0x28));
        assert!(arg_value("MAP_PRIVATE|21<<MAP_NOSUCH", map).is_err());
        assert_eq!(arg_value("3</tmp/a<b>", &[]), Ok(3));
        // A bit strace has no name for.
        assert_eq!(arg_value("0x8 /* MAP_??? */|MAP_ANONYMOUS", map), Ok(0x28));
        let a = split_args("NULL, 4096, PROT_READ, MAP_SHARED_VALIDATE|16<<MAP_HUGE_SHIFT, 3</tmp/f>, 0");
        assert_eq!(a.len(), 6);
        // Not octal digits, not a number.
        assert_eq!(parse_int("089"), None);
    }

    #[test]
    fn argument_styles() {
        let prot = [("PROT_READ", 1), ("PROT_WRITE", 2), ("PROT_NONE", 0)];
        assert_eq!(arg_value("PROT_READ|PROT_WRITE", &prot), Ok(3));
        assert_eq!(arg_value("0x3 /* PROT_READ|PROT_WRITE */", &prot), Ok(3));
        assert_eq!(arg_value("0x3", &prot), Ok(3));
        assert_eq!(arg_value("PROT_READ|0x40", &prot), Ok(0x41));
        assert_eq!(arg_value("NULL", &prot), Ok(0));
        assert_eq!(arg_value("3</usr/lib/libc.so.6>", &prot), Ok(3));
        assert_eq!(arg_value("-1", &prot), Ok(u64::MAX));
        assert!(arg_value("PROT_BOGUS", &prot).is_err());
        // Where no names apply, the error says a number was wanted.
        assert_eq!(arg_value("0xzz", &[]), Err(ParseError("not a number: \"0xzz\"".into())));
        assert_eq!(arg_value("PROT_READ", &[]), Err(ParseError("not a number: \"PROT_READ\"".into())));
        assert_eq!(arg_value("0x1000", &[]), Ok(0x1000));
        let args = split_args(r#"AT_FDCWD</home/a,b>, "/x,y", O_RDONLY|O_CLOEXEC"#);
        assert_eq!(*args, [r#"AT_FDCWD</home/a,b>"#, r#""/x,y""#, "O_RDONLY|O_CLOEXEC"]);
        assert_eq!(split_args("1, 2, 3, 4, 5, 6, 7, 8, 9, 10").len(), MAX_ARGS);
        assert_eq!(split_args("").len(), 0);
        assert_eq!(decoration("3</usr/lib/libc.so.6>"), Some("/usr/lib/libc.so.6"));
        assert_eq!(arg_string(r#""jit\x20code"..."#).as_deref(), Some("jit code"));
        assert_eq!(split_args("{flags=CLONE_VM|CLONE_FS, exit_signal=0}, 88").len(), 2);
        // Escaped quotes and backslashes inside strings, commas after them.
        assert_eq!(*split_args(r#""a\",b", 2"#), [r#""a\",b""#, "2"]);
        assert_eq!(*split_args(r#""x\\", 3, "(", 4"#), [r#""x\\""#, "3", r#""(""#, "4"]);
        assert_eq!(arg_value(" PROT_READ | PROT_WRITE ", &prot), Ok(3));
    }
}
