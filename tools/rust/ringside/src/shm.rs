//! The shared memory: the mapped file's structures and the one writer of a lane. ALL the crate's
//! pointer work on the mapped file is in this module.
//!
//! Every field that two parties share (this process and the collector, or two threads of this
//! process) is an `AtomicU64`/`AtomicU32` laid over the file at its offset in ringside.h, so every
//! access is an atomic load or store whose ordering is written beside it. Two things are written
//! with plain stores, as the C producer writes them: a record's 32 bytes (published by the
//! release store of `write_cursor` after them; the consumer reads only published slots and the
//! producer writes only slots the consumer has released) and a registry entry's 512 bytes
//! (published by the release store of `metric_count`; never changed afterwards).
//!
//! Each thread's table of its writers (one entry per bot slot) is here too, since its entries
//! point at writers: an entry is followed only for the `Writers` whose generation it carries, and
//! a generation is never given twice, so an entry never leads to writers that are gone.

use crate::bot::MAX_BOTS_PER_PROCESS;
use crate::layout::{
    Geometry, CONTROL_BOT_OFF, CONTROL_OFF, DEFAULT_DRAIN_INTERVAL_NS, EXEMPLAR_BYTES_PER_RECORD, EXEMPLAR_MAX,
    FLAG_EXEMPLAR, FLAG_WEIGHT_SHIFT, GATHER_CELL_SIZE, KIND_EXEMPLAR, KIND_GAUGE, KIND_HISTOGRAM, LANE_ACTIVE,
    LANE_HEADER_SIZE, LANE_RETIRED, LOOK_FRACTION_LOG2, METRIC_CELL_SIZE, REGISTRY_ENTRY_SIZE, RESERVE_FRACTION_LOG2,
    RESERVE_MIN, THREAD_NAME_MAX, WEIGHT_LOG2_MAX,
};
use crate::sys;
use std::cell::{Cell, UnsafeCell};
use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::*};

/// The header's first 448 bytes (`rs_header`).
#[repr(C)]
pub struct Header {
    // 0x000: layout, written by the creator before `version`.
    pub magic: AtomicU64,
    pub version: AtomicU32,
    pub header_size: AtomicU32,
    pub record_size: AtomicU32,
    pub capacity_log2: AtomicU32,
    pub registry_capacity: AtomicU32,
    pub registry_entry_size: AtomicU32,
    pub registry_offset: AtomicU64,
    pub cells_offset: AtomicU64,
    pub lanes_offset: AtomicU64,
    pub created_realtime_ns: AtomicU64,
    pub created_monotonic_ns: AtomicU64,
    pub lane_size: AtomicU64,
    pub lane_records_offset: AtomicU32,
    pub max_lanes: AtomicU32,
    pub metric_cell_size: AtomicU32,
    pub lane_header_size: AtomicU32,
    /// In each lane: where its gather cells start (SAMPLING AND GATHERING in ringside.h).
    pub lane_gather_offset: AtomicU32,
    pub gather_cell_size: AtomicU32,
    _layout_reserved: [u8; 0x80 - 0x68],
    // 0x080: the producer's line.
    pub lanes_allocated: AtomicU32,
    pub metric_count: AtomicU32,
    pub heartbeat_ns: AtomicU64,
    pub producer_start_ns: AtomicU64,
    pub producer_pid: AtomicI32,
    pub producer_attaches: AtomicU32,
    pub lanes_exhausted: AtomicU64,
    /// The bot's own file only: processes refused a worker file (WORKERS in ringside.h), each
    /// adding 1 atomically: the one field a process other than the attached one writes.
    pub workers_refused: AtomicU64,
    /// Records in a lane below which its histograms are never sampled (SAMPLING in ringside.h); 0: never.
    pub sample_above: AtomicU32,
    /// 1 while the attached process rings the doorbell (DOORBELL in ringside.h); 0: it never does.
    pub rings_doorbell: AtomicU32,
    _producer_reserved: [u8; 0x100 - 0xB8],
    // 0x100: the consumer's line (never written here).
    pub consumer_pid: AtomicI32,
    /// The consumer's pid again when it reads gather cells: the producer samples only then.
    pub weights_reader_pid: AtomicI32,
    pub consumer_heartbeat_ns: AtomicU64,
    /// The longest the consumer expects to leave a filling lane undrained (SAMPLING in
    /// ringside.h); 0: not said (`DEFAULT_DRAIN_INTERVAL_NS`).
    pub drain_interval_ns: AtomicU64,
    _consumer_reserved: [u8; 0x140 - 0x118],
    // 0x140: the doorbell's line (DOORBELL in ringside.h), alone on it: a call loads it.
    /// 1 while the consumer sleeps and asks to be woken (it alone stores 1); else 0.
    pub doorbell: AtomicU32,
    _doorbell_reserved: [u8; 0x180 - 0x144],
    // 0x180: the operator's line (CONTROL in ringside.h): written by its tool only.
    /// `CONTROL_BOT_OFF` while the bot is off, else 0.
    pub bot_control: AtomicU32,
    _control_reserved: [u8; 0x1C0 - 0x184],
}

/// One registry entry (`rs_registry_entry`), as plain bytes: written once, then published.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RegistryEntry {
    pub index: u32,
    pub kind: u8,
    pub unit: u8,
    pub gauge_merge: u8, // rs_gauge_merge for a gauge; 0 for the other kinds
    pub form: u8,        // FORM_SIGNED for a signed histogram, else 0 (VALUES in ringside.h)
    pub sample_every: u32,
    pub name_length: u16,
    pub labels_length: u16,
    pub help_length: u16,
    pub scale: i8, // a value is a whole number of 10^scale of the unit (histograms and counters)
    pub reserved1: u8,
    /// Even: live; odd: retired (RETIRING A SERIES in ringside.h). Published entries change it
    /// through `Mapping::entry_retired` only.
    pub retired: u32,
    pub name: [u8; 104],
    pub labels: [u8; 256],
    pub help: [u8; 128],
}

/// One metric's cell shared by every thread (`rs_metric_cell`).
#[repr(C)]
pub struct MetricCell {
    pub gauge_bits: AtomicU64,
    pub gauge_set: AtomicU64,
    pub unlaned: AtomicU64,
    /// Histograms: the sum of the values dropped by threads with no lane (atomic add, modulo 2^64).
    pub unlaned_sum: AtomicU64,
    /// Histograms: the largest of them (raised by compare-and-swap).
    pub unlaned_max: AtomicU64,
    /// Histograms and counters: values clamped or not recorded (VALUES in ringside.h; atomic add).
    pub clamped: AtomicU64,
    /// The operator's switches (CONTROL in ringside.h: `CONTROL_OFF`, `CONTROL_BOT_OFF`,
    /// `CONTROL_SAMPLE`): written by its tool only (atomic read-modify-writes), and by a producer
    /// publishing the metric (an atomic or); read at every call.
    pub control: AtomicU32,
    _reserved0: AtomicU32,
    /// Histograms: exemplars refused (given to a signed histogram), their values recorded without
    /// them (EXEMPLARS in ringside.h; atomic add).
    pub exemplars_refused: AtomicU64,
}

/// Which of a metric cell's counts a refusal adds to.
#[derive(Clone, Copy)]
pub enum Refusal {
    /// A value the metric could not hold: clamped, or not recorded (`clamped`).
    Value,
    /// An exemplar refused, its value recorded without it (`exemplars_refused`).
    Exemplar,
}

impl MetricCell {
    /// The count `refusal` adds to.
    pub fn refusals(&self, refusal: Refusal) -> &AtomicU64 {
        match refusal {
            Refusal::Value => &self.clamped,
            Refusal::Exemplar => &self.exemplars_refused,
        }
    }
}

/// One histogram's gathered calls on one lane (`rs_gather_cell`; SAMPLING AND GATHERING in
/// ringside.h): written by the lane's holder, but for `max`, which the consumer takes (an exchange
/// with 0). Cumulative over the lane's life, but `max`.
#[repr(C)]
pub struct GatherCell {
    /// Calls gathered: counted, written as no record (release store, after `sum` and `latest`).
    pub calls: AtomicU64,
    /// Their values' sum, modulo 2^64.
    pub sum: AtomicU64,
    /// The last one's value.
    pub latest: AtomicU64,
    /// The largest gathered value the consumer has not taken (0: none).
    pub max: AtomicU64,
    /// The sum of the values of this histogram's records the lane dropped (their count is the
    /// lane cell), modulo 2^64.
    pub dropped_sum: AtomicU64,
    /// The largest of them.
    pub dropped_max: AtomicU64,
    _reserved: [AtomicU64; 2],
}

