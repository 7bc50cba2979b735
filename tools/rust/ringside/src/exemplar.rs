//! Exemplars (EXEMPLARS in ringside.h): a short set of labels naming what a histogram's value
//! measured, checked once when made (`rs_exemplar_check`'s rules, written again in Rust) and kept
//! inline, so recording one allocates nothing and checks nothing.

use crate::error::Error;
use crate::layout::{is_identifier, EXEMPLAR_MAX};
use std::fmt;

/// An exemplar: labels that name what a record measured (an order id, a trace id), which the
/// collector keeps beside the slowest values and exports as OpenMetrics exemplars. Made once,
/// checked when made, then recorded with [`Histogram::record_with_exemplar`] as often as wanted:
///
/// ```no_run
/// # fn main() -> Result<(), ringside::Error> {
/// # let bot = ringside::Bot::attach("rs-bot")?;
/// # let fill = bot.histogram("order_fill_latency", ringside::Unit::Microseconds, &[])?;
/// let exemplar = ringside::Exemplar::new(&[("order_id", "A17")])?;
/// fill.record_with_exemplar(42, &exemplar);
/// # Ok(())
/// # }
/// ```
///
/// Its bytes are `key=value` pairs joined by newlines (`order_id=A17`), at most
/// [`Exemplar::MAX_BYTES`] (64) in all: keys are names (`[a-zA-Z_][a-zA-Z0-9_]*`), each given
/// once; values hold no newline or NUL. Anything else is [`Error::InvalidExemplar`], never a cut
/// exemplar. It is 65 bytes, `Copy`, and lives where you put it (on the stack, in an order).
///
/// [`Histogram::record_with_exemplar`]: crate::Histogram::record_with_exemplar
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Exemplar {
    /// The bytes, zero after `length`: the exemplar records carry them 16 a record, padding and all.
    bytes: [u8; EXEMPLAR_MAX],
    length: u8,
}

impl Exemplar {
    /// The most bytes an exemplar takes, its pairs and the newlines between them included
    /// (`RS_EXEMPLAR_MAX`).
    pub const MAX_BYTES: usize = EXEMPLAR_MAX;

    /// An exemplar of the labels given, in their order: `Exemplar::new(&[("order_id", "A17")])`.
    /// Each key must be a name and each value free of newlines and NULs, so that a pair never
    /// reads as another (a key `a=b` is refused, not taken for the key `a`).
    pub fn new(labels: &[(&str, &str)]) -> Result<Exemplar, Error> {
        for (key, value) in labels {
            if !is_identifier(key.as_bytes()) {
                return Err(invalid(format!("an exemplar's key is a name ([a-zA-Z_][a-zA-Z0-9_]*), not {key:?}")));
            }
            if value.contains(['\n', '\0']) {
                return Err(invalid(format!(
                    "the value of an exemplar's key {key} holds a newline or a NUL: {value:?}"
                )));
            }
        }
        let length = labels.iter().map(|(key, value)| key.len() + 1 + value.len()).sum::<usize>()
            + labels.len().saturating_sub(1);
        if length == 0 || length > EXEMPLAR_MAX {
            return Err(invalid(too_long(length, &labels_text(labels))));
        }
        let mut bytes = [0u8; EXEMPLAR_MAX];
        let mut at = 0;
        for (i, (key, value)) in labels.iter().enumerate() {
            if i > 0 {
                bytes[at] = b'\n';
                at += 1;
            }
            for part in [key.as_bytes(), b"=", value.as_bytes()] {
                bytes[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
        }
        Self::checked(bytes, length)
    }

    /// An exemplar already in the format's form: `key=value` pairs joined by newlines
    /// (`"order_id=A17\nvenue=XNAS"`), checked as `rs_exemplar_check` checks it.
    pub fn from_encoded(encoded: &str) -> Result<Exemplar, Error> {
        let length = encoded.len();
        if length == 0 || length > EXEMPLAR_MAX {
            return Err(invalid(too_long(length, encoded)));
        }
        let mut bytes = [0u8; EXEMPLAR_MAX];
        bytes[..length].copy_from_slice(encoded.as_bytes());
        Self::checked(bytes, length)
    }

    fn checked(bytes: [u8; EXEMPLAR_MAX], length: usize) -> Result<Exemplar, Error> {
        match check(&bytes[..length]) {
            Ok(()) => Ok(Exemplar { bytes, length: length as u8 }),
            Err(reason) => Err(invalid(reason)),
        }
    }

    /// The `key=value` pairs, joined by newlines, as the records carry them.
    pub fn as_str(&self) -> &str {
        // Made from a &str, whole (never cut), so always UTF-8.
        std::str::from_utf8(&self.bytes[..self.length as usize]).unwrap_or_default()
    }

    /// The pairs, in their order.
    pub fn labels(&self) -> impl Iterator<Item = (&str, &str)> {
        self.as_str().split('\n').map(|pair| pair.split_once('=').unwrap_or((pair, "")))
    }

    /// Its bytes (1 to 64).
    pub fn len(&self) -> usize {
        self.length as usize
    }

    /// Never true: an exemplar has at least one pair (kept for `len`'s sake).
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The 64 bytes as the exemplar records carry them (zero past `len`).
    #[inline(always)]
    pub(crate) fn padded(&self) -> &[u8; EXEMPLAR_MAX] {
        &self.bytes
    }
}

impl fmt::Debug for Exemplar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Exemplar").field(&self.as_str()).finish()
    }
}

