//! The format's constants, geometry and string rules (ringside.h, versions 3 and 4), without memory access.

pub const MAGIC: u64 = 0x4544_4953_474E_4952; // "RINGSIDE" read as a little-endian u64
/// The newest version written: a file becomes 4 just before its first signed or scaled metric
/// (VALUES in ringside.h) is published.
pub const FORMAT_VERSION: u32 = 4;
/// The version a file is created with, and the oldest one read (`RS_FORMAT_VERSION_MIN`): 3 is 4
/// without VALUES (its entries' `form` and `scale` are zero).
pub const FORMAT_VERSION_MIN: u32 = 3;

pub const HEADER_SIZE: u32 = 4096;
pub const RECORD_SIZE: u32 = 32;
pub const REGISTRY_ENTRY_SIZE: u32 = 512;
pub const METRIC_CELL_SIZE: u32 = 64;
/// A histogram's gathered calls on one lane (`rs_gather_cell`; SAMPLING AND GATHERING in ringside.h).
pub const GATHER_CELL_SIZE: u32 = 64;
pub const LANE_HEADER_SIZE: u32 = 256;
pub const PAGE_SIZE: u64 = 4096;

pub const NAME_MAX: usize = 104;
pub const LABELS_MAX: usize = 256;
pub const HELP_MAX: usize = 128;

pub const DEFAULT_LANE_CAPACITY_LOG2: u32 = 16;
pub const MIN_CAPACITY_LOG2: u32 = 4;
pub const MAX_CAPACITY_LOG2: u32 = 28;
pub const DEFAULT_REGISTRY_CAPACITY: u32 = 256;
pub const MAX_REGISTRY_CAPACITY: u32 = 4096;
pub const DEFAULT_MAX_LANES: u32 = 64;
pub const MAX_LANES: u32 = 1024;
/// Worker files of a bot before a new worker continues a gone worker's file instead (WORKERS in
/// ringside.h: `RS_DEFAULT_MAX_WORKERS`, `RS_MAX_WORKERS`).
pub const DEFAULT_MAX_WORKERS: u32 = 256;
pub const MAX_WORKERS: u32 = 65_536;

pub const LOCK_BYTE_PRODUCER: i64 = 0;
pub const FILE_PREFIX: &str = "ringside.";
/// Between a bot's name and a worker's pid: worker 4242 of "bot-a" writes "ringside.bot-a@4242".
pub const WORKER_SEPARATOR: &str = "@";
/// Between a worker's pid and the random number of a name it took because its own was unusable
/// (WORKERS in ringside.h): "ringside.bot-a@4242.3141592653".
pub const WORKER_SUFFIX_SEPARATOR: &str = ".";
/// Random names a worker tries, past its own, before it gives up (`RS_WORKER_NAME_ATTEMPTS`).
pub const WORKER_NAME_ATTEMPTS: u32 = 8;
pub const BOT_NAME_MAX: usize = 200;

pub const KIND_COUNTER: u8 = 1;
pub const KIND_GAUGE: u8 = 2;
pub const KIND_HISTOGRAM: u8 = 3;
/// Records only, never a metric's: an exemplar's bytes (EXEMPLARS in ringside.h).
pub const KIND_EXEMPLAR: u8 = 4;

pub const FLAG_SPAN: u8 = 0x01;
/// Exemplar records follow the value's: `exemplar_length` bytes (EXEMPLARS in ringside.h).
pub const FLAG_EXEMPLAR: u8 = 0x02;
/// Bits 4 to 7 of a record's flags hold k: 2^k - 1 calls of its metric were gathered on its lane
/// since its metric's last record there; the record itself is one call (SAMPLING in ringside.h).
pub const FLAG_WEIGHT_SHIFT: u32 = 4;
/// The largest k a record holds (`RS_WEIGHT_LOG2_MAX`): a weight of 32,768.
pub const WEIGHT_LOG2_MAX: u32 = 15;
/// The share of a lane, in percent, below which its histograms are never sampled by default.
pub const DEFAULT_SAMPLE_ABOVE_PERCENT: u32 = 50;
/// The consumer's drain interval a producer assumes when the consumer has not said
/// (`RS_DEFAULT_DRAIN_INTERVAL_NS`).
pub const DEFAULT_DRAIN_INTERVAL_NS: u64 = 2_000_000;
/// A lane's fill is looked at every 2^-LOOK_FRACTION_LOG2 of its records past `sample_above`.
pub const LOOK_FRACTION_LOG2: u32 = 6;
/// Sampling uses at most the top 2^-RESERVE_FRACTION_LOG2 of a lane (SAMPLING in ringside.h)...
pub const RESERVE_FRACTION_LOG2: u32 = 5;
/// ... and at least its top RESERVE_MIN records (or what lies above `sample_above`): two a level.
pub const RESERVE_MIN: u64 = 16;

