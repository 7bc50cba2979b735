//! What the integration tests share: the real collector (found, started on a port of its own,
//! killed afterwards), a scratch directory under /dev/shm (removed afterwards, also on failure),
//! a tiny HTTP/1.1 GET client, a small JSON reader, polling with a timeout, a reader of the bot
//! file's bytes for what the collector does not show (flags, cursors, cells, gather cells), and
//! the file mapped as a consumer maps it, to watch a lane call by call or to play its consumer.
#![allow(dead_code)]

pub mod fork;
pub mod planted;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

// MARK: - The collector binary

/// The collector to test against: $RINGSIDE_COLLECTOR, else the Swift package's debug build,
/// else its release build. None (after saying why) when there is none and CI is not "true";
/// with CI=true a missing collector fails the test.
pub fn collector_binary() -> Option<PathBuf> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let candidates: Vec<PathBuf> = match std::env::var_os("RINGSIDE_COLLECTOR") {
        Some(path) => vec![PathBuf::from(path)],
        None => vec![
            manifest.join("../../../.build/debug/ringside-collector"),
            manifest.join("../../../.build/release/ringside-collector"),
        ],
    };
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Some(found.clone());
    }
    let looked = candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!(
            "ringside-collector not found (looked at {looked}); CI=true, so this test fails: build it with \
             `swift build` at the repository's root, or set RINGSIDE_COLLECTOR to its path"
        );
    }
    say(&format!(
        "SKIPPED: ringside-collector not found (looked at {looked}); build it with `swift build` at the \
         repository's root or set RINGSIDE_COLLECTOR to run this test against the real collector"
    ));
    None
}

/// Writes a line to stderr past the test harness's capture (eprintln! is captured), so that a
/// skipped test says so in `cargo test`'s output.
pub fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The collector binary, or return from the test (skipped) when there is none.
#[macro_export]
macro_rules! collector_or_skip {
    () => {
        match common::collector_binary() {
            Some(path) => path,
            None => return,
        }
    };
}

/// ringside-dump beside the collector (or $RINGSIDE_DUMP), if there is one.
pub fn dump_binary(collector: &Path) -> Option<PathBuf> {
    let path = match std::env::var_os("RINGSIDE_DUMP") {
        Some(path) => PathBuf::from(path),
        None => collector.with_file_name("ringside-dump"),
    };
    path.is_file().then_some(path)
}

// MARK: - A scratch directory

/// A fresh directory under /dev/shm, removed when dropped (also when the test panics).
pub struct ScratchDir {
    pub path: PathBuf,
}

