//! `maple ops`: apply an operation log to a tree and print the results.
//!
//! One operation a line; `#` starts a comment; numbers are decimal or `0x`
//! hex. See [`run`] for the output format.

use std::{
    fmt,
    io::{self, Write},
};

use maple_tree::{Error, MapleTree};

/// One parsed operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `store F L V`: overwrite `[F, L]` with V.
    Store(u64, u64, u64),
    /// `insert F L V`: store only if `[F, L]` is empty.
    Insert(u64, u64, u64),
    /// `clear F L`: store nothing over `[F, L]`.
    Clear(u64, u64),
    /// `erase I`: remove the entry containing I.
    Erase(u64),
    /// `load I`: the entry containing I.
    Load(u64),
    /// `next I`: the first entry whose range ends at or after I.
    Next(u64),
    /// `prev I`: the last entry starting at or before I.
    Prev(u64),
    /// `gap MIN MAX SIZE`: start of the lowest free window.
    Gap(u64, u64, u64),
    /// `rgap MIN MAX SIZE`: start of the highest free window.
    RGap(u64, u64, u64),
}

/// A problem with the input, located at `file:line`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// File name as given.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub msg: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.msg)
    }
}

impl std::error::Error for ParseError {}

/// The operations a log may hold.
const OPS: [&str; 9] = ["store", "insert", "clear", "erase", "load", "next", "prev", "gap", "rgap"];

/// Parses one line; `Ok(None)` for blank lines and comments.
pub fn parse_line(line: &str) -> Result<Option<Op>, String> {
    let line = line.split('#').next().unwrap_or("").trim();
    if line.is_empty() {
        return Ok(None);
    }
    let mut words = line.split_whitespace();
    let name = words.next().unwrap_or_default();
    if !OPS.contains(&name) {
        return Err(format!("unknown operation {name:?} (one of {})", OPS.join(", ")));
    }
    let args: Vec<u64> = words.map(crate::num::number).collect::<Result<_, _>>()?;
    let want = match name {
        "store" | "insert" | "gap" | "rgap" => 3,
        "clear" => 2,
        "erase" | "load" | "next" | "prev" => 1,
        other => return Err(format!("unknown operation {other:?}")),
    };
    if args.len() != want {
        return Err(format!("{name} takes {want} number(s), got {}", args.len()));
    }
    let a = |i: usize| args[i];
    Ok(Some(match name {
        "store" => Op::Store(a(0), a(1), a(2)),
        "insert" => Op::Insert(a(0), a(1), a(2)),
        "clear" => Op::Clear(a(0), a(1)),
        "erase" => Op::Erase(a(0)),
        "load" => Op::Load(a(0)),
        "next" => Op::Next(a(0)),
        "prev" => Op::Prev(a(0)),
        "gap" => Op::Gap(a(0), a(1), a(2)),
        _ => Op::RGap(a(0), a(1), a(2)),
    }))
}

/// Parses a whole log; the first malformed line is an error.
pub fn parse(file: &str, text: &str) -> Result<Vec<(usize, Op)>, ParseError> {
    parse_bytes(file, text.as_bytes())
}

/// [`parse`] for raw file contents: a line that is not valid UTF-8 is an
/// error naming that line, like any other malformed line.
pub fn parse_bytes(file: &str, bytes: &[u8]) -> Result<Vec<(usize, Op)>, ParseError> {
    let mut out = Vec::new();
    let error = |line: usize, msg: String| ParseError { file: file.to_string(), line, msg };
    // `split` leaves one empty piece after a final newline: that is no line.
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    for (i, raw) in body.split(|&b| b == b'\n').enumerate() {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let line = std::str::from_utf8(raw)
            .map_err(|e| error(i + 1, format!("not valid UTF-8 (at byte {} of the line)", e.valid_up_to() + 1)))?;
        match parse_line(line) {
            Ok(Some(op)) => out.push((i + 1, op)),
            Ok(None) => {}
            Err(msg) => return Err(error(i + 1, msg)),
        }
    }
    Ok(out)
}

/// Why [`run`] stopped.
#[derive(Debug)]
pub enum RunError {
    /// `--validate` found a broken invariant after the op on this line.
    Invalid {
        /// Location of the op.
        file: String,
        /// 1-based line.
        line: usize,
        /// The broken invariant.
        msg: String,
    },
    /// Writing the output failed.
    Io(io::Error),
}

impl From<io::Error> for RunError {
    fn from(e: io::Error) -> Self {
        RunError::Io(e)
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Invalid { file, line, msg } => {
                write!(f, "{file}:{line}: after this operation: {msg}")
            }
            RunError::Io(e) => write!(f, "writing output: {e}"),
        }
    }
}

type Tree = MapleTree<Box<u64>>;

fn entry(out: &mut dyn Write, e: Option<(std::ops::RangeInclusive<u64>, &u64)>) -> io::Result<()> {
    match e {
        Some((r, v)) => writeln!(out, "{} {} {}", r.start(), r.end(), v),
        None => writeln!(out, "none"),
    }
}

fn errno(e: Error) -> &'static str {
    e.errno_name()
}

/// Applies `ops` to a fresh tree, writing one line for each `insert`
/// (`ok`/`EEXIST`/`EINVAL`), `erase`/`load`/`next`/`prev` (`F L V` or
/// `none`) and `gap`/`rgap` (the start, `EBUSY` or `EINVAL`); `store` and
/// `clear` print only `EINVAL` for an inverted range. Then `contents N` and
/// the N entries in ascending order.
pub fn run(file: &str, ops: &[(usize, Op)], gaps: bool, validate: bool, out: &mut dyn Write) -> Result<(), RunError> {
    let mut t: Tree = if gaps { MapleTree::with_gaps() } else { MapleTree::new() };
    for &(line, op) in ops {
        match op {
            Op::Store(f, l, v) => {
                if let Err(e) = t.store_range(f..=l, Box::new(v)) {
                    writeln!(out, "{}", errno(e.cause))?;
                }
            }
            Op::Insert(f, l, v) => match t.insert_range(f..=l, Box::new(v)) {
                Ok(()) => writeln!(out, "ok")?,
                Err(e) => writeln!(out, "{}", errno(e.cause))?,
            },
            Op::Clear(f, l) => {
                if let Err(e) = t.remove_range(f..=l) {
                    writeln!(out, "{}", errno(e))?;
                }
            }
            Op::Erase(i) => {
                let r = t.get_range(i).map(|(r, _)| r);
                let v = t.erase(i);
                entry(out, r.zip(v.as_deref()))?;
            }
            Op::Load(i) => entry(out, t.get_range(i))?,
            Op::Next(i) => entry(out, t.next_after(i))?,
            Op::Prev(i) => entry(out, t.prev_before(i))?,
            Op::Gap(a, b, s) | Op::RGap(a, b, s) => {
                let r = if matches!(op, Op::Gap(..)) { t.empty_area(a..=b, s) } else { t.empty_area_rev(a..=b, s) };
                match r {
                    Ok(start) => writeln!(out, "{start}")?,
                    Err(e) => writeln!(out, "{}", errno(e))?,
                }
            }
        }
        if validate {
            if let Err(e) = t.validate() {
                return Err(RunError::Invalid { file: file.into(), line, msg: e.to_string() });
            }
        }
    }
    writeln!(out, "contents {}", t.len())?;
    for (r, v) in t.iter() {
        writeln!(out, "{} {} {}", r.start(), r.end(), v)?;
    }
    Ok(())
}