/// An exemplar's bytes at the most (`RS_EXEMPLAR_MAX`): 4 exemplar records after its value's.
pub const EXEMPLAR_MAX: usize = 64;
/// An exemplar's bytes in each exemplar record (`RS_EXEMPLAR_BYTES_PER_RECORD`).
pub const EXEMPLAR_BYTES_PER_RECORD: usize = 16;
/// A lane's thread name at the most, in bytes (`RS_THREAD_NAME_MAX`; THREAD NAMES in ringside.h).
pub const THREAD_NAME_MAX: usize = 32;

/// A histogram's values are unsigned (`RS_FORM_UNSIGNED`, format 3's only form) or signed
/// (`RS_FORM_SIGNED`): VALUES in ringside.h.
pub const FORM_UNSIGNED: u8 = 0;
pub const FORM_SIGNED: u8 = 1;
/// The steps a metric's `scale` may choose: 10^-18 to 10^18 of its unit.
pub const SCALE_MIN: i8 = -18;
pub const SCALE_MAX: i8 = 18;
/// A signed value's offset binary: the top bit flipped (`RS_OFFSET_BINARY_BIAS`).
pub const OFFSET_BINARY_BIAS: u64 = 0x8000_0000_0000_0000;

/// A metric cell's `control` word, and the header's `bot_control` (CONTROL in ringside.h): the
/// metric is off (its calls record and count nothing)...
pub const CONTROL_OFF: u32 = 0x8000_0000;
/// ... the bot is off (the same, for every metric)...
pub const CONTROL_BOT_OFF: u32 = 0x4000_0000;
/// ... and bits 0 to 4: n, a histogram writes 1 call in 2^n and gathers the others (at most
/// `WEIGHT_LOG2_MAX`).
pub const CONTROL_SAMPLE: u32 = 0x1F;

pub const LANE_ACTIVE: u32 = 1;
pub const LANE_RETIRED: u32 = 2;

/// The unit of a metric's values, as the registry stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Unit {
    /// A plain number.
    None = 0,
    Nanoseconds = 1,
    Microseconds = 2,
    Milliseconds = 3,
    Seconds = 4,
    Bytes = 5,
}

impl Unit {
    /// The name the collector and the dump tool use: none, ns, us, ms, s, bytes.
    pub fn name(self) -> &'static str {
        match self {
            Unit::None => "none",
            Unit::Nanoseconds => "ns",
            Unit::Microseconds => "us",
            Unit::Milliseconds => "ms",
            Unit::Seconds => "s",
            Unit::Bytes => "bytes",
        }
    }

    /// Nanoseconds in one unit; 1 for units that are not times (a duration is then recorded in
    /// nanoseconds, as `rs_bot_record_span` does).
    pub fn ns_per_unit(self) -> u32 {
        match self {
            Unit::Microseconds => 1_000,
            Unit::Milliseconds => 1_000_000,
            Unit::Seconds => 1_000_000_000,
            _ => 1,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Unit> {
        Some(match code {
            0 => Unit::None,
            1 => Unit::Nanoseconds,
            2 => Unit::Microseconds,
            3 => Unit::Milliseconds,
            4 => Unit::Seconds,
            5 => Unit::Bytes,
            _ => return None,
        })
    }
}

/// How the collector merges a gauge across the workers of a bot (processes that write it, each
/// its own file: see "Workers and fork" in the crate's documentation), as declared at
/// registration ([`MetricBuilder::merge`](crate::MetricBuilder::merge)) and stored in the gauge's
/// registry entry (`gauge_merge`, `rs_gauge_merge` in ringside.h). A bot of one process has one
/// value, whatever the policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum GaugeMerge {
    /// The value set last, by any worker, as across threads: a shared fact (a price, a limit).
    #[default]
    Last = 0,
    /// The sum of the live workers' last values: a per-worker quantity (requests in flight).
    Sum = 1,
    /// The largest of the live workers' last values.
    Max = 2,
    /// The smallest of the live workers' last values.
    Min = 3,
    /// A series per live worker, labelled `pid` (so the gauge's own labels may not name `pid`).
    PerWorker = 4,
}