impl ScratchDir {
    pub fn new(test: &str) -> ScratchDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        let path = PathBuf::from(format!(
            "/dev/shm/ringside-rust-test.{test}.{}.{}.{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        ScratchDir { path }
    }

    pub fn file(&self, bot: &str) -> PathBuf {
        self.path.join(format!("ringside.{bot}"))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

// MARK: - The running collector

/// `ringside-collector --dir DIR --listen 127.0.0.1:0 --poll 10ms`, killed when dropped.
pub struct Collector {
    child: Child,
    pub port: u16,
    log: Arc<Mutex<String>>,
}

impl Collector {
    pub fn start(binary: &Path, dir: &ScratchDir) -> Collector {
        Collector::start_with(binary, dir, &[])
    }

    /// `start` with more arguments (`--quantiles 0.01,0.5,0.99`).
    pub fn start_with(binary: &Path, dir: &ScratchDir, arguments: &[&str]) -> Collector {
        let mut child = Command::new(binary)
            .arg("--dir")
            .arg(&dir.path)
            .args(["--listen", "127.0.0.1:0", "--poll", "10ms"])
            .args(arguments)
            .env_remove("RINGSIDE_DISABLED")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (port_sender, port_receiver) = mpsc::channel();
        {
            let log = log.clone();
            std::thread::spawn(move || {
                // Reads the log to its end, so the collector never blocks on a full pipe.
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if let Some(at) = line.find("listening on http://127.0.0.1:") {
                        let rest = &line[at + "listening on http://127.0.0.1:".len()..];
                        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
                        let _ = port_sender.send(digits.parse::<u16>().unwrap_or(0));
                    }
                    let mut log = log.lock().unwrap();
                    log.push_str(&line);
                    log.push('\n');
                }
            });
        }
        let mut collector = Collector { child, port: 0, log };
        match port_receiver.recv_timeout(Duration::from_secs(30)) {
            Ok(port) if port != 0 => collector.port = port,
            _ => panic!("the collector did not say where it listens; its log:\n{}", collector.log()),
        }
        collector
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    pub fn get(&self, path: &str) -> Result<String, String> {
        http_get(self.port, path)
    }

    pub fn latest(&self) -> Result<Json, String> {
        Json::parse(&self.get("/latest")?)
    }

    /// Polls /latest until `check` accepts it (returns Ok), or fails after 20 s with the last
    /// reason, the document and the collector's log.
    pub fn wait_for<T>(&self, what: &str, check: impl FnMut(&Json) -> Result<T, String>) -> T {
        self.wait_for_within(what, Duration::from_secs(20), check)
    }

    /// `wait_for` with another deadline, for work a loaded machine takes long over (millions of
    /// records drained by a debug build).
    pub fn wait_for_within<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&Json) -> Result<T, String>,
    ) -> T {
        let mut last_document = String::new();
        let result = eventually(what, timeout, || {
            let body = self.get("/latest")?;
            last_document = body.clone();
            check(&Json::parse(&body)?)
        });
        match result {
            Ok(value) => value,
            Err(reason) => panic!(
                "{what}: not seen within {timeout:?}: {reason}\n/latest:\n{last_document}\ncollector log:\n{}",
                self.log()
            ),
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Calls `f` every 20 ms until it returns Ok, for at most `timeout`; Err: its last reason.
pub fn eventually<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Result<T, String>) -> Result<T, String> {
    let deadline = Instant::now() + timeout;
    loop {
        match f() {
            Ok(value) => return Ok(value),
            Err(reason) if Instant::now() >= deadline => return Err(format!("{what}: {reason}")),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

// MARK: - HTTP

/// GET http://127.0.0.1:PORT/PATH with HTTP/1.1 and `Connection: close`: the body of a 200.
pub fn http_get(port: u16, path: &str) -> Result<String, String> {
    http_get_with(port, path, "")
}

/// `http_get` with more header lines (`headers`: each ending with "\r\n").
pub fn http_get_with(port: u16, path: &str, headers: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}Connection: close\r\n\r\n")
        .map_err(|e| format!("send: {e}"))?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).map_err(|e| format!("receive: {e}"))?;
    let response = String::from_utf8(response).map_err(|_| "the response is not UTF-8".to_string())?;
    let (head, body) = response.split_once("\r\n\r\n").ok_or("no end of headers")?;
    let status = head.lines().next().unwrap_or("");
    if !status.contains(" 200") {
        return Err(format!("{path}: {status}"));
    }
    let chunked =
        head.lines().any(|l| l.to_ascii_lowercase().starts_with("transfer-encoding:") && l.contains("chunked"));
    if !chunked {
        return Ok(body.to_string());
    }
    let mut out = String::new();
    let mut rest = body;
    loop {
        let (size, after) = rest.split_once("\r\n").ok_or("bad chunk")?;
        let size = usize::from_str_radix(size.trim(), 16).map_err(|_| "bad chunk size")?;
        if size == 0 {
            return Ok(out);
        }
        out.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
}

// MARK: - JSON

#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn parse(text: &str) -> Result<Json, String> {
        let mut parser = Parser { bytes: text.as_bytes(), at: 0 };
        let value = parser.value()?;
        parser.space();
        if parser.at != parser.bytes.len() {
            return Err(format!("trailing bytes at {}", parser.at));
        }
        Ok(value)
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// A dotted path: "windows.1m.max".
    pub fn at(&self, path: &str) -> Option<&Json> {
        path.split('.').try_fold(self, |value, key| value.get(key))
    }

    pub fn number(&self) -> Option<f64> {
        match self {
            Json::Number(n) => Some(*n),
            _ => None,
        }
    }

    pub fn str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn array(&self) -> &[Json] {
        match self {
            Json::Array(items) => items,
            _ => &[],
        }
    }

    /// The number at `path`, or an error naming it.
    pub fn num(&self, path: &str) -> Result<f64, String> {
        self.at(path).and_then(Json::number).ok_or_else(|| format!("no number at {path}"))
    }

    /// The /latest series of `metric` from ring `ring`.
    pub fn series(&self, ring: &str, metric: &str) -> Result<&Json, String> {
        self.get("series")
            .map(Json::array)
            .unwrap_or(&[])
            .iter()
            .find(|s| {
                s.at("ring").and_then(Json::str) == Some(ring) && s.at("metric").and_then(Json::str) == Some(metric)
            })
            .ok_or_else(|| format!("no series {metric} of ring {ring} yet"))
    }

    /// The /latest ring `ring`.
    pub fn ring(&self, ring: &str) -> Result<&Json, String> {
        self.get("rings")
            .map(Json::array)
            .unwrap_or(&[])
            .iter()
            .find(|r| r.at("name").and_then(Json::str) == Some(ring))
            .ok_or_else(|| format!("no ring {ring} yet"))
    }
}

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn space(&mut self) {
        while self.at < self.bytes.len() && self.bytes[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn expect(&mut self, word: &str) -> Result<(), String> {
        if self.bytes[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(())
        } else {
            Err(format!("expected {word} at {}", self.at))
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        self.space();
        match self.bytes.get(self.at) {
            None => Err("unexpected end".into()),
            Some(b'n') => self.expect("null").map(|_| Json::Null),
            Some(b't') => self.expect("true").map(|_| Json::Bool(true)),
            Some(b'f') => self.expect("false").map(|_| Json::Bool(false)),
            Some(b'"') => self.string().map(Json::String),
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                self.space();
                if self.bytes.get(self.at) == Some(&b']') {
                    self.at += 1;
                    return Ok(Json::Array(items));
                }
                loop {
                    items.push(self.value()?);
                    self.space();
                    match self.bytes.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b']') => {
                            self.at += 1;
                            return Ok(Json::Array(items));
                        }
                        _ => return Err(format!("bad array at {}", self.at)),
                    }
                }
            }
            Some(b'{') => {
                self.at += 1;
                let mut fields = Vec::new();
                self.space();
                if self.bytes.get(self.at) == Some(&b'}') {
                    self.at += 1;
                    return Ok(Json::Object(fields));
                }
                loop {
                    self.space();
                    let key = self.string()?;
                    self.space();
                    self.expect(":")?;
                    fields.push((key, self.value()?));
                    self.space();
                    match self.bytes.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b'}') => {
                            self.at += 1;
                            return Ok(Json::Object(fields));
                        }
                        _ => return Err(format!("bad object at {}", self.at)),
                    }
                }
            }
            Some(_) => {
                let start = self.at;
                while self.at < self.bytes.len() && b"+-0123456789.eE".contains(&self.bytes[self.at]) {
                    self.at += 1;
                }
                let text = std::str::from_utf8(&self.bytes[start..self.at]).unwrap();
                text.parse::<f64>().map(Json::Number).map_err(|_| format!("bad number {text:?} at {start}"))
            }
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.expect("\"")?;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.bytes.get(self.at) else { return Err("unterminated string".into()) };
            self.at += 1;
            match c {
                b'"' => return String::from_utf8(out).map_err(|_| "bad UTF-8".to_string()),
                b'\\' => {
                    let escape = *self.bytes.get(self.at).ok_or("bad escape")?;
                    self.at += 1;
                    let decoded = match escape {
                        b'n' => '\n',
                        b't' => '\t',
                        b'r' => '\r',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'u' => {
                            let hex = std::str::from_utf8(&self.bytes[self.at..self.at + 4]).map_err(|_| "bad \\u")?;
                            self.at += 4;
                            char::from_u32(u32::from_str_radix(hex, 16).map_err(|_| "bad \\u")?).unwrap_or('\u{fffd}')
                        }
                        other => other as char,
                    };
                    let mut buffer = [0u8; 4];
                    out.extend_from_slice(decoded.encode_utf8(&mut buffer).as_bytes());
                }
                other => out.push(other),
            }
        }
    }
}

// MARK: - The bot file, read directly

/// A snapshot of a bot file's bytes, read as ringside.h lays them out.
pub struct RingFile {
    bytes: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub timestamp_ns: u64,
    pub value: u64,
    pub sequence: u64,
    pub metric: u32,
    pub kind: u8,
    pub flags: u8,
    pub exemplar_length: u16,
}

#[derive(Debug, Clone)]
pub struct Lane {
    pub write_cursor: u64,
    pub dropped_total: u64,
    pub state: u32,
    pub owner_tid: i32,
    pub claims: u32,
    /// `cell_writes` (0x24): the counter increments made through the lane.
    pub cell_writes: u32,
    /// `thread_name` (0x28, 32 bytes): the bytes before the first NUL.
    pub thread_name: Vec<u8>,
    /// `gathered` (0x48): calls gathered on the lane, all histograms (SAMPLING in ringside.h).
    pub gathered: u64,
    pub read_cursor: u64,
}

/// A histogram's gather cell on a lane (`rs_gather_cell`: SAMPLING AND GATHERING in ringside.h).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GatherCell {
    /// Calls gathered: counted, written as no record.
    pub calls: u64,
    /// Their values' sum, modulo 2^64.
    pub sum: u64,
    /// The last one's value.
    pub latest: u64,
    /// The largest gathered value no consumer has taken.
    pub max: u64,
    /// The sum of the values of the histogram's records the lane dropped.
    pub dropped_sum: u64,
    /// The largest of them.
    pub dropped_max: u64,
}