/// A lane's header (`rs_lane_header`).
#[repr(C)]
pub struct LaneHeader {
    pub write_cursor: AtomicU64,
    pub dropped_total: AtomicU64,
    pub heartbeat_ns: AtomicU64,
    pub state: AtomicU32,
    pub owner_tid: AtomicI32,
    pub claims: AtomicU32,
    /// Counter increments made through this lane, wrapping (CELLS in ringside.h): a reader
    /// watching it beside `write_cursor` sees a counter move without a record.
    pub cell_writes: AtomicU32,
    /// The holder's name (THREAD NAMES in ringside.h): 32 bytes, NUL-padded, as 4 words whose
    /// bytes lie in memory as the name's do (stored whole by whoever names the lane).
    thread_name: [AtomicU64; THREAD_NAME_MAX / 8],
    /// Calls gathered on this lane, all histograms (release store; SAMPLING in ringside.h): a
    /// reader that sees it move reads the gather cells.
    pub gathered: AtomicU64,
    _producer_reserved: [u8; 0x80 - 0x50],
    pub read_cursor: AtomicU64,
    pub consumer_heartbeat_ns: AtomicU64,
    _consumer_reserved: [u8; 0x100 - 0x90],
}

/// One record (`rs_record`).
#[repr(C)]
struct Record {
    timestamp_ns: u64,
    value: u64,
    sequence: u64,
    metric: u32,
    kind: u8,
    flags: u8,
    exemplar_length: u16, // with FLAG_EXEMPLAR, the exemplar's bytes; else zero
}

// The C header's static assertions, again.
const _: () = {
    assert!(size_of::<Header>() == 0x1C0);
    assert!(offset_of!(Header, version) == 0x008);
    assert!(offset_of!(Header, lane_size) == 0x048);
    assert!(offset_of!(Header, lane_header_size) == 0x05C);
    assert!(offset_of!(Header, lane_gather_offset) == 0x060);
    assert!(offset_of!(Header, gather_cell_size) == 0x064);
    assert!(offset_of!(Header, lanes_allocated) == 0x080);
    assert!(offset_of!(Header, producer_pid) == 0x098);
    assert!(offset_of!(Header, lanes_exhausted) == 0x0A0);
    assert!(offset_of!(Header, workers_refused) == 0x0A8);
    assert!(offset_of!(Header, sample_above) == 0x0B0);
    assert!(offset_of!(Header, rings_doorbell) == 0x0B4);
    assert!(offset_of!(Header, consumer_pid) == 0x100);
    assert!(offset_of!(Header, weights_reader_pid) == 0x104);
    assert!(offset_of!(Header, consumer_heartbeat_ns) == 0x108);
    assert!(offset_of!(Header, drain_interval_ns) == 0x110);
    assert!(offset_of!(Header, doorbell) == 0x140);
    assert!(offset_of!(Header, bot_control) == 0x180);
    assert!(size_of::<RegistryEntry>() == REGISTRY_ENTRY_SIZE as usize);
    assert!(offset_of!(RegistryEntry, gauge_merge) == 0x006);
    assert!(offset_of!(RegistryEntry, form) == 0x007);
    assert!(offset_of!(RegistryEntry, sample_every) == 0x008);
    assert!(offset_of!(RegistryEntry, scale) == 0x012);
    assert!(offset_of!(RegistryEntry, name) == 0x018);
    assert!(offset_of!(RegistryEntry, labels) == 0x080);
    assert!(offset_of!(RegistryEntry, help) == 0x180);
    assert!(size_of::<MetricCell>() == METRIC_CELL_SIZE as usize);
    assert!(offset_of!(MetricCell, unlaned) == 0x10);
    assert!(offset_of!(MetricCell, unlaned_sum) == 0x18);
    assert!(offset_of!(MetricCell, unlaned_max) == 0x20);
    assert!(offset_of!(MetricCell, clamped) == 0x28);
    assert!(offset_of!(MetricCell, control) == 0x30);
    assert!(size_of::<GatherCell>() == GATHER_CELL_SIZE as usize);
    assert!(offset_of!(GatherCell, calls) == 0x00);
    assert!(offset_of!(GatherCell, sum) == 0x08);
    assert!(offset_of!(GatherCell, latest) == 0x10);
    assert!(offset_of!(GatherCell, max) == 0x18);
    assert!(offset_of!(GatherCell, dropped_sum) == 0x20);
    assert!(offset_of!(GatherCell, dropped_max) == 0x28);
    assert!(size_of::<LaneHeader>() == LANE_HEADER_SIZE as usize);
    assert!(offset_of!(LaneHeader, state) == 0x18);
    assert!(offset_of!(LaneHeader, claims) == 0x20);
    assert!(offset_of!(LaneHeader, thread_name) == 0x28);
    assert!(size_of::<[AtomicU64; THREAD_NAME_MAX / 8]>() == THREAD_NAME_MAX);
    assert!(offset_of!(LaneHeader, gathered) == 0x48);
    assert!(offset_of!(LaneHeader, read_cursor) == 0x80);
    assert!(size_of::<Record>() == 32);
    assert!(offset_of!(Record, timestamp_ns) == 0x00);
    assert!(offset_of!(Record, value) == 0x08);
    assert!(offset_of!(Record, sequence) == 0x10);
    assert!(offset_of!(Record, metric) == 0x18);
    assert!(offset_of!(Record, kind) == 0x1C);
    assert!(offset_of!(Record, flags) == 0x1D);
    assert!(offset_of!(Record, exemplar_length) == 0x1E);
    // An exemplar's bytes fill whole records: 16 a record, in timestamp_ns then value.
    assert!(EXEMPLAR_BYTES_PER_RECORD == 2 * size_of::<u64>() && EXEMPLAR_MAX % EXEMPLAR_BYTES_PER_RECORD == 0);
};

impl RegistryEntry {
    pub fn zeroed() -> RegistryEntry {
        // SAFETY: every field is an integer or an array of bytes: all zeros is valid.
        unsafe { std::mem::zeroed() }
    }
    /// An entry from its 512 bytes as stored (read from a file, not mapped): field by field.
    pub fn from_bytes(bytes: &[u8]) -> RegistryEntry {
        assert_eq!(bytes.len(), REGISTRY_ENTRY_SIZE as usize);
        let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        let mut entry = RegistryEntry::zeroed();
        entry.index = u32::from_le_bytes(bytes[0x00..0x04].try_into().unwrap());
        entry.kind = bytes[0x04];
        entry.unit = bytes[0x05];
        entry.gauge_merge = bytes[0x06];
        entry.form = bytes[0x07];
        entry.sample_every = u32::from_le_bytes(bytes[0x08..0x0C].try_into().unwrap());
        entry.name_length = u16_at(0x0C);
        entry.labels_length = u16_at(0x0E);
        entry.help_length = u16_at(0x10);
        entry.scale = bytes[0x12] as i8;
        entry.reserved1 = bytes[0x13];
        entry.retired = u32::from_le_bytes(bytes[0x14..0x18].try_into().unwrap());
        entry.name.copy_from_slice(&bytes[0x18..0x80]);
        entry.labels.copy_from_slice(&bytes[0x80..0x180]);
        entry.help.copy_from_slice(&bytes[0x180..0x200]);
        entry
    }
    pub fn name(&self) -> &[u8] {
        &self.name[..(self.name_length as usize).min(self.name.len())]
    }
    pub fn labels(&self) -> &[u8] {
        &self.labels[..(self.labels_length as usize).min(self.labels.len())]
    }
    pub fn help(&self) -> &[u8] {
        &self.help[..(self.help_length as usize).min(self.help.len())]
    }
}