/// The pairs joined by commas, as Swift's `Bot.Exemplar` says them: `order_id=A17,venue=XNAS`.
impl fmt::Display for Exemplar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, pair) in self.as_str().split('\n').enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(pair)?;
        }
        Ok(())
    }
}

fn invalid(reason: String) -> Error {
    Error::InvalidExemplar { reason }
}

fn too_long(length: usize, text: &str) -> String {
    format!("an exemplar has 1 to {EXEMPLAR_MAX} bytes, not {length}: {:?}", crate::layout::shorten(text))
}

fn labels_text(labels: &[(&str, &str)]) -> String {
    labels.iter().map(|(key, value)| format!("{key}={value}")).collect::<Vec<_>>().join("\n")
}

/// `rs_exemplar_check`, byte for byte: 1 to 64 bytes of `key=value` pairs joined by '\n', keys
/// names and unique, values without '\n' or NUL. Err: why not, as C says it.
pub(crate) fn check(exemplar: &[u8]) -> Result<(), String> {
    let length = exemplar.len();
    if length == 0 || length > EXEMPLAR_MAX {
        return Err(format!("an exemplar has 1 to {EXEMPLAR_MAX} bytes, not {length}"));
    }
    let mut keys: [&[u8]; EXEMPLAR_MAX / 2] = [&[]; EXEMPLAR_MAX / 2];
    let mut pairs = 0;
    let mut at = 0;
    while at < length {
        // A key: a name, then '='.
        let start = at;
        while at < length && exemplar[at] != b'=' && exemplar[at] != b'\n' {
            let c = exemplar[at];
            if !(c.is_ascii_alphabetic() || c == b'_' || (at > start && c.is_ascii_digit())) {
                return Err(format!("an exemplar's key is a name ([a-zA-Z_][a-zA-Z0-9_]*): byte {at}"));
            }
            at += 1;
        }
        if at == start || at == length || exemplar[at] != b'=' {
            return Err(format!("an exemplar is key=value pairs joined by newlines: byte {at}"));
        }
        let key = &exemplar[start..at];
        if keys[..pairs].contains(&key) {
            return Err(format!("an exemplar's key {} is given twice", String::from_utf8_lossy(key)));
        }
        keys[pairs] = key;
        pairs += 1;
        // A value: anything but NUL, up to '\n' or the end.
        at += 1;
        while at < length && exemplar[at] != b'\n' {
            if exemplar[at] == 0 {
                return Err(format!("an exemplar's value holds a NUL (byte {at})"));
            }
            at += 1;
        }
        if at < length {
            at += 1; // the newline
            if at == length {
                return Err("an exemplar ends with a newline".into());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(result: Result<Exemplar, Error>) -> String {
        match result {
            Err(Error::InvalidExemplar { reason }) => reason,
            other => panic!("expected an invalid exemplar, got {other:?}"),
        }
    }

    #[test]
    fn made_from_pairs_in_their_order() {
        let exemplar = Exemplar::new(&[("order_id", "A17")]).unwrap();
        assert_eq!((exemplar.as_str(), exemplar.len()), ("order_id=A17", 12));
        assert_eq!(&exemplar.padded()[..12], b"order_id=A17");
        assert!(exemplar.padded()[12..].iter().all(|&b| b == 0), "zero-padded");
        let two = Exemplar::new(&[("venue", "XNAS"), ("order_id", "A=17")]).unwrap();
        assert_eq!(two.as_str(), "venue=XNAS\norder_id=A=17", "in the order given, '=' allowed in a value");
        assert_eq!(two.labels().collect::<Vec<_>>(), [("venue", "XNAS"), ("order_id", "A=17")]);
        assert_eq!(two.to_string(), "venue=XNAS,order_id=A=17");
        assert_eq!(format!("{two:?}"), "Exemplar(\"venue=XNAS\\norder_id=A=17\")");
        assert_eq!(Exemplar::from_encoded("venue=XNAS\norder_id=A=17").unwrap(), two);
        assert_eq!(Exemplar::new(&[("k", "")]).unwrap().as_str(), "k=", "an empty value");
        assert_eq!(Exemplar::new(&[("k", "é€")]).unwrap().len(), 2 + 5, "values are UTF-8");
    }

    #[test]
    fn sixty_four_bytes_fit_and_sixty_five_do_not() {
        let value = "v".repeat(62);
        let full = Exemplar::new(&[("k", &value)]).unwrap();
        assert_eq!(full.len(), 64);
        assert_eq!(Exemplar::from_encoded(full.as_str()).unwrap(), full);
        let longer = "v".repeat(63);
        assert_eq!(
            reason(Exemplar::new(&[("k", &longer)])),
            format!("an exemplar has 1 to 64 bytes, not 65: \"k={longer}\"")
        );
        assert!(
            reason(Exemplar::from_encoded(&format!("k={longer}"))).starts_with("an exemplar has 1 to 64 bytes, not 65")
        );
        // A trace id: "trace_id=" and 32 hex digits, 41 bytes.
        assert_eq!(Exemplar::new(&[("trace_id", "0af7651916cd43dd8448eb211c80319c")]).unwrap().len(), 41);
        assert_eq!(reason(Exemplar::new(&[])), "an exemplar has 1 to 64 bytes, not 0: \"\"");
        assert_eq!(reason(Exemplar::from_encoded("")), "an exemplar has 1 to 64 bytes, not 0: \"\"");
    }

    #[test]
    fn malformed_pairs_are_refused() {
        assert!(reason(Exemplar::new(&[("a=b", "c")])).contains("key is a name"), "a key never holds '='");
        assert!(reason(Exemplar::new(&[("1a", "c")])).contains("key is a name"));
        assert!(reason(Exemplar::new(&[("", "c")])).contains("key is a name"));
        assert!(reason(Exemplar::new(&[("a", "x\ny=z")])).contains("newline or a NUL"), "a value never adds a pair");
        assert!(reason(Exemplar::new(&[("a", "x\0")])).contains("newline or a NUL"));
        assert_eq!(reason(Exemplar::new(&[("a", "1"), ("a", "2")])), "an exemplar's key a is given twice");
    }

    #[test]
    fn encoded_ones_are_checked_as_c_checks_them() {
        // Each of rs_exemplar_check's refusals, with its message.
        let cases = [
            ("=1", "an exemplar is key=value pairs joined by newlines: byte 0"),
            ("a", "an exemplar is key=value pairs joined by newlines: byte 1"),
            ("a\nb=1", "an exemplar is key=value pairs joined by newlines: byte 1"),
            ("1a=1", "an exemplar's key is a name ([a-zA-Z_][a-zA-Z0-9_]*): byte 0"),
            ("a-b=1", "an exemplar's key is a name ([a-zA-Z_][a-zA-Z0-9_]*): byte 1"),
            ("a=1\nb=2\na=3", "an exemplar's key a is given twice"),
            ("a=1\0", "an exemplar's value holds a NUL (byte 3)"),
            ("a=1\n", "an exemplar ends with a newline"),
            ("a=1\n\nb=2", "an exemplar is key=value pairs joined by newlines: byte 4"),
        ];
        for (encoded, expected) in cases {
            assert_eq!(reason(Exemplar::from_encoded(encoded)), expected, "{encoded:?}");
        }
        for good in ["a=", "_=x", "a9=1\nb=2", "k=v=w", "a=1\nab=2"] {
            assert!(Exemplar::from_encoded(good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn the_error_says_what_is_wrong() {
        let error = Exemplar::new(&[("order id", "A17")]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid exemplar: an exemplar's key is a name ([a-zA-Z_][a-zA-Z0-9_]*), not \"order id\""
        );
        assert_eq!(error.bot(), "", "an exemplar is made apart from any bot");
    }
}