impl RingFile {
    pub fn read(path: &Path) -> RingFile {
        RingFile { bytes: std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display())) }
    }
    /// The file without its records, for a file of large lanes: the header part and each lane's
    /// header, cells and gather cells are read; the records' bytes stay zero (and unallocated).
    pub fn read_without_records(path: &Path) -> RingFile {
        use std::os::unix::fs::FileExt;
        let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        let length = file.metadata().unwrap().len() as usize;
        let mut ring = RingFile { bytes: vec![0; length] }; // zeroed pages, touched only where read
        file.read_exact_at(&mut ring.bytes[..HEADER_PAGE], 0).unwrap();
        let lanes_offset = ring.u64(0x30) as usize;
        file.read_exact_at(&mut ring.bytes[HEADER_PAGE..lanes_offset], HEADER_PAGE as u64).unwrap();
        let records_offset = ring.u32(0x50) as usize;
        for lane in 0..ring.lanes_allocated() {
            let at = ring.lane_at(lane);
            file.read_exact_at(&mut ring.bytes[at..at + records_offset], at as u64).unwrap();
        }
        ring
    }
    pub fn u32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.bytes[at..at + 4].try_into().unwrap())
    }
    pub fn u64(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bytes[at..at + 8].try_into().unwrap())
    }
    pub fn version(&self) -> u32 {
        self.u32(0x08)
    }
    pub fn capacity(&self) -> u64 {
        1 << self.u32(0x14)
    }
    pub fn lanes_allocated(&self) -> u32 {
        self.u32(0x80)
    }
    pub fn metric_count(&self) -> u32 {
        self.u32(0x84)
    }
    pub fn producer_pid(&self) -> i32 {
        self.u32(0x98) as i32
    }
    pub fn producer_attaches(&self) -> u32 {
        self.u32(0x9C)
    }
    pub fn lanes_exhausted(&self) -> u64 {
        self.u64(0xA0)
    }
    /// `sample_above` (0x0B0): records in a lane below which its histograms are never sampled.
    pub fn sample_above(&self) -> u32 {
        self.u32(0xB0)
    }
    fn lane_at(&self, lane: u32) -> usize {
        (self.u64(0x30) + lane as u64 * self.u64(0x48)) as usize
    }
    pub fn lane(&self, lane: u32) -> Lane {
        let at = self.lane_at(lane);
        Lane {
            write_cursor: self.u64(at),
            dropped_total: self.u64(at + 0x08),
            state: self.u32(at + 0x18),
            owner_tid: self.u32(at + 0x1C) as i32,
            claims: self.u32(at + 0x20),
            cell_writes: self.u32(at + 0x24),
            thread_name: self.bytes[at + 0x28..at + 0x48].iter().copied().take_while(|&b| b != 0).collect(),
            gathered: self.u64(at + 0x48),
            read_cursor: self.u64(at + 0x80),
        }
    }
    /// A lane's cell of a metric: a counter's increments there, or a histogram's or gauge's drops.
    pub fn lane_cell(&self, lane: u32, metric: u32) -> u64 {
        self.u64(self.lane_at(lane) + 256 + metric as usize * 8)
    }
    /// A metric cell: (gauge_bits, gauge_set, unlaned).
    pub fn metric_cell(&self, metric: u32) -> (u64, u64, u64) {
        let at = self.u64(0x28) as usize + metric as usize * METRIC_CELL_SIZE;
        (self.u64(at), self.u64(at + 8), self.u64(at + 16))
    }
    /// A histogram's metric cell: (unlaned_sum, unlaned_max), the values dropped by threads
    /// without a lane (DROPPED VALUES in ringside.h).
    pub fn unlaned_values(&self, metric: u32) -> (u64, u64) {
        let at = self.u64(0x28) as usize + metric as usize * METRIC_CELL_SIZE;
        (self.u64(at + 0x18), self.u64(at + 0x20))
    }
    /// A histogram's or counter's `clamped` (0x28): values it could not hold, clamped or not
    /// recorded (VALUES in ringside.h).
    pub fn clamped(&self, metric: u32) -> u64 {
        self.u64(self.u64(0x28) as usize + metric as usize * METRIC_CELL_SIZE + 0x28)
    }
    /// Registry entry `index`'s `form` (0x007: 1 for a signed histogram) and `scale` (0x012).
    pub fn values(&self, index: u32) -> (u8, i8) {
        let at = self.u64(0x20) as usize + index as usize * 512;
        (self.bytes[at + 7], self.bytes[at + 0x12] as i8)
    }
    /// A histogram's gather cell on a lane.
    pub fn gather_cell(&self, lane: u32, metric: u32) -> GatherCell {
        let at = self.lane_at(lane) + self.u32(0x60) as usize + metric as usize * GATHER_CELL_SIZE;
        GatherCell {
            calls: self.u64(at),
            sum: self.u64(at + 0x08),
            latest: self.u64(at + 0x10),
            max: self.u64(at + 0x18),
            dropped_sum: self.u64(at + 0x20),
            dropped_max: self.u64(at + 0x28),
        }
    }
    /// Registry entry `index`: its name, its labels as stored ("k=v" lines), its kind.
    pub fn entry(&self, index: u32) -> (String, String, u8) {
        let at = self.u64(0x20) as usize + index as usize * 512;
        let length = |at: usize| u16::from_le_bytes([self.bytes[at], self.bytes[at + 1]]) as usize;
        let text = |from: usize, length: usize| String::from_utf8_lossy(&self.bytes[from..from + length]).into_owned();
        (text(at + 0x18, length(at + 0x0C)), text(at + 0x80, length(at + 0x0E)), self.bytes[at + 4])
    }
    /// Registry entry `index`'s gauge_merge byte (0x006: an `rs_gauge_merge` code) and its
    /// reserved0 byte (0x007, zero).
    pub fn gauge_merge(&self, index: u32) -> (u8, u8) {
        let at = self.u64(0x20) as usize + index as usize * 512;
        (self.bytes[at + 6], self.bytes[at + 7])
    }
    /// Registry entry `index`'s 512 bytes as stored.
    pub fn entry_bytes(&self, index: u32) -> &[u8] {
        let at = self.u64(0x20) as usize + index as usize * 512;
        &self.bytes[at..at + 512]
    }
    /// Every registry entry published, by index.
    pub fn entries(&self) -> Vec<(String, String, u8)> {
        (0..self.metric_count()).map(|index| self.entry(index)).collect()
    }
    /// Records in [read_cursor, write_cursor) of a lane, oldest first.
    pub fn records(&self, lane: u32) -> Vec<Record> {
        let l = self.lane(lane);
        let records = self.lane_at(lane) + self.u32(0x50) as usize;
        let mask = self.capacity() - 1;
        let first = l.read_cursor.max(l.write_cursor.saturating_sub(self.capacity()));
        (first..l.write_cursor)
            .map(|cursor| {
                let at = records + ((cursor & mask) as usize) * 32;
                Record {
                    timestamp_ns: self.u64(at),
                    value: self.u64(at + 8),
                    sequence: self.u64(at + 16),
                    metric: self.u32(at + 24),
                    kind: self.bytes[at + 28],
                    flags: self.bytes[at + 29],
                    exemplar_length: u16::from_le_bytes([self.bytes[at + 30], self.bytes[at + 31]]),
                }
            })
            .collect()
    }
}