/// A shared, read-write mapping of part of the file; unmapped when dropped.
pub struct Mapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory shared by design, owned by this value (unmapped once, when it
// is dropped, on whichever thread); nothing about it is tied to the thread that mapped it.
unsafe impl Send for Mapping {}
// SAFETY: through `&Mapping` every shared field is reached as an atomic; the plain writes (records,
// registry entries, a new lane's zeroes) are confined by the rules their functions state (one
// writer, nothing published yet), and the records through the single-writer discipline of `Writer`.
unsafe impl Sync for Mapping {}

impl Mapping {
    pub fn map(fd: i32, offset: u64, len: u64) -> Result<Mapping, sys::Errno> {
        let base = sys::map_shared(fd, offset, len as usize)?;
        Ok(Mapping { base, len: len as usize })
    }

    /// A read-only mapping (of another process's file, whose words are only ever loaded through
    /// it: the header's, a metric cell's, an entry's copy); nothing may be written through it.
    pub fn map_read_only(fd: i32, offset: u64, len: u64) -> Result<Mapping, sys::Errno> {
        let base = sys::map_shared_read_only(fd, offset, len as usize)?;
        Ok(Mapping { base, len: len as usize })
    }

    /// The header's first 448 bytes (the mapping starts at offset 0 of the file).
    pub fn header(&self) -> &Header {
        assert!(self.len >= size_of::<Header>());
        // SAFETY: in bounds, page-aligned, and every field the format shares is atomic.
        unsafe { &*(self.base as *const Header) }
    }

    /// Metric cell `index` of the header mapping.
    pub fn cells(&self, geometry: &Geometry) -> *const MetricCell {
        assert!(self.len as u64 >= geometry.lanes_offset);
        // SAFETY: cells_offset + capacity * 32 <= lanes_offset <= len (Geometry::of).
        unsafe { self.base.add(geometry.cells_offset as usize) as *const MetricCell }
    }

    /// Metric cell `index` (below `registry_capacity`) of the header mapping.
    pub fn metric_cell(&self, geometry: &Geometry, index: u32) -> &MetricCell {
        let at = geometry.cells_offset as usize + index as usize * METRIC_CELL_SIZE as usize;
        assert!(
            at + METRIC_CELL_SIZE as usize <= geometry.lanes_offset as usize
                && at + METRIC_CELL_SIZE as usize <= self.len
        );
        // SAFETY: in bounds (above), 8-byte aligned (cells_offset is), and every field is atomic.
        unsafe { &*(self.base.add(at) as *const MetricCell) }
    }

    /// A copy of registry entry `index` (below `registry_capacity`, which the caller checked).
    pub fn read_entry(&self, geometry: &Geometry, index: u32) -> RegistryEntry {
        let at = geometry.registry_offset as usize + index as usize * REGISTRY_ENTRY_SIZE as usize;
        assert!(at + REGISTRY_ENTRY_SIZE as usize <= geometry.cells_offset as usize && at < self.len);
        // SAFETY: in bounds (above); entries below metric_count never change, and an entry being
        // read at attach has no other writer (we hold the producer lock).
        unsafe { std::ptr::read(self.base.add(at) as *const RegistryEntry) }
    }

    /// The `retired` word (0x014) of registry entry `index` (below `registry_capacity`): the one
    /// word of a published entry that changes (RETIRING A SERIES in ringside.h).
    pub fn entry_retired(&self, geometry: &Geometry, index: u32) -> &AtomicU32 {
        let at = geometry.registry_offset as usize + index as usize * REGISTRY_ENTRY_SIZE as usize + 0x14;
        assert!(at + 4 <= geometry.cells_offset as usize && at + 4 <= self.len);
        // SAFETY: in bounds (above), 4-byte aligned (entries are 512 bytes from a page), and the
        // word is only ever accessed atomically once its entry is published.
        unsafe { &*(self.base.add(at) as *const AtomicU32) }
    }

    /// Writes registry entry `entry.index` in full. The caller publishes it afterwards with a
    /// release store of `metric_count` (and holds the bot's mutex: one writer).
    pub fn write_entry(&self, geometry: &Geometry, entry: &RegistryEntry) {
        let at = geometry.registry_offset as usize + entry.index as usize * REGISTRY_ENTRY_SIZE as usize;
        assert!(at + REGISTRY_ENTRY_SIZE as usize <= geometry.cells_offset as usize && at < self.len);
        // SAFETY: in bounds; the entry is above metric_count, so no reader looks at it yet.
        unsafe { std::ptr::write(self.base.add(at) as *mut RegistryEntry, *entry) }
    }

    /// The lane header of a lane mapping (the mapping starts at the lane's offset).
    pub fn lane(&self) -> &LaneHeader {
        assert!(self.len >= size_of::<LaneHeader>());
        // SAFETY: in bounds, page-aligned, and every shared field is atomic.
        unsafe { &*(self.base as *const LaneHeader) }
    }

    /// Zeroes a new lane's header, cells and gather cells: everything before its records (a
    /// process that died adding it may have written them). Called before `lanes_allocated` counts
    /// the lane, so no reader maps it yet.
    pub fn zero_lane_header_and_cells(&self, geometry: &Geometry) {
        let len = geometry.lane_records_offset as usize;
        assert!(len <= self.len);
        // SAFETY: in bounds; nobody else reads or writes the lane before it is counted.
        unsafe { std::ptr::write_bytes(self.base, 0, len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the bot drops a mapping only when no writer points into it any more (at detach,
        // when no handle is left, or in a forked child after every writer was emptied).
        unsafe { sys::unmap(self.base, self.len) }
    }
}

/// One writer's view of one lane (`rs_producer`), padded to 128 bytes so two threads' writers
/// never share a cache line. A lane writer is used by the one thread that holds the lane (the
/// hand-over happens under the bot's mutex, which orders it); the laneless writer, shared by
/// threads that found no lane, only ever touches atomics (`records` and `cells` are null); the
/// disabled writer touches nothing but its sampling row.
#[repr(C, align(128))]
pub struct Writer {
    fields: UnsafeCell<WriterFields>,
}

#[derive(Clone, Copy)]
struct WriterFields {
    records: *mut Record,        // the lane's slots, or null: nothing can be written
    lane: *const LaneHeader,     // the lane's header (null when `records` is)
    cells: *const AtomicU64,     // the lane's cells, one per metric, or null
    gather: *const GatherCell,   // the lane's gather cells, one per metric, or null
    shared: *const MetricCell,   // the bot's metric cells, or null (disabled, forked)
    mask: u64,                   // capacity - 1
    next: u64,                   // the next cursor to publish (== write_cursor)
    cached_read: u64,            // the consumer's cursor as last seen, set back (`keep_read`)
    countdown: *const AtomicU32, // per metric: calls left before the next written one (sampling)
    sampling: *mut Sampling,     // the lane's adaptive sampling, or null: a full lane drops
    doorbell: *const AtomicU32,  // the file's `doorbell` while this process rings it, else NEVER_RUNG
}

/// The doorbell of a writer whose process does not ring (DOORBELL in ringside.h), or of no file:
/// nobody stores to it, so a call that loads it never rings.
static NEVER_RUNG: AtomicU32 = AtomicU32::new(0);

/// Wakes the sleeping consumer (DOORBELL in ringside.h): cold, once a sleep. Of the threads that
/// find the word set, the one that takes the 1 makes the call.
#[cold]
#[inline(never)]
fn ring(doorbell: &AtomicU32) {
    // Relaxed: the consumer's membarrier orders the record's store before this thread's load.
    if doorbell.swap(0, Relaxed) != 0 {
        sys::wake_all(doorbell);
    }
}

/// What the operator's sampling made of a histogram's call (`Writer::control_sample`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Controlled {
    /// Gathered into the lane's gather cell: no record.
    Gathered,
    /// To be written with these flags (k, in bits 4 to 7), without an exemplar.
    Weighted(u8),
    /// To be written as usual (with its exemplar).
    Ordinary,
}

/// A timestamp the slow path reads itself, only if it writes a record (a gathered call needs
/// none): `RS_TIMESTAMP_NOW`.
const TIMESTAMP_NOW: u64 = 0;

/// One lane's adaptive sampling (`rs_sampling`; SAMPLING AND GATHERING in ringside.h), in this
/// process's memory: used only by the thread that holds the lane, through its writer. The bot
/// keeps one per lane, made at the lane's first hand-over, from holder to holder. What it gathers
/// lives in the lane's gather cells, in the file: a holder that lets go leaves nothing behind.
pub struct Sampling {
    calls: Box<[u32]>,     // per metric: calls since its last record on this lane (0: none)
    header: *const Header, // the file's header: the consumer's word and drain interval
    above: u64,            // `sample_above`: the lane is never sampled below it
    reserve: u64,          // R: sampling starts at capacity - R records
    look_fill: u64,        // the fill when the current drain interval began
    look_ns: u64,          // CLOCK_MONOTONIC then; 0: none since the lane was below `above`
    interval_gain: u64,    // what the lane gained over the last whole drain interval
    step_log2: u32,        // one level more for each 2^step_log2 records past capacity - R
    level: u32,            // L: a call is written once its metric's calls reach 2^L (a power of two)
    open: u32,             // metrics with calls since their last record
    open_below: u32,       // every such metric is below this
    weighs: bool,          // the consumer read gather cells when the lane was last looked at
}

// SAFETY: a lane's sampling is used by the one thread that holds the lane (see `Writer`), or under
// the bot's mutex while no thread does; `header` points into the bot's mapping, alive as long as
// the bot is attached.
unsafe impl Send for Sampling {}

impl Sampling {
    /// The sampling of a lane never sampled below `above` records (nonzero), for
    /// `registry_capacity` metrics; `header` is the mapped file's.
    pub fn new(header: &Header, above: u64, registry_capacity: u32) -> Sampling {
        Sampling {
            calls: vec![0; registry_capacity as usize].into_boxed_slice(),
            header,
            above,
            reserve: 0, // measured at the first look past `above`
            look_fill: 0,
            look_ns: 0,
            interval_gain: 0,
            step_log2: 0,
            level: 0,
            open: 0,
            open_below: 0,
            weighs: true,
        }
    }

    /// Forgets every metric's calls since its last record (`rs_sampling_reset`): they are counted
    /// in the gather cells, and the next record of each carries no weight.
    fn reset(&mut self) {
        if self.open > 0 {
            self.calls[..self.open_below as usize].fill(0);
        }
        self.open = 0;
        self.open_below = 0;
    }

    /// Measures R (`rs_sampling_measure`, on CLOCK_MONOTONIC): what the lane gained over the last
    /// whole drain interval of its consumer, or since the last interval began if that is more; at
    /// least 1/64 of the lane and at most 1/32 (16 records at the least, and the room above
    /// `above` at the most). Over a whole interval, a thread that shares its core and a consumer's
    /// drains both show, as they would not over the few microseconds between two looks.
    fn measure(&mut self, fill: u64, capacity: u64) {
        let now = sys::clock_precise_ns();
        let most = (capacity >> RESERVE_FRACTION_LOG2).max(RESERVE_MIN).min(capacity - self.above);
        let least = (capacity >> LOOK_FRACTION_LOG2).max(RESERVE_MIN).min(most); // a record a level at least
        if self.look_ns == 0 || now < self.look_ns {
            self.look_fill = fill;
            self.look_ns = now;
            self.interval_gain = 0;
        }
        // SAFETY: `header` points at the mapped header while the bot is attached (the type's comment).
        let header = unsafe { &*self.header };
        // Relaxed: a figure the consumer sets at attach; any value it stored serves.
        let interval = match header.drain_interval_ns.load(Relaxed) {
            0 => DEFAULT_DRAIN_INTERVAL_NS,
            interval => interval,
        };
        let mut gain = fill.saturating_sub(self.look_fill);
        let elapsed = now - self.look_ns;
        if elapsed >= interval {
            // A whole interval (or more, while the lane was below `above` or the thread idle): its gain.
            self.interval_gain = (gain as f64 * interval as f64 / elapsed as f64) as u64;
            self.look_fill = fill;
            self.look_ns = now;
            gain = 0;
        }
        self.reserve = gain.max(self.interval_gain).clamp(least, most);
        self.step_log2 = 0;
        while (self.reserve / 8) >> (self.step_log2 + 1) != 0 {
            self.step_log2 += 1; // an eighth, as a power of two
        }
    }

    /// L for a lane of `capacity` holding `fill` records (`rs_sampling_level`).
    #[inline(always)]
    fn level_at(&self, fill: u64, capacity: u64) -> u32 {
        let start = capacity - self.reserve;
        if fill < start {
            return 0;
        }
        if fill >= capacity {
            return WEIGHT_LOG2_MAX; // full: a call written now could only be dropped
        }
        (1 + ((fill - start) >> self.step_log2)).min(WEIGHT_LOG2_MAX as u64) as u32
    }

    /// Sets the lane's level from its fill, `next` less the consumer's cursor `read`, as the
    /// consumer's word allows (read at each look at level 0): past `above`, such a look measures R
    /// again (`rs_sampling_look`).
    fn look(&mut self, next: u64, read: u64, capacity: u64) {
        let fill = next.wrapping_sub(read);
        if self.level > 0 && fill <= capacity && fill >= capacity - self.reserve {
            // Sampling still: the level follows the fill; the consumer's word was read as it began.
            self.level = self.level_at(fill, capacity);
            return;
        }
        self.weighs = self.consumer_reads_weights();
        let mut level = 0;
        if !self.weighs || fill > capacity || fill < self.above {
            self.look_ns = 0; // below `above`: the next rate is measured from the next look past it
        } else {
            if self.level == 0 {
                self.measure(fill, capacity);
            }
            level = self.level_at(fill, capacity);
        }
        if level == 0 && self.open > 0 {
            self.reset();
        }
        self.level = level;
    }

    /// Whether the file's consumer reads gather cells: it stored its pid in both fields.
    fn consumer_reads_weights(&self) -> bool {
        // SAFETY: `header` points at the mapped header while the bot is attached (the type's comment).
        let header = unsafe { &*self.header };
        // Relaxed: two pids a consumer stores once; one seen without the other only means "not yet".
        let pid = header.consumer_pid.load(Relaxed);
        pid != 0 && header.weights_reader_pid.load(Relaxed) == pid
    }
}

/// Whether the call that makes its metric's calls `calls` is written at level `level`
/// (`rs_sampling_writes`).
#[inline(always)]
fn writes(calls: u32, level: u32) -> bool {
    calls >= 1 << level && calls.is_power_of_two()
}

/// Raises `cell` to `value` if it is smaller (`rs_raise_relaxed_u64`): a compare-and-swap loop that
/// writes nothing when it is not. Relaxed: a figure, ordering nothing.
#[inline(always)]
fn raise(cell: &AtomicU64, value: u64) {
    let mut seen = cell.load(Relaxed);
    while value > seen {
        match cell.compare_exchange_weak(seen, value, Relaxed, Relaxed) {
            Ok(_) => return,
            Err(now) => seen = now,
        }
    }
}

// SAFETY: see the type's comment: the fields that are not atomics are written only by the lane's
// holder, or while no thread can use the writer (under the bot's mutex at hand-over, or in a
// forked child, which has one thread); the laneless writer's threads only touch atomics.
unsafe impl Sync for Writer {}
// SAFETY: a writer's pointers are into mappings its bot owns, not into the creating thread's memory.
unsafe impl Send for Writer {}

const _: () = assert!(size_of::<Writer>() == 128);

/// A bot's writers (`max_lanes` lane writers, then the laneless one, then the disabled one), the
/// sampling rows they point into (owned together, so the rows outlive the writers), and which
/// writer each thread uses: the entry of the bot's slot in the thread's table.
pub struct Writers {
    writers: Box<[Writer]>,
    _countdowns: Box<[AtomicU32]>,
    slot: usize,
    /// Never 0, never given to other writers; changed in a forked child.
    generation: AtomicU64,
}

/// One entry of a thread's table: the writer it uses of the bot in that slot, while `generation`
/// is that bot's `Writers`' generation.
#[derive(Clone, Copy)]
struct ThreadWriter {
    generation: u64, // 0: none
    writer: *const Writer,
}

const NO_WRITER: ThreadWriter = ThreadWriter { generation: 0, writer: std::ptr::null() };

thread_local! {
    /// Each thread's writers, by bot slot: a plain thread-local read on the hot path. No
    /// destructor, so it stays readable while the thread's exit runs.
    static THREAD_WRITERS: Cell<[ThreadWriter; MAX_BOTS_PER_PROCESS]> =
        const { Cell::new([NO_WRITER; MAX_BOTS_PER_PROCESS]) };
}

/// The next generation to give (0 means "none" in a thread's table).
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

fn new_generation() -> u64 {
    // Relaxed: only uniqueness matters.
    NEXT_GENERATION.fetch_add(1, Relaxed)
}

/// The calling thread's entry for bot slot `slot`.
#[inline(always)]
fn with_thread_entry<R>(slot: usize, f: impl FnOnce(&Cell<ThreadWriter>) -> R) -> R {
    THREAD_WRITERS.with(|table| {
        let entries: &Cell<[ThreadWriter]> = table;
        f(&entries.as_slice_of_cells()[slot & (MAX_BOTS_PER_PROCESS - 1)])
    })
}

impl Writers {
    /// `max_lanes + 2` writers pointing at nothing, for the bot in slot `slot`, each with a
    /// sampling row of `registry_capacity` entries (rounded up to 128 bytes). Zero means "write
    /// the next call", as 1 does in C.
    pub fn new(slot: usize, max_lanes: u32, registry_capacity: u32) -> Writers {
        let stride = (registry_capacity as usize + 31) & !31;
        let rows = max_lanes as usize + 2;
        let countdowns: Box<[AtomicU32]> = (0..rows * stride).map(|_| AtomicU32::new(0)).collect();
        let writers = (0..rows).map(|row| Writer::new(countdowns[row * stride..].as_ptr())).collect();
        Writers { writers, _countdowns: countdowns, slot, generation: AtomicU64::new(new_generation()) }
    }

    /// The calling thread's writer, if `give_thread` gave it one (since the last new generation).
    #[inline(always)]
    pub fn of_thread(&self) -> Option<&Writer> {
        let entry = with_thread_entry(self.slot, Cell::get);
        // Relaxed: the generation changes only in a forked child, which has one thread.
        if entry.generation != self.generation.load(Relaxed) {
            return None;
        }
        // SAFETY: only `give_thread` stores an entry with this generation, and only this
        // `Writers`' generation (no other ever had it): the pointer is to one of `self.writers`,
        // alive as long as `self`.
        Some(unsafe { &*entry.writer })
    }

    /// The index of the calling thread's writer (lanes first, then the laneless and disabled
    /// writers), if `give_thread` gave it one.
    pub fn of_thread_index(&self) -> Option<u32> {
        let writer = self.of_thread()?;
        Some(((writer as *const Writer as usize - self.writers.as_ptr() as usize) / size_of::<Writer>()) as u32)
    }

    /// Gives the calling thread writer `index` (below `max_lanes + 2`), and returns it.
    pub fn give_thread(&self, index: u32) -> &Writer {
        let writer = &self.writers[index as usize];
        let generation = self.generation.load(Relaxed);
        with_thread_entry(self.slot, |entry| entry.set(ThreadWriter { generation, writer }));
        writer
    }

    /// Takes back the calling thread's writer: its index, if `give_thread` gave it one.
    pub fn take_thread(&self) -> Option<u32> {
        let entry = with_thread_entry(self.slot, Cell::get);
        if entry.generation != self.generation.load(Relaxed) {
            return None;
        }
        with_thread_entry(self.slot, |cell| cell.set(NO_WRITER));
        let offset = entry.writer as usize - self.writers.as_ptr() as usize;
        Some((offset / size_of::<Writer>()) as u32)
    }

    /// A new generation: every thread's entry for these writers is forgotten (in a forked child,
    /// whose one thread's entries are the parent's).
    pub fn renew_generation(&self) {
        self.generation.store(new_generation(), Relaxed);
    }
}

impl std::ops::Deref for Writers {
    type Target = [Writer];
    fn deref(&self) -> &[Writer] {
        &self.writers
    }
}

impl Writer {
    /// A writer that writes nothing and samples with `countdown` (a row of `Writers`).
    fn new(countdown: *const AtomicU32) -> Writer {
        Writer {
            fields: UnsafeCell::new(WriterFields {
                records: std::ptr::null_mut(),
                lane: std::ptr::null(),
                cells: std::ptr::null(),
                gather: std::ptr::null(),
                shared: std::ptr::null(),
                mask: 0,
                next: 0,
                cached_read: 0,
                countdown,
                sampling: std::ptr::null_mut(),
                doorbell: &NEVER_RUNG,
            }),
        }
    }

    fn get(&self) -> WriterFields {
        // SAFETY: a copy of the fields; no other thread writes them while this one may use the
        // writer (see the type's comment).
        unsafe { *self.fields.get() }
    }

    /// Points the writer at a lane (`rs_producer_init`), continuing from its cursors, with the
    /// lane's `sampling` (null: none), ringing `doorbell` (the file's, while this process rings
    /// it; null: never).
    ///
    /// # Safety
    /// No thread may use this writer meanwhile (its lane is free, under the bot's mutex), and
    /// `lane`, `cells` and `sampling` must stay as long as it points at them.
    pub unsafe fn point_at_lane(
        &self,
        lane: &Mapping,
        geometry: &Geometry,
        capacity_log2: u32,
        cells: *const MetricCell,
        sampling: *mut Sampling,
        doorbell: *const AtomicU32,
    ) {
        let header = lane.lane();
        // SAFETY: no other thread uses the writer meanwhile (the caller's contract), so this is the
        // only reference to its fields.
        let f = unsafe { &mut *self.fields.get() };
        // SAFETY: the three offsets are inside the lane's mapping (Geometry::of: the header, the
        // cells and the gather cells come before lane_records_offset, and the records end at
        // lane_size, the mapping's length).
        unsafe {
            f.records = lane.base.add(geometry.lane_records_offset as usize) as *mut Record;
            f.cells = lane.base.add(LANE_HEADER_SIZE as usize) as *const AtomicU64; // they follow the header
            f.gather = lane.base.add(geometry.lane_gather_offset as usize) as *const GatherCell;
        }
        f.lane = header;
        f.shared = cells;
        f.mask = (1u64 << capacity_log2) - 1;
        // Relaxed: only this process writes the cursor, and its last writer released the lane
        // under the bot's mutex (or was another process, gone before we took the file's lock).
        f.next = header.write_cursor.load(Relaxed);
        f.sampling = sampling;
        f.doorbell = if doorbell.is_null() { &NEVER_RUNG } else { doorbell };
        // SAFETY: the lane's sampling, which only this lane's writer uses, and no thread meanwhile.
        if let Some(s) = unsafe { sampling.as_mut() } {
            s.level = 0;
            s.look_ns = 0;
            s.weighs = true; // until a look says otherwise: the first one comes at `above`
        }
        // Acquire: the consumer finished with the slots below its cursor before storing it.
        let read = header.read_cursor.load(Acquire);
        // SAFETY: no thread uses the writer meanwhile (the caller's contract).
        unsafe { self.keep_read(read) };
    }

    /// Keeps the consumer's cursor `read` for the fast path (`rs_producer_keep_read`), whose one
    /// test is whether the lane looks full by it: as read when the lane never samples (or its
    /// consumer does not read gather cells); while it samples, set back so that the test fails at
    /// every call; otherwise set back so that it fails at the lane's next look: at `above`, then
    /// every 1/64 of the lane and at capacity - R. Never later than `read` itself: the fast path
    /// must not pass the real room.
    ///
    /// # Safety
    /// The calling thread holds the lane (or no thread uses the writer).
    unsafe fn keep_read(&self, read: u64) {
        let f = self.fields.get();
        // SAFETY: as the caller's contract: it alone reads and writes the fields and the sampling.
        unsafe {
            let capacity = (*f).mask + 1;
            let next = (*f).next;
            let s = match (*f).sampling.as_ref() {
                Some(s) if s.weighs => s,
                _ => {
                    (*f).cached_read = read;
                    return;
                }
            };
            if s.level > 0 {
                (*f).cached_read = next.wrapping_sub(capacity);
                return;
            }
            let fill = next.wrapping_sub(read); // modulo 2^64, as every cursor difference
            let until = if fill > capacity {
                0 // a cursor no consumer could have stored: look at every call
            } else if fill < s.above {
                s.above - fill
            } else {
                // Records until the next look: 1/64 of the lane, or to capacity - R, or to full.
                let start = capacity - s.reserve;
                let mut until = capacity >> LOOK_FRACTION_LOG2;
                if fill < start && start - fill < until {
                    until = start - fill;
                }
                until.min(capacity - fill)
            };
            (*f).cached_read = next.wrapping_add(until).wrapping_sub(capacity);
        }
    }

    /// Makes it the laneless writer: no records, counts into the shared metric cells.
    ///
    /// # Safety
    /// As `point_at_lane`; `cells` must stay mapped as long as the writer points at it.
    pub unsafe fn point_at_cells(&self, cells: *const MetricCell) {
        // SAFETY: no other thread uses the writer meanwhile (the caller's contract).
        let f = unsafe { &mut *self.fields.get() };
        f.shared = cells;
    }

    /// Points the writer at nothing: every call then writes nothing (its sampling row stays).
    ///
    /// # Safety
    /// No thread may use this writer meanwhile (a forked child's only thread, or under the mutex).
    pub unsafe fn point_at_nothing(&self) {
        // SAFETY: no other thread uses the writer meanwhile (the caller's contract).
        let f = unsafe { &mut *self.fields.get() };
        f.records = std::ptr::null_mut();
        f.lane = std::ptr::null();
        f.cells = std::ptr::null();
        f.gather = std::ptr::null();
        f.shared = std::ptr::null();
        f.sampling = std::ptr::null_mut();
        f.doorbell = &NEVER_RUNG;
    }

    /// After a record published or a counter moved (`rs_producer_check_doorbell`): rings the
    /// doorbell if the consumer sleeps. The call pays one load and a branch otherwise.
    #[inline(always)]
    fn check_doorbell(&self) {
        // SAFETY: `doorbell` is NEVER_RUNG or the file's, mapped as long as the writer points into
        // the file (see `point_at_lane`).
        let doorbell = unsafe { &*(*self.fields.get()).doorbell };
        // Relaxed, and no fence: the consumer's membarrier orders it after the store before it.
        if doorbell.load(Relaxed) != 0 {
            ring(doorbell);
        }
    }

    /// Counts a record of `metric` that could not be kept for want of a lane (`rs_producer_lose`,
    /// cold), with a histogram's value in its metric cell's sum and largest of such drops (DROPPED
    /// VALUES in ringside.h).
    #[cold]
    #[inline(never)]
    fn lose(&self, metric: u32, kind: u8, value: u64) -> bool {
        let f = self.get();
        if !f.shared.is_null() {
            // SAFETY: shared points at the mapped metric cells; metric < registry_capacity.
            let cell = unsafe { &*f.shared.add(metric as usize) };
            // Relaxed atomic adds: threads without a lane share the cell; only the figures matter.
            cell.unlaned.fetch_add(1, Relaxed);
            if kind == KIND_HISTOGRAM {
                cell.unlaned_sum.fetch_add(value, Relaxed); // modulo 2^64
                raise(&cell.unlaned_max, value);
            }
        }
        false
    }

    /// Counts a record of `metric` dropped from the full lane (`rs_producer_drop`), with a
    /// histogram's value in its gather cell's `dropped_sum` and `dropped_max`.
    ///
    /// # Safety
    /// The calling thread holds the lane, and `records` is not null.
    unsafe fn drop_record(&self, metric: u32, kind: u8, value: u64) -> bool {
        let f = self.get();
        // SAFETY: lane, cells and gather cells point into the mapped lane; metric < registry_capacity.
        let (lane, cell) = unsafe { (&*f.lane, &*f.cells.add(metric as usize)) };
        // Relaxed: only this lane's holder writes these, so a load and a store are exact.
        lane.dropped_total.store(lane.dropped_total.load(Relaxed).wrapping_add(1), Relaxed);
        cell.store(cell.load(Relaxed).wrapping_add(1), Relaxed);
        if kind == KIND_HISTOGRAM {
            // SAFETY: as above.
            let gather = unsafe { &*f.gather.add(metric as usize) };
            // Relaxed: the holder's own fields, as above.
            gather.dropped_sum.store(gather.dropped_sum.load(Relaxed).wrapping_add(value), Relaxed);
            if value > gather.dropped_max.load(Relaxed) {
                gather.dropped_max.store(value, Relaxed);
            }
        }
        false
    }

    /// Gathers a call (`rs_sampling_gather`; SAMPLING in ringside.h): counted in its metric's
    /// gather cell, in the file, where the consumer finds it at its next drain; no record written.
    ///
    /// # Safety
    /// The calling thread holds the lane, `records` is not null, and `s` is the lane's sampling.
    #[inline(always)]
    unsafe fn gather(&self, s: &mut Sampling, metric: u32, value: u64) -> bool {
        let calls = &mut s.calls[metric as usize];
        if *calls == 0 {
            s.open += 1;
            s.open_below = s.open_below.max(metric + 1);
        }
        *calls += 1; // at most 2^15: a record is due at 2^L, and L is at most 15
        let f = self.get();
        // SAFETY: the gather cells and the header are the mapped lane's; metric < registry_capacity.
        let (cell, lane) = unsafe { (&*f.gather.add(metric as usize), &*f.lane) };
        // Relaxed: only this lane's holder writes these (but `max`, which the consumer takes), so
        // a load and a store are exact.
        cell.sum.store(cell.sum.load(Relaxed).wrapping_add(value), Relaxed);
        cell.latest.store(value, Relaxed);
        raise(&cell.max, value);
        // Release: a reader that sees the count (acquire) sees the value stored before it.
        cell.calls.store(cell.calls.load(Relaxed).wrapping_add(1), Release);
        // Release: a reader that sees it move reads the cells, and finds this call in them.
        lane.gathered.store(lane.gathered.load(Relaxed).wrapping_add(1), Release);
        false
    }

    /// The write past the fast path's check (`rs_producer_write_slow`), for a lane that looks full
    /// by `cached_read` (or is due a look while it may sample): reads the consumer's cursor again;
    /// a histogram's call in a lane that stays in its sampling band is gathered here (the sampled
    /// path's common case, kept small), every other call goes on to `write_looked`. A
    /// `timestamp_ns` of `TIMESTAMP_NOW` has the clock read only for a record written.
    ///
    /// # Safety
    /// The calling thread holds the lane, and `records` is not null.
    #[cold]
    #[inline(never)]
    unsafe fn write_slow(
        &self,
        metric: u32,
        kind: u8,
        flags: u8,
        value: u64,
        timestamp_ns: u64,
        exemplar: Option<(&[u8; EXEMPLAR_MAX], usize)>,
    ) -> bool {
        // SAFETY: as the caller's contract: the lane is the calling thread's, so it alone reads and
        // writes the writer's fields and the lane's sampling; `lane` is the mapped lane's header.
        unsafe {
            let f = self.fields.get();
            // Acquire: the consumer finished reading the slots below its cursor before storing it.
            // Every call past the fast path reads it (the consumer's lines change once a drain, so
            // the loads mostly hit the cache): while sampling, the level follows the fill call by call.
            let read = (*(*f).lane).read_cursor.load(Acquire);
            if let Some(s) = (*f).sampling.as_mut().filter(|s| s.level > 0 && kind == KIND_HISTOGRAM) {
                let capacity = (*f).mask + 1;
                let fill = (*f).next.wrapping_sub(read);
                if fill <= capacity && fill >= capacity - s.reserve {
                    let level = s.level_at(fill, capacity);
                    if !writes(s.calls[metric as usize] + 1, level) {
                        s.level = level;
                        return self.gather(s, metric, value); // the kept cursor stays: every call looks
                    }
                }
            }
            self.write_looked(metric, kind, flags, value, timestamp_ns, exemplar, read)
        }
    }

    /// The slow path past its common case: a look at the lane (`rs_sampling_look`), then the call
    /// gathered, written with its weight k (and its exemplar's records), or counted dropped.
    ///
    /// # Safety
    /// The calling thread holds the lane, `records` is not null, and `read` is the consumer's
    /// cursor, just loaded with acquire.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)] // rs_producer_write_slow's, and the cursor it read
    unsafe fn write_looked(
        &self,
        metric: u32,
        kind: u8,
        flags: u8,
        value: u64,
        timestamp_ns: u64,
        exemplar: Option<(&[u8; EXEMPLAR_MAX], usize)>,
        read: u64,
    ) -> bool {
        // SAFETY: as the caller's contract (see `write_slow`).
        unsafe {
            let f = self.fields.get();
            let mut k = 0;
            if let Some(s) = (*f).sampling.as_mut() {
                s.look((*f).next, read, (*f).mask + 1);
                if kind == KIND_HISTOGRAM && s.level > 0 {
                    let calls = s.calls[metric as usize] + 1;
                    if !writes(calls, s.level) {
                        self.gather(s, metric, value);
                        self.keep_read(read);
                        return false;
                    }
                    k = calls.ilog2();
                    if calls > 1 {
                        s.calls[metric as usize] = 0;
                        s.open -= 1;
                    }
                }
            }
            let parts = exemplar.map_or(0, |(_, length)| length.div_ceil(EXEMPLAR_BYTES_PER_RECORD) as u64);
            let cursor = (*f).next;
            let written = cursor.wrapping_add(parts).wrapping_sub(read) <= (*f).mask;
            let timestamp_ns = if timestamp_ns == TIMESTAMP_NOW { sys::clock_coarse_ns() } else { timestamp_ns };
            if written {
                let weighted = flags | (k << FLAG_WEIGHT_SHIFT) as u8;
                match exemplar {
                    None => self.fill(Record {
                        timestamp_ns,
                        value,
                        sequence: cursor,
                        metric,
                        kind,
                        flags: weighted,
                        exemplar_length: 0,
                    }),
                    Some((padded, length)) => self.fill_exemplar(metric, weighted, value, timestamp_ns, padded, length),
                }
                self.publish(cursor + 1 + parts, timestamp_ns);
            } else {
                self.drop_record(metric, kind, value);
            }
            self.keep_read(read);
            written
        }
    }

    /// Ends the lane's sampling for a holder about to let go of it (`rs_producer_end_sampling`: at
    /// a release, at thread exit and at detach): its gathered calls are already counted in its
    /// gather cells, so nothing is written; the next holder starts at level 0.
    ///
    /// # Safety
    /// The calling thread holds the lane (or, under the bot's mutex, no thread uses the writer).
    pub unsafe fn end_sampling(&self) {
        // SAFETY: as the caller's contract: nobody else uses the lane's sampling meanwhile.
        if let Some(s) = unsafe { (*self.fields.get()).sampling.as_mut() } {
            s.reset();
            s.level = 0;
            s.look_ns = 0;
        }
    }

    /// Writes `record` into the slot of its cursor, `record.sequence` (`rs_producer_fill`); not
    /// yet published.
    ///
    /// # Safety
    /// The calling thread holds the lane, `records` is not null, and the slot is free (the fast
    /// path's check, or the slow path's against the consumer's cursor).
    #[inline(always)]
    unsafe fn fill(&self, record: Record) {
        let f = self.fields.get();
        // SAFETY: the slot index is masked to the lane's capacity, inside the mapped records; the
        // consumer is done with it (the caller's contract), and only the holder writes records.
        unsafe { (*f).records.add((record.sequence & (*f).mask) as usize).write(record) };
    }

    /// Publishes the records below `next` (a release store of `write_cursor`).
    ///
    /// # Safety
    /// The calling thread holds the lane, and `records` is not null.
    #[inline(always)]
    unsafe fn publish(&self, next: u64, timestamp_ns: u64) {
        let f = self.fields.get();
        // SAFETY: the caller holds the lane: it alone writes `next`; `lane` is the mapped header.
        unsafe {
            (*f).next = next;
            let lane = &*(*f).lane;
            // Release: the records' bytes are visible before the cursor that publishes them.
            lane.write_cursor.store(next, Release);
            // Relaxed: a liveness hint for readers.
            lane.heartbeat_ns.store(timestamp_ns, Relaxed);
        }
        self.check_doorbell();
    }

    /// Writes one record stamped `timestamp_ns`, or counts a drop when the lane is full; a
    /// histogram's call in a filling lane may be gathered (`rs_producer_write_at`; SAMPLING in
    /// ringside.h). Never blocks or allocates; its one system call wakes a sleeping consumer, once a
    /// sleep (DOORBELL in ringside.h). A span passes the end its span clock read.
    #[inline(always)]
    pub fn write_at(&self, metric: u32, kind: u8, flags: u8, value: u64, timestamp_ns: u64) -> bool {
        // SAFETY: the calling thread holds the lane (the writer came from its own thread-local
        // table), so it alone reads and writes `next`, and the lane's slots are its to write.
        unsafe {
            let f = self.fields.get();
            if (*f).records.is_null() {
                return self.lose(metric, kind, value);
            }
            let cursor = (*f).next;
            // The one test a record pays: the copy's setback makes it the next look's as well.
            if cursor.wrapping_sub((*f).cached_read) > (*f).mask {
                return self.write_slow(metric, kind, flags, value, timestamp_ns, None);
            }
            self.fill(Record { timestamp_ns, value, sequence: cursor, metric, kind, flags, exemplar_length: 0 });
            self.publish(cursor + 1, timestamp_ns);
        }
        true
    }

    /// `write_at` stamped with the coarse clock (`rs_producer_write`): the clock is read past the
    /// room test, so a call without a lane, or one the slow path gathers (SAMPLING in
    /// ringside.h), never reads it.
    #[inline(always)]
    pub fn write(&self, metric: u32, kind: u8, flags: u8, value: u64) -> bool {
        // SAFETY: as in `write_at`: the calling thread holds the lane.
        unsafe {
            let f = self.fields.get();
            if (*f).records.is_null() {
                return self.lose(metric, kind, value); // no clock read
            }
            let cursor = (*f).next;
            if cursor.wrapping_sub((*f).cached_read) > (*f).mask {
                return self.write_slow(metric, kind, flags, value, TIMESTAMP_NOW, None);
            }
            let timestamp_ns = sys::clock_coarse_ns();
            self.fill(Record { timestamp_ns, value, sequence: cursor, metric, kind, flags, exemplar_length: 0 });
            self.publish(cursor + 1, timestamp_ns);
        }
        true
    }

    /// Writes a histogram's value with an exemplar (`rs_producer_write_exemplar`): the value's
    /// record flagged `FLAG_EXEMPLAR` with the exemplar's `length` (1 to 64, checked when the
    /// exemplar was made), then its `padded` bytes, 16 a record, in exemplar records, all
    /// published by one release store of `write_cursor`; or one counted drop when the lane has no
    /// room for all of them. In a filling lane the call is sampled as a unit (SAMPLING in
    /// ringside.h: a gathered one keeps no exemplar). Never blocks or allocates; rings as `write_at`.
    #[inline(always)]
    pub fn write_exemplar_at(
        &self,
        metric: u32,
        flags: u8,
        value: u64,
        timestamp_ns: u64,
        padded: &[u8; EXEMPLAR_MAX],
        length: usize,
    ) -> bool {
        debug_assert!((1..=EXEMPLAR_MAX).contains(&length));
        let parts = length.div_ceil(EXEMPLAR_BYTES_PER_RECORD);
        // SAFETY: as in `write_at`: the calling thread holds the lane.
        unsafe {
            let f = self.fields.get();
            if (*f).records.is_null() {
                return self.lose(metric, KIND_HISTOGRAM, value);
            }
            let cursor = (*f).next;
            if cursor.wrapping_add(parts as u64).wrapping_sub((*f).cached_read) > (*f).mask {
                return self.write_slow(metric, KIND_HISTOGRAM, flags, value, timestamp_ns, Some((padded, length)));
            }
            self.fill_exemplar(metric, flags, value, timestamp_ns, padded, length);
            self.publish(cursor + 1 + parts as u64, timestamp_ns);
        }
        true
    }

    /// Writes a histogram's value record flagged `FLAG_EXEMPLAR` at the next cursor, then its
    /// exemplar's `padded` bytes, 16 a record, in the exemplar records after it; not yet published.
    ///
    /// # Safety
    /// The calling thread holds the lane, `records` is not null, and the slots are free.
    #[inline(always)]
    unsafe fn fill_exemplar(
        &self,
        metric: u32,
        flags: u8,
        value: u64,
        timestamp_ns: u64,
        padded: &[u8; EXEMPLAR_MAX],
        length: usize,
    ) {
        let parts = length.div_ceil(EXEMPLAR_BYTES_PER_RECORD);
        // SAFETY: as the caller's contract.
        unsafe {
            let cursor = (*self.fields.get()).next;
            self.fill(Record {
                timestamp_ns,
                value,
                sequence: cursor,
                metric,
                kind: KIND_HISTOGRAM,
                flags: flags | FLAG_EXEMPLAR,
                exemplar_length: length as u16,
            });
            for (k, bytes) in padded.chunks_exact(EXEMPLAR_BYTES_PER_RECORD).take(parts).enumerate() {
                // The bytes as they lie in memory: the first 8 in timestamp_ns, the next 8 in value.
                let first = u64::from_ne_bytes(bytes[..8].try_into().unwrap());
                let second = u64::from_ne_bytes(bytes[8..].try_into().unwrap());
                self.fill(Record {
                    timestamp_ns: first,
                    value: second,
                    sequence: cursor + 1 + k as u64,
                    metric,
                    kind: KIND_EXEMPLAR,
                    flags: 0,
                    exemplar_length: 0,
                });
            }
        }
    }

    /// `write_exemplar_at` stamped with the precise clock (CLOCK_MONOTONIC), read only when
    /// there is a lane: an exemplar's time is shown to people beside an order id, and the coarse
    /// clock's reading may precede the call by up to its resolution (CLOCKS in ringside.h).
    #[inline(always)]
    pub fn write_exemplar(&self, metric: u32, value: u64, padded: &[u8; EXEMPLAR_MAX], length: usize) -> bool {
        // SAFETY: a read of a field only the holder (or nobody) writes.
        if unsafe { (*self.fields.get()).records.is_null() } {
            return self.lose(metric, KIND_HISTOGRAM, value); // no clock read
        }
        self.write_exemplar_at(metric, 0, value, sys::clock_precise_ns(), padded, length)
    }

    /// The operator's word for `metric` (CONTROL in ringside.h): its metric cell's `control`,
    /// loaded at every call; 0 for a writer without the bot's cells (disabled, or a forked child
    /// that is no worker yet), which writes nothing anyway.
    #[inline(always)]
    pub fn control(&self, metric: u32) -> u32 {
        // SAFETY: a read of a field only the holder (or nobody) writes.
        let shared = unsafe { (*self.fields.get()).shared };
        if shared.is_null() {
            return 0;
        }
        // SAFETY: shared points at the mapped metric cells; metric < registry_capacity.
        let cell = unsafe { &*shared.add(metric as usize) };
        // Relaxed: a switch the operator's tool flips; a change takes effect at a next call.
        cell.control.load(Relaxed)
    }

    /// A histogram's call under the operator's sampling, 1 in 2^`n` (CONTROL in ringside.h), past
    /// its "1 in N": in a lane whose consumer reads gather cells, the call is gathered as adaptive
    /// sampling gathers it, unless it makes its metric's calls on the lane a power of two of at
    /// least 2^n, which is written with k, the calls' log2 (2^k - 1 gathered before it). Anywhere
    /// else (n 0, no lane, a lane that never samples, a consumer that reads no gather cells) the
    /// call is written as usual. Adaptive sampling's look is not run here: the write that follows
    /// runs it if the lane is due one.
    #[cold]
    #[inline(never)]
    pub fn control_sample(&self, metric: u32, value: u64, n: u32) -> Controlled {
        if n == 0 {
            return Controlled::Ordinary;
        }
        // SAFETY: the calling thread holds the lane (its writer came from its own table), so it
        // alone uses the lane's sampling; a writer without records has none.
        unsafe {
            let f = self.fields.get();
            let Some(s) = (*f).sampling.as_mut().filter(|s| !(*f).records.is_null() && s.consumer_reads_weights())
            else {
                return Controlled::Ordinary;
            };
            let calls = s.calls[metric as usize] + 1;
            if !writes(calls, n) {
                self.gather(s, metric, value);
                return Controlled::Gathered;
            }
            if calls > 1 {
                s.calls[metric as usize] = 0;
                s.open -= 1;
            }
            Controlled::Weighted((calls.ilog2() << FLAG_WEIGHT_SHIFT) as u8)
        }
    }

    /// "1 in N" sampling (`rs_producer_sample`): true when this call is the one of N to write.
    #[inline(always)]
    pub fn sample(&self, metric: u32, every: u32) -> bool {
        // SAFETY: the countdown row has registry_capacity entries; metric is below it.
        let countdown = unsafe { &*(*self.fields.get()).countdown.add(metric as usize) };
        // Relaxed: a lane's row has one writer; the laneless row is shared, and approximate
        // under contention (as in C), but never torn.
        let left = countdown.load(Relaxed);
        if left <= 1 {
            countdown.store(every, Relaxed);
            true
        } else {
            countdown.store(left - 1, Relaxed);
            false
        }
    }

    /// Adds to a counter (`rs_producer_count`): the lane's cell, or the shared `unlaned`.
    #[inline(always)]
    pub fn count(&self, metric: u32, increment: u64) {
        let f = self.get();
        if !f.cells.is_null() {
            // SAFETY: cells point into the mapped lane; metric < registry_capacity.
            let cell = unsafe { &*f.cells.add(metric as usize) };
            // Relaxed load and store: only this lane's holder writes its cells, so this is exact.
            cell.store(cell.load(Relaxed).wrapping_add(increment), Relaxed);
            // SAFETY: `lane` is set whenever `cells` is (point_at_lane), and stays mapped with it.
            let lane = unsafe { &*f.lane };
            // Release: a reader that sees it move (acquire) sees the cell's new value.
            lane.cell_writes.store(lane.cell_writes.load(Relaxed).wrapping_add(1), Release);
            self.check_doorbell();
        } else if !f.shared.is_null() {
            // SAFETY: shared points at the mapped metric cells.
            let cell = unsafe { &*f.shared.add(metric as usize) };
            // Relaxed atomic add: exact, whichever laneless threads add at once.
            cell.unlaned.fetch_add(increment, Relaxed);
        }
    }

    /// Counts a value of `metric` that did not fit (`rsp_count_clamped`; VALUES in ringside.h), or
    /// an exemplar refused (EXEMPLARS): an atomic add to its metric cell's `clamped` or
    /// `exemplars_refused`, shared by every thread. Nothing when disabled, or when the operator
    /// turned the metric off (CONTROL in ringside.h).
    pub fn count_refused(&self, metric: u32, refusal: Refusal) {
        let f = self.get();
        if !f.shared.is_null() {
            // SAFETY: shared points at the mapped metric cells; metric < registry_capacity.
            let cell = unsafe { &*f.shared.add(metric as usize) };
            // Relaxed: as in `control`. An operator's "off" counts nothing (CONTROL in ringside.h).
            if cell.control.load(Relaxed) & (CONTROL_OFF | CONTROL_BOT_OFF) != 0 {
                return;
            }
            // Relaxed atomic add: threads share the cell; only the count matters.
            cell.refusals(refusal).fetch_add(1, Relaxed);
        }
    }

    /// Sets a gauge (`rs_producer_set`): the shared last value, then a record for windows.
    #[inline(always)]
    pub fn set(&self, metric: u32, value: f64) -> bool {
        let f = self.get();
        if f.shared.is_null() {
            return false; // disabled, or a forked child
        }
        let bits = value.to_bits();
        // SAFETY: shared points at the mapped metric cells.
        let cell = unsafe { &*f.shared.add(metric as usize) };
        // Relaxed: gauge_set below publishes it; the last store wins.
        cell.gauge_bits.store(bits, Relaxed);
        // Release: a reader that sees gauge_set sees a value stored before it.
        cell.gauge_set.store(1, Release);
        self.write(metric, KIND_GAUGE, 0, bits)
    }
}

/// Retires a lane in the file (`rsp_retire_locked`): under the bot's mutex, or alone at attach.
pub fn retire(lane: &LaneHeader) {
    // Relaxed: `state` below publishes it.
    lane.owner_tid.store(0, Relaxed);
    // Release: a reader that sees RETIRED sees every record and cell the last holder wrote.
    lane.state.store(LANE_RETIRED, Release);
}

/// Marks a lane held by thread `tid`, named `name` (`rsp_hand_over_locked`), under the bot's mutex.
pub fn activate(lane: &LaneHeader, tid: i32, name: &[u8; THREAD_NAME_MAX], now: u64) {
    // Relaxed: these are the process's to write, under its mutex; `state` publishes them.
    lane.claims.store(lane.claims.load(Relaxed).wrapping_add(1), Relaxed);
    lane.owner_tid.store(tid, Relaxed);
    name_lane(lane, name);
    lane.heartbeat_ns.store(now, Relaxed);
    // Release: a reader that sees ACTIVE sees the owner, its name and claim count stored before it.
    lane.state.store(LANE_ACTIVE, Release);
}

/// Writes a lane's `thread_name` (THREAD NAMES in ringside.h): `name` is the field's 32 bytes.
pub fn name_lane(lane: &LaneHeader, name: &[u8; THREAD_NAME_MAX]) {
    for (word, bytes) in lane.thread_name.iter().zip(name.chunks_exact(8)) {
        // Relaxed: at a claim, `state` publishes it; a name given later is a label for humans,
        // which a reader may see half written, as C's memcpy may be.
        word.store(u64::from_ne_bytes(bytes.try_into().unwrap()), Relaxed);
    }
}