impl GaugeMerge {
    /// Every policy, in the order of their codes.
    pub const ALL: [GaugeMerge; 5] =
        [GaugeMerge::Last, GaugeMerge::Sum, GaugeMerge::Max, GaugeMerge::Min, GaugeMerge::PerWorker];

    /// The policy's name, as Swift's `GaugeMerge` and Python's `merge=` say it: last, sum, max,
    /// min, per_worker.
    pub fn name(self) -> &'static str {
        match self {
            GaugeMerge::Last => "last",
            GaugeMerge::Sum => "sum",
            GaugeMerge::Max => "max",
            GaugeMerge::Min => "min",
            GaugeMerge::PerWorker => "per_worker",
        }
    }

    /// The policy in a sentence, as the C producer's messages say it ("merging its workers by sum").
    pub(crate) fn phrase(self) -> &'static str {
        match self {
            GaugeMerge::Last => "the last set",
            GaugeMerge::PerWorker => "per worker",
            other => other.name(),
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<GaugeMerge> {
        GaugeMerge::ALL.get(code as usize).copied()
    }
}

impl std::fmt::Display for GaugeMerge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for GaugeMerge {
    type Err = UnknownGaugeMerge;

    /// A policy by its name (`"sum"`, `"per_worker"`), say from a bot's configuration.
    fn from_str(name: &str) -> Result<GaugeMerge, UnknownGaugeMerge> {
        GaugeMerge::ALL
            .into_iter()
            .find(|merge| merge.name() == name)
            .ok_or_else(|| UnknownGaugeMerge(name.to_string()))
    }
}

/// A name that is no [`GaugeMerge`]'s: "unknown gauge merge "avg"; one of last, sum, max, min,
/// per_worker".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownGaugeMerge(pub String);

impl std::fmt::Display for UnknownGaugeMerge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown gauge merge \"{}\"; one of last, sum, max, min, per_worker", shorten(&self.0))
    }
}

impl std::error::Error for UnknownGaugeMerge {}

/// The phrase of an `rs_gauge_merge` code, for messages.
pub fn merge_phrase(code: u8) -> &'static str {
    GaugeMerge::from_code(code).map_or("an unknown policy", GaugeMerge::phrase)
}

pub fn kind_name(kind: u8) -> &'static str {
    match kind {
        KIND_COUNTER => "a counter",
        KIND_GAUGE => "a gauge",
        KIND_HISTOGRAM => "a histogram",
        _ => "an unknown kind",
    }
}

pub fn unit_name(code: u8) -> &'static str {
    Unit::from_code(code).map_or("unknown", Unit::name)
}

/// 10^n, exactly where a double holds it (n from -36 to 36), computed as C's `rsp_power_of_ten`
/// computes it (a product of tens, inverted for n < 0): a value in a unit is multiplied by
/// 10^-scale to count its steps, and rounds to the same step in every language.
pub fn power_of_ten(n: i32) -> f64 {
    let mut power = 1.0f64;
    for _ in 0..n.unsigned_abs() {
        power *= 10.0;
    }
    if n < 0 {
        1.0 / power
    } else {
        power
    }
}

/// The scale of a resolution given as a power of ten, 10^scale of the unit (0.01: -2, 1e-6: -6,
/// 1: 0, 100: 2), from `SCALE_MIN` to `SCALE_MAX`; None for anything else. 10^-k is 1 / 10^k
/// rounded once, which is what the literal `1e-k` is.
pub fn scale_of_resolution(resolution: f64) -> Option<i8> {
    (SCALE_MIN..=SCALE_MAX).find(|&scale| power_of_ten(scale as i32) == resolution)
}

pub fn page_round_up(bytes: u64) -> u64 {
    (bytes + PAGE_SIZE - 1) & !(PAGE_SIZE - 1)
}

/// Every offset of a file, computed from its free choices (`rs_geometry_of`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub registry_offset: u64,
    pub cells_offset: u64,
    pub lanes_offset: u64,
    pub lane_size: u64,
    /// In a lane, after its header and cells: its gather cells, one per metric.
    pub lane_gather_offset: u32,
    pub lane_records_offset: u32,
}