const HEADER_PAGE: usize = 4096;
const METRIC_CELL_SIZE: usize = 64;
const GATHER_CELL_SIZE: usize = 64;
/// In the header: `consumer_pid`, `weights_reader_pid` and `drain_interval_ns` (the consumer's line).
const CONSUMER_PID: u64 = 0x100;
const WEIGHTS_READER_PID: u64 = 0x104;
const DRAIN_INTERVAL_NS: u64 = 0x110;

/// Says in a bot file, as a consumer would at attach, that its consumer is process `pid`, whether
/// it reads gather cells (then the producer may sample: SAMPLING in ringside.h), and the longest
/// it means to leave a filling lane undrained (0: not said). The test then plays that consumer.
pub fn declare_consumer(path: &Path, pid: i32, reads_gather_cells: bool, drain_interval_ns: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(&pid.to_le_bytes(), CONSUMER_PID).unwrap();
    let weights = if reads_gather_cells { pid } else { 0 };
    file.write_all_at(&weights.to_le_bytes(), WEIGHTS_READER_PID).unwrap();
    file.write_all_at(&drain_interval_ns.to_le_bytes(), DRAIN_INTERVAL_NS).unwrap();
}

// MARK: - The bot file, mapped

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut [i64; 2]) -> i32;
    fn mmap(address: *mut u8, length: usize, protection: i32, flags: i32, fd: i32, offset: i64) -> *mut u8;
    fn munmap(address: *mut u8, length: usize) -> i32;
}

