//! The one way every `maple` command reads numbers and addresses, and
//! names an I/O failure.
//!
//! A number is decimal, or hexadecimal with `0x`; an address may also be
//! bare hexadecimal, as `/proc/PID/maps` prints it (`564b1a4d4000`,
//! `7ffd0000`), so an address of decimal digits only is read as hex too.

/// A number: decimal, or hex with `0x`/`0X`.
///
/// ```
/// use maple_cli::num::number;
/// assert_eq!(number("4096"), Ok(4096));
/// assert_eq!(number("0x1000"), Ok(4096));
/// assert!(number("1000h").is_err());
/// ```
pub fn number(s: &str) -> Result<u64, String> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => hex_digits(s, hex),
        None if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse().map_err(|_| format!("{s:?} does not fit in 64 bits"))
        }
        None if !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Err(format!("{s:?} is not a decimal number (write hex as 0x{s})"))
        }
        None => Err(format!("{s:?} is not a number (decimal, or hex with 0x)")),
    }
}

/// An address: hex with or without `0x`, as `/proc/PID/maps` prints it.
///
/// ```
/// use maple_cli::num::address;
/// assert_eq!(address("564b1a4d4000"), Ok(0x564b1a4d4000));
/// assert_eq!(address("0x7f00"), Ok(0x7f00));
/// assert_eq!(address("00400000"), Ok(0x400000));
/// assert!(address("0x").is_err());
/// ```
pub fn address(s: &str) -> Result<u64, String> {
    let hex = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    hex_digits(s, hex)
}

fn hex_digits(whole: &str, hex: &str) -> Result<u64, String> {
    if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{whole:?} is not a hex number"));
    }
    u64::from_str_radix(hex, 16).map_err(|_| format!("{whole:?} does not fit in 64 bits"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_addresses() {
        assert_eq!(number("0"), Ok(0));
        assert_eq!(number("18446744073709551615"), Ok(u64::MAX));
        assert!(number("18446744073709551616").unwrap_err().contains("64 bits"));
        assert!(number("ff").unwrap_err().contains("0xff"));
        assert!(number("world").unwrap_err().contains("not a number"));
        assert!(number("").is_err() && number("-1").is_err() && number("0x").is_err());
        assert_eq!(address("ffffffffff600000"), Ok(0xffff_ffff_ff60_0000));
        assert!(address("10000000000000000").is_err() && address("xyz").is_err());
    }
}