impl Geometry {
    pub fn of(capacity_log2: u32, registry_capacity: u32) -> Geometry {
        let registry_offset = HEADER_SIZE as u64;
        let cells_offset = registry_offset + registry_capacity as u64 * REGISTRY_ENTRY_SIZE as u64;
        let lanes_offset = page_round_up(cells_offset + registry_capacity as u64 * METRIC_CELL_SIZE as u64);
        // The gather cells start on a cache line of their own, after the lane cells.
        let lane_gather_offset = ((LANE_HEADER_SIZE as u64 + registry_capacity as u64 * 8 + 63) & !63) as u32;
        let lane_records_offset =
            page_round_up(lane_gather_offset as u64 + registry_capacity as u64 * GATHER_CELL_SIZE as u64) as u32;
        let lane_size = page_round_up(lane_records_offset as u64 + (1u64 << capacity_log2) * RECORD_SIZE as u64);
        Geometry { registry_offset, cells_offset, lanes_offset, lane_size, lane_gather_offset, lane_records_offset }
    }

    pub fn lane_offset(&self, lane: u32) -> u64 {
        self.lanes_offset + lane as u64 * self.lane_size
    }
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`, at least one byte.
pub fn is_identifier(text: &[u8]) -> bool {
    !text.is_empty()
        && text.iter().enumerate().all(|(i, &c)| c.is_ascii_alphabetic() || c == b'_' || (i > 0 && c.is_ascii_digit()))
}

/// 1 to 200 of `[A-Za-z0-9._-]`, not `.` or `..`.
pub fn is_bot_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= BOT_NAME_MAX
        && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'-')
        && name != "."
        && name != ".."
}

/// Encodes labels as stored: "key=value" lines sorted by key (bytewise), joined by '\n'.
/// Err: why they cannot be stored.
pub fn encode_labels(labels: &[(&str, &str)]) -> Result<Vec<u8>, String> {
    let mut pairs: Vec<(&str, &str)> = labels.to_vec();
    for (key, value) in &pairs {
        if !is_identifier(key.as_bytes()) || key.starts_with("__") {
            return Err(format!(
                "label key \"{}\" must match [a-zA-Z_][a-zA-Z0-9_]* and not start with \"__\"",
                shorten(key)
            ));
        }
        if value.contains('\n') || value.contains('\0') {
            return Err(format!("the value of label {key} has a newline or a NUL"));
        }
    }
    pairs.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    for pair in pairs.windows(2) {
        if pair[0].0 == pair[1].0 {
            return Err(format!("label key {} appears twice", pair[0].0));
        }
    }
    let mut encoded = Vec::new();
    for (i, (key, value)) in pairs.iter().enumerate() {
        if i > 0 {
            encoded.push(b'\n');
        }
        encoded.extend_from_slice(key.as_bytes());
        encoded.push(b'=');
        encoded.extend_from_slice(value.as_bytes());
    }
    if encoded.len() > LABELS_MAX {
        return Err(format!("the labels take {} bytes, more than {LABELS_MAX}", encoded.len()));
    }
    Ok(encoded)
}

/// Checks labels as stored ("key=value" lines sorted strictly by key): None if valid, else why.
pub fn labels_problem(labels: &[u8]) -> Option<String> {
    if labels.len() > LABELS_MAX {
        return Some(format!("the labels take {} bytes, more than {LABELS_MAX}", labels.len()));
    }
    if labels.is_empty() {
        return None;
    }
    if labels.contains(&0) {
        return Some("the labels hold a NUL byte".into());
    }
    let mut previous: Option<&[u8]> = None;
    for line in labels.split(|&c| c == b'\n') {
        let Some(equals) = line.iter().position(|&c| c == b'=') else {
            return Some(format!("label \"{}\" is not key=value", String::from_utf8_lossy(line)));
        };
        let key = &line[..equals];
        if !is_identifier(key) {
            return Some(format!(
                "label key \"{}\" does not match [a-zA-Z_][a-zA-Z0-9_]*",
                String::from_utf8_lossy(key)
            ));
        }
        if key.starts_with(b"__") {
            return Some(format!(
                "label key \"{}\" starts with \"__\", which Prometheus reserves",
                String::from_utf8_lossy(key)
            ));
        }
        if let Some(previous) = previous {
            if previous >= key {
                return Some(format!(
                    "label keys are not sorted strictly: \"{}\" comes after \"{}\"",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(previous)
                ));
            }
        }
        previous = Some(key);
    }
    None
}

/// A lane's `thread_name` field holding `name` (`rsp_write_thread_name`): its bytes, NUL-padded,
/// cut to THREAD_NAME_MAX at a UTF-8 character's boundary when longer (a label for humans).
pub fn thread_name_field(name: &[u8]) -> [u8; THREAD_NAME_MAX] {
    let mut length = name.len();
    if length > THREAD_NAME_MAX {
        length = THREAD_NAME_MAX;
        while length > 0 && name[length] & 0xC0 == 0x80 {
            length -= 1; // not inside a character
        }
    }
    let mut field = [0u8; THREAD_NAME_MAX];
    field[..length].copy_from_slice(&name[..length]);
    field
}

/// `name` without a character the kernel cut at its end (it keeps a thread's first 15 bytes,
/// whatever they end in), so that a lane's name is UTF-8 as THREAD NAMES asks.
pub fn without_cut_character(name: &[u8]) -> &[u8] {
    match std::str::from_utf8(name) {
        Err(error) if error.error_len().is_none() => &name[..error.valid_up_to()],
        _ => name,
    }
}

/// At most 120 characters of a user's string, for a message.
pub fn shorten(text: &str) -> &str {
    match text.char_indices().nth(120) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_matches_the_header() {
        // The defaults: 64K records, 256 metrics.
        let g = Geometry::of(16, 256);
        assert_eq!(g.registry_offset, 4096);
        assert_eq!(g.cells_offset, 4096 + 256 * 512);
        assert_eq!(g.lanes_offset, 4096 + 256 * 512 + 256 * 64); // already a whole page
        assert_eq!(g.lane_gather_offset, 256 + 256 * 8); // a cache line's multiple already
        assert_eq!(g.lane_records_offset, page_round_up(256 + 256 * 8 + 256 * 64) as u32);
        assert_eq!(g.lane_records_offset, 20480);
        assert_eq!(g.lane_size, 20480 + 65536 * 32);
        let small = Geometry::of(4, 1);
        assert_eq!(small.lanes_offset, 8192);
        assert_eq!(small.lane_gather_offset, 320, "256 + 8, rounded up to 64");
        assert_eq!(small.lane_records_offset, 4096);
        assert_eq!(small.lane_size, 8192);
        assert_eq!(small.lane_offset(3), 8192 + 3 * 8192);
        // An odd count of metrics: the lane cells end off a cache line.
        let odd = Geometry::of(12, 3);
        assert_eq!((odd.lane_gather_offset, odd.lane_records_offset), (320, 4096));
        assert_eq!(odd.lane_size, 4096 + 4096 * 32);
    }

    #[test]
    fn resolutions_are_powers_of_ten_from_1e_minus_18_to_1e18() {
        assert_eq!(scale_of_resolution(0.01), Some(-2));
        assert_eq!(scale_of_resolution(1e-6), Some(-6));
        assert_eq!(scale_of_resolution(1.0), Some(0));
        assert_eq!(scale_of_resolution(100.0), Some(2));
        assert_eq!(scale_of_resolution(1e-18), Some(-18));
        assert_eq!(scale_of_resolution(1e18), Some(18));
        for scale in SCALE_MIN..=SCALE_MAX {
            let literal: f64 = format!("1e{scale}").parse().unwrap();
            assert_eq!(scale_of_resolution(literal), Some(scale), "1e{scale}");
        }
        for bad in [0.0, -0.01, 0.02, 0.1 * 0.1, 1e-19, 1e19, 3.0, f64::NAN, f64::INFINITY, f64::MIN_POSITIVE] {
            assert_eq!(scale_of_resolution(bad), None, "{bad:e}");
        }
        // What a value is multiplied by to count its steps: exact where a double holds it.
        assert_eq!(power_of_ten(2), 100.0);
        assert_eq!(power_of_ten(18), 1e18);
        assert_eq!(power_of_ten(-2), 0.01);
        assert_eq!(power_of_ten(0), 1.0);
    }

    #[test]
    fn names() {
        assert!(is_identifier(b"order_fill_latency"));
        assert!(is_identifier(b"_x9"));
        assert!(!is_identifier(b"9x"));
        assert!(!is_identifier(b""));
        assert!(!is_identifier(b"a-b"));
        assert!(is_bot_name("bot-a.1_x"));
        assert!(!is_bot_name("."));
        assert!(!is_bot_name(".."));
        assert!(!is_bot_name("a/b"));
        assert!(!is_bot_name(""));
        assert!(!is_bot_name(&"x".repeat(201)));
        assert!(is_bot_name(&"x".repeat(200)));
    }

    #[test]
    fn thread_names_are_padded_and_cut_at_a_character() {
        let field = thread_name_field(b"order-router");
        assert_eq!(&field[..12], b"order-router");
        assert!(field[12..].iter().all(|&b| b == 0));
        assert_eq!(thread_name_field(b""), [0u8; 32]);
        let exact = "x".repeat(32);
        assert_eq!(&thread_name_field(exact.as_bytes())[..], exact.as_bytes(), "32 bytes fit, without a NUL");
        let long = "y".repeat(40);
        assert_eq!(&thread_name_field(long.as_bytes())[..], &long.as_bytes()[..32]);
        // 31 ASCII bytes, then a 2-byte character that would straddle byte 32: cut before it.
        let straddling = format!("{}é", "z".repeat(31));
        let field = thread_name_field(straddling.as_bytes());
        assert_eq!(&field[..31], "z".repeat(31).as_bytes());
        assert_eq!(field[31], 0);
        // Characters of 3 bytes: 10 of them take 30 bytes, the 11th would end at 33.
        let wide = "€".repeat(12);
        let field = thread_name_field(wide.as_bytes());
        assert_eq!(&field[..30], "€".repeat(10).as_bytes());
        assert_eq!(&field[30..], [0, 0]);
        // A character that ends exactly at byte 32 is kept.
        let fits = format!("{}é", "z".repeat(30));
        assert_eq!(&thread_name_field(format!("{fits}and more").as_bytes())[..], fits.as_bytes());
    }

    #[test]
    fn a_character_cut_by_the_kernel_is_left_out() {
        let cut = &"ééééééééé".as_bytes()[..15]; // 7 characters and the first byte of the 8th
        assert_eq!(without_cut_character(cut), "ééééééé".as_bytes());
        assert_eq!(without_cut_character(b"order-router"), b"order-router");
        assert_eq!(without_cut_character(b""), b"");
        assert_eq!(without_cut_character(b"a\xFFb"), b"a\xFFb", "only a cut at the end is the kernel's doing");
    }

    #[test]
    fn gauge_merge_codes_and_names() {
        let codes: Vec<u8> = GaugeMerge::ALL.iter().map(|&merge| merge as u8).collect();
        assert_eq!(codes, [0, 1, 2, 3, 4]); // rs_gauge_merge
        for merge in GaugeMerge::ALL {
            assert_eq!(GaugeMerge::from_code(merge as u8), Some(merge));
            assert_eq!(merge.name().parse::<GaugeMerge>(), Ok(merge));
            assert_eq!(merge.to_string(), merge.name());
        }
        assert_eq!(GaugeMerge::from_code(5), None);
        assert_eq!(GaugeMerge::default(), GaugeMerge::Last);
        assert_eq!(GaugeMerge::PerWorker.name(), "per_worker");
        assert_eq!(
            (merge_phrase(0), merge_phrase(4), merge_phrase(9)),
            ("the last set", "per worker", "an unknown policy")
        );
        for bad in ["avg", "Sum", "per-worker", ""] {
            let error = bad.parse::<GaugeMerge>().unwrap_err();
            assert_eq!(
                error.to_string(),
                format!("unknown gauge merge \"{bad}\"; one of last, sum, max, min, per_worker")
            );
        }
    }

    #[test]
    fn labels_are_sorted_and_checked() {
        assert_eq!(encode_labels(&[]).unwrap(), b"");
        assert_eq!(encode_labels(&[("symbol", "AAPL"), ("side", "buy")]).unwrap(), b"side=buy\nsymbol=AAPL");
        assert_eq!(encode_labels(&[("B", "1"), ("a", "2")]).unwrap(), b"B=1\na=2"); // bytewise
        assert!(encode_labels(&[("a", "1"), ("a", "2")]).unwrap_err().contains("twice"));
        assert!(encode_labels(&[("__a", "1")]).is_err());
        assert!(encode_labels(&[("1a", "1")]).is_err());
        assert!(encode_labels(&[("a", "x\ny")]).is_err());
        assert!(encode_labels(&[("a", "x\0y")]).is_err());
        assert!(encode_labels(&[("a", "é=ü")]).is_ok());
        let long = "v".repeat(254);
        assert!(encode_labels(&[("a", &long)]).is_ok()); // 256 bytes
        let longer = "v".repeat(255);
        assert!(encode_labels(&[("a", &longer)]).is_err());
        for labels in [&[("symbol", "AAPL"), ("side", "buy")][..], &[("k", "a=b")]] {
            assert_eq!(labels_problem(&encode_labels(labels).unwrap()), None);
        }
        assert!(labels_problem(b"b=1\na=2").is_some());
        assert!(labels_problem(b"a=1\n").is_some());
        assert!(labels_problem(b"a").is_some());
    }
}