/// A bot file mapped shared, as the collector maps it: its 64-bit fields read and written as
/// atomics while the producer writes them, for a test that watches a lane call by call (its
/// cursors, its drops, its gather cells) or plays its consumer. The mapping covers the file as
/// long as it was when mapped (lanes added later lie past it).
pub struct SharedFile {
    base: *mut u8,
    length: usize,
}

// SAFETY: the mapping is plain shared memory, read and written only through atomics.
unsafe impl Send for SharedFile {}
// SAFETY: as above: every access is an atomic load, store or exchange.
unsafe impl Sync for SharedFile {}

impl SharedFile {
    pub fn map(path: &Path) -> SharedFile {
        use std::os::unix::io::AsRawFd;
        let file = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
        let length = file.metadata().unwrap().len() as usize;
        assert!(length >= HEADER_PAGE, "{} is shorter than a header", path.display());
        // SAFETY: a new shared mapping of the whole file (PROT_READ | PROT_WRITE, MAP_SHARED),
        // placed by the kernel; the descriptor may close afterwards.
        let base = unsafe { mmap(std::ptr::null_mut(), length, 3, 1, file.as_raw_fd(), 0) };
        assert!(base as isize != -1, "mmap {}: {}", path.display(), std::io::Error::last_os_error());
        SharedFile { base, length }
    }

    /// The 64-bit field at byte `at`.
    fn word(&self, at: usize) -> &AtomicU64 {
        assert!(at % 8 == 0 && at + 8 <= self.length, "field {at} out of the mapping ({} bytes)", self.length);
        // SAFETY: in bounds and aligned (above; the mapping is page-aligned), and shared memory is
        // only ever reached through atomics here, as the format's parties reach it.
        unsafe { &*(self.base.add(at) as *const AtomicU64) }
    }

    /// The field at `at`, with acquire ordering (what was written before it is visible).
    pub fn load(&self, at: usize) -> u64 {
        self.word(at).load(Ordering::Acquire)
    }

    /// Stores `value` at `at` with release ordering, as a consumer stores its read cursor.
    pub fn store(&self, at: usize, value: u64) {
        self.word(at).store(value, Ordering::Release)
    }

    /// Takes the field at `at`, leaving 0, as the collector takes a gather cell's `max`.
    pub fn take(&self, at: usize) -> u64 {
        self.word(at).swap(0, Ordering::Relaxed)
    }

    /// Where lane `lane` starts.
    pub fn lane_at(&self, lane: u32) -> usize {
        (self.load(0x30) + lane as u64 * self.load(0x48)) as usize
    }

    /// The lane (below `lanes_allocated`) whose holder is thread `tid`, if one is.
    pub fn lane_of_thread(&self, tid: i32) -> Option<u32> {
        let lanes = self.load(0x80) as u32; // lanes_allocated (and metric_count above it)
        (0..lanes).find(|&lane| {
            let at = self.lane_at(lane);
            at + 0x100 <= self.length && (self.load(at + 0x18) >> 32) as i32 == tid
            // owner_tid
        })
    }

    /// The byte of lane `lane`'s gather cell of `metric`.
    pub fn gather_at(&self, lane: u32, metric: u32) -> usize {
        self.lane_at(lane) + (self.load(0x60) & 0xFFFF_FFFF) as usize + metric as usize * GATHER_CELL_SIZE
    }

    /// The record at `cursor` of lane `lane` (a slot the producer published, and no consumer
    /// freed), its words read as atomics.
    pub fn record(&self, lane: u32, cursor: u64) -> Record {
        let capacity = 1u64 << (self.load(0x10) >> 32); // capacity_log2 beside record_size
        let at =
            self.lane_at(lane) + (self.load(0x50) & 0xFFFF_FFFF) as usize + ((cursor & (capacity - 1)) * 32) as usize;
        let tail = self.load(at + 24);
        Record {
            timestamp_ns: self.load(at),
            value: self.load(at + 8),
            sequence: self.load(at + 16),
            metric: tail as u32,
            kind: (tail >> 32) as u8,
            flags: (tail >> 40) as u8,
            exemplar_length: (tail >> 48) as u16,
        }
    }
}

impl Drop for SharedFile {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; no reference into it outlives `self`.
        unsafe { munmap(self.base, self.length) };
    }
}

/// CLOCK_MONOTONIC in nanoseconds, as the C producer's rs_clock_precise_ns reads it.
pub fn clock_monotonic_ns() -> u64 {
    let mut ts = [0i64; 2];
    // SAFETY: a struct timespec is two 64-bit integers on 64-bit Linux; CLOCK_MONOTONIC (1) exists.
    unsafe { clock_gettime(1, &mut ts) };
    ts[0] as u64 * 1_000_000_000 + ts[1] as u64
}

/// Whether spans on this machine belong on the TSC, judged apart from the crate: x86-64,
/// /proc/cpuinfo's flags constant_tsc and nonstop_tsc, and the kernel's clocksource tsc.
pub fn machine_has_usable_tsc() -> bool {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags: Vec<&str> =
        cpuinfo.lines().find(|l| l.starts_with("flags")).map(|l| l.split_whitespace().collect()).unwrap_or_default();
    let source = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    cfg!(target_arch = "x86_64")
        && flags.contains(&"constant_tsc")
        && flags.contains(&"nonstop_tsc")
        && source.map(|s| s.trim() == "tsc").unwrap_or(false)
}

/// The kernel's id of the calling thread (from /proc/thread-self -> PID/task/TID).
pub fn thread_id() -> i32 {
    let link = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
    link.file_name().unwrap().to_str().unwrap().parse().unwrap()
}

/// Equal within rounding (the collector prints doubles).
pub fn approx(value: f64, expected: f64) -> bool {
    (value - expected).abs() <= 1e-9 * expected.abs().max(1.0)
}

// MARK: - Test values and the C producer

/// SplitMix64: a small generator of test values and choices, the same in every run of a seed.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value from 0 to `bound` - 1 (0 when `bound` is 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }

    /// A double from 0 to 1 (1 excluded), of 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The repository's checkout, above this crate.
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// Compiles the C program `source` with the C producer (Sources/CRingside) into `program`:
/// false when there is no cc, no Sources/CRingside, or it does not compile.
pub fn compile_with_c_producer(source: &Path, program: &Path) -> bool {
    let sources = repository().join("Sources/CRingside");
    sources.is_dir()
        && source.is_file()
        && Command::new("cc")
            .args(["-std=gnu11", "-pthread", "-O1", "-I"])
            .arg(sources.join("include"))
            .arg(source)
            .arg(sources.join("ringside_producer.c"))
            .arg(sources.join("ringside.c"))
            .arg("-o")
            .arg(program)
            .status()
            .is_ok_and(|s| s.success())
}
