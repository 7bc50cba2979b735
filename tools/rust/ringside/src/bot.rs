//! Attaching a bot, its registry, and handing lanes to threads: the rules of
//! ringside_producer.h, following ringside_producer.c step by step.
//!
//! WHAT LIVES WHERE
//! - The process: `PROCESS`, a table of 64 bot slots under one pthread mutex, and the fork
//!   handlers. Attach and the detach of a bot run under that mutex, so neither a thread's exit
//!   nor a fork() ever sees a bot half attached or half gone.
//! - A bot (`BotInner`, in an `Arc` that its slot and its handles share): the file (holding the
//!   producer lock), the header part mapped once, each lane mapped on its own, and one `Writer`
//!   per lane plus the laneless and disabled writers. Its mutex serialises registration, claims,
//!   releases. The handles count themselves (`BotRef`): the last one dropped detaches the bot.
//! - A thread: its entry for the bot's slot in `shm`'s thread table = {the bot's generation, its
//!   writer}. A generation that is not the bot's (none yet, an earlier bot in the slot, or the
//!   parent's in a forked child) sends the hot path to `claim`, which also makes the thread's exit
//!   run `thread_exit` (a pthread key's destructor, as in C) to retire its lanes; `process_exit`
//!   does it for the thread that ends the process, whose pthread keys' destructors never run.
//! - A forked child: the fork handler lets go of the parent's file at once (async-signal-safe
//!   calls only); the child's first claim or registration through the bot makes it a worker of
//!   the bot, with a file of its own (`become_worker_locked`, under the bot's mutex), or, past
//!   the bound on worker files, a gone worker's (`attach_worker_file`, as for the worker option).
//!
//! This module dereferences no raw pointer: the mapped memory and the writers are `shm`'s, the C
//! calls and the mutex `sys`'s. It calls their unsafe functions under the contracts they state, to
//! point a writer at its memory (at attach, at a hand-over under the bot's mutex, in a forked
//! child, and when the child becomes a worker) and in the fork handlers (a lock held from one
//! handler to the next).
//!
//! LOCK ORDER: PROCESS before any bot's mutex. Claims, releases by the thread itself and
//! registration take the bot's mutex alone (and a forked child becomes a worker within them);
//! thread exit, the last drop and fork take PROCESS first.

use crate::error::Error;
use crate::layout::*;
use crate::shm::{self, Mapping, Refusal, RegistryEntry, Sampling, Writer, Writers};
use crate::span_clock;
use crate::sys::{self, PMutex};
use std::collections::HashMap;
use std::ffi::{c_void, OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicUsize, Ordering::*};
use std::sync::{Arc, Once, OnceLock};

/// Bots one process may hold at once (the size of each thread's lane table).
pub const MAX_BOTS_PER_PROCESS: usize = 64;

const ATTEMPTS: usize = 8;

// MARK: - The process

struct Process {
    slots: [Option<Arc<BotInner>>; MAX_BOTS_PER_PROCESS], // None: free
}

const FREE: Option<Arc<BotInner>> = None;

static PROCESS: PMutex<Process> = PMutex::new(Process { slots: [FREE; MAX_BOTS_PER_PROCESS] });

static FORK_HANDLERS: Once = Once::new();

/// The pthread key whose destructor is `thread_exit` (`rsp_thread_key`), made at the first claim
/// (with `process_exit`'s registration); Err: why it could not be made.
static THREAD_EXIT: OnceLock<Result<sys::ThreadExitKey, sys::Errno>> = OnceLock::new();

/// Makes the calling thread's exit retire its lanes. A pthread key rather than a `thread_local!`
/// destructor: it runs after the thread's thread-locals are destroyed, and again if one of them
/// (or another key's destructor) records after it, so a record made there keeps its lane.
fn watch_thread_exit() -> Result<(), sys::Errno> {
    let key = THREAD_EXIT.get_or_init(|| {
        // If atexit has no room, only the lanes of the thread that ends the process stay marked
        // active in the file after it (as in C), until the next attach retires them.
        let _ = sys::at_exit(process_exit);
        sys::ThreadExitKey::new(thread_exit)
    });
    match key {
        Ok(key) => key.watch(),
        Err(errno) => Err(*errno),
    }
}

/// The key's destructor: retires every lane the exiting thread holds, of every live bot.
extern "C" fn thread_exit(_marker: *mut c_void) {
    retire_thread_lanes();
}

/// At the process's exit (main's return, or exit() from any thread): the exiting thread's lanes,
/// which no pthread key destructor retires, are retired as a thread's exit would retire them.
extern "C" fn process_exit() {
    retire_thread_lanes();
}

/// Retires every lane the calling thread holds, of every live bot.
fn retire_thread_lanes() {
    let process = PROCESS.lock();
    for bot in process.slots.iter().flatten() {
        bot.release_thread_lane();
    }
}

// MARK: - Options

/// How to attach. `Options::default()` takes every default.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The directory of the bot's file. None: `$RINGSIDE_DIR`, else `/dev/shm`.
    pub directory: Option<PathBuf>,
    /// Records a lane holds: a power of two from 16 to 2^28. None: 65,536 for a new file,
    /// whatever an existing one has (Some: it must match).
    pub lane_capacity: Option<u64>,
    /// Metrics the registry holds, 1 to 4096. None: 256 for a new file, whatever an existing one has.
    pub max_metrics: Option<u32>,
    /// Lanes (threads recording at once), 1 to 1024. None: 64 for a new file, whatever an
    /// existing one has.
    pub max_lanes: Option<u32>,
    /// Permission bits of a new file. None: 0o600.
    pub mode: Option<u32>,
    /// Replace an incompatible or corrupt file (its contents are lost) instead of failing;
    /// never one whose process lives.
    pub recreate: bool,
    /// Map nothing and write nothing, as `RINGSIDE_DISABLED=1` does.
    pub disabled: bool,
    /// Write the bot as one of its workers, beside other processes that write it: this process
    /// writes a file of its own, `<dir>/ringside.<name>@<pid>` (a bot file like any other, with a
    /// registry of its own), which the collector merges with the bot's other files (WORKERS in
    /// ringside.h); or `<dir>/ringside.<name>@<pid>.<n>`, `n` random (getrandom), when that name
    /// is unusable (another user's file planted there, a link, a directory, a file it cannot take
    /// over or one another live process holds), up to 8 such names. Default false:
    /// `<dir>/ringside.<name>`, one process's.
    pub worker: bool,
    /// The bound on the bot's worker files, 1 to 65,536; 0: 256 (`RS_DEFAULT_MAX_WORKERS`). A
    /// process that becomes a worker (by `worker`, or a forked child at its first record) while
    /// the directory holds this many worker files of the bot owned by its user, its own aside
    /// (another user's files never count, and are never continued), makes no other: it
    /// continues the file of a worker that is gone (the process its name gives no longer exists,
    /// and the file's lock is free), as a restarted bot attaches its own file, its counters
    /// continuing that file's totals; so does one whose own name and 8 random ones were all
    /// unusable (see `worker`). When every one is held by a live worker, it writes nothing
    /// to the bot ([`Error::TooManyWorkers`]; a forked child says so once on stderr), and adds 1
    /// to `workers_refused` in the bot's own file. A forked child takes its parent's bound.
    pub max_workers: u32,
    /// How full a lane is, in percent (1 to 99), below which its histograms are never sampled:
    /// past it, they are only when the lane would fill before the collector drains it, in at most
    /// its top 1/32 (SAMPLING AND GATHERING in ringside.h). A sampled lane writes 1 call in 2, 4,
    /// ... 32,768, the fuller the lane the fewer, and *gathers* the others: each is counted, with
    /// its value's sum and the largest, in the lane's gather cell in the file, so the collector's
    /// count, sum and max stay exact within one drain, whatever the thread does next (it idles,
    /// exits, or the process is killed). 0: 50. 100: never (a full lane drops). Only while the
    /// bot's collector reads gather cells: with an older one a full lane drops.
    pub sample_above_percent: u32,
}

fn disabled_by_environment() -> bool {
    match std::env::var("RINGSIDE_DISABLED") {
        Ok(value) => value == "1" || value.eq_ignore_ascii_case("true") || value.eq_ignore_ascii_case("yes"),
        Err(_) => false,
    }
}

fn check_options(name: &str, o: &Options) -> Result<(), Error> {
    let invalid = |reason: String| Err(Error::InvalidOption { bot: name.to_string(), reason });
    if let Some(capacity) = o.lane_capacity {
        if !(1 << MIN_CAPACITY_LOG2..=1 << MAX_CAPACITY_LOG2).contains(&capacity) || !capacity.is_power_of_two() {
            return invalid(format!(
                "lane_capacity {capacity} must be a power of two from {} to {} records",
                1u64 << MIN_CAPACITY_LOG2,
                1u64 << MAX_CAPACITY_LOG2
            ));
        }
    }
    if let Some(n) = o.max_metrics {
        if !(1..=MAX_REGISTRY_CAPACITY).contains(&n) {
            return invalid(format!("max_metrics {n} must be from 1 to {MAX_REGISTRY_CAPACITY}"));
        }
    }
    if let Some(n) = o.max_lanes {
        if !(1..=MAX_LANES).contains(&n) {
            return invalid(format!("max_lanes {n} must be from 1 to {MAX_LANES}"));
        }
    }
    if o.max_workers > MAX_WORKERS {
        return invalid(format!("max_workers {} must be from 1 to {MAX_WORKERS}", o.max_workers));
    }
    if o.sample_above_percent > 100 {
        return invalid(format!(
            "sample_above_percent {} must be from 1 to 100 (100: never sample; 0 for the default, \
             {DEFAULT_SAMPLE_ABOVE_PERCENT})",
            o.sample_above_percent
        ));
    }
    if let Some(mode) = o.mode {
        if mode & !0o777 != 0 {
            return invalid(format!("mode 0{mode:o} has bits other than permissions"));
        }
    }
    Ok(())
}

// MARK: - The bot

struct BotState {
    file: Option<File>,      // holds the producer lock; None when disabled or forked
    header: Option<Mapping>, // [0, lanes_offset): header, registry, metric cells
    lanes: Vec<Option<Mapping>>,
    held: Vec<bool>,       // a thread holds the lane
    disabled_metrics: u32, // a disabled bot's registrations, for their indices
    /// (name, encoded labels) -> registry index, of every published entry.
    known: HashMap<(String, Vec<u8>), u32>,
    /// The file: `<dir>/ringside.<name>`, or a worker's `<name>@<pid>` (a forked child's, once it
    /// is a worker); empty when disabled.
    path: PathBuf,
    /// The attached file as fstat saw it: a forked child reads the registry of this very file,
    /// not one put at its path since, and makes its worker file with its permission bits.
    file_id: FileId,
    /// In a forked child until it writes a worker file of its own (at its first record,
    /// registration or claim): the file was the parent's, and nothing is mapped.
    forked: bool,
    /// The file is a worker's (`<name>@...`): a metric published there takes the control word of
    /// the same metric in the bot's own file (CONTROL in ringside.h).
    worker: bool,
    /// The forked child could not make its worker file (it said why once on stderr): it writes
    /// nothing to the bot. A fork of it tries again, being another process.
    worker_failed: bool,
    /// Why, the first time (a sentence without "bot NAME: ").
    worker_failure: String,
    said_why_laneless: bool,
    /// Each lane's adaptive sampling, made at its first hand-over (SAMPLING in ringside.h); kept
    /// until the bot is gone, since its lane's writer points at it.
    samplings: Vec<Option<Box<Sampling>>>,
}

/// Which file was attached (st_dev, st_ino), and its permission bits.
#[derive(Clone, Copy, Default)]
struct FileId {
    dev: u64,
    ino: u64,
    mode: u32,
}

impl FileId {
    fn of(file: &File) -> std::io::Result<FileId> {
        let metadata = file.metadata()?;
        Ok(FileId { dev: metadata.dev(), ino: metadata.ino(), mode: metadata.mode() & 0o777 })
    }
}

pub(crate) struct BotInner {
    slot: u32,
    /// False when disabled, or in a forked child until it is a worker: nothing is written.
    enabled: AtomicBool,
    name: String,
    directory: PathBuf,
    registry_capacity: u32,
    max_lanes: u32,
    capacity_log2: u32,
    geometry: Geometry,
    /// The attach's `Options::max_workers` (0: the default), for a forked child's worker file.
    max_workers: u32,
    /// Records in a lane below which its histograms are never sampled (the header's
    /// `sample_above`, as `Options::sample_above_percent` chose); 0: never.
    sample_above: u32,
    /// max_lanes lane writers, then the laneless writer, then the disabled one; and which one
    /// each thread uses.
    writers: Writers,
    /// `BotRef`s alive: the last one dropped detaches the bot.
    holders: AtomicUsize,
    /// Lanes this process mapped (the file's count at attach, plus those it added): every loop
    /// over lanes uses it, not the file's count, which any process of the user could write.
    lanes_mapped: AtomicU32,
    state: PMutex<BotState>,
}

/// A file attached and validated, before it becomes a bot.
struct Attached {
    known: HashMap<(String, Vec<u8>), u32>,
    header: Mapping,
    lanes: Vec<Mapping>,
    geometry: Geometry,
    capacity_log2: u32,
    registry_capacity: u32,
    max_lanes: u32,
}

impl BotInner {
    /// The calling thread's writer: a thread-local read, or `claim` on first use.
    #[inline(always)]
    pub(crate) fn writer(&self) -> &Writer {
        match self.writers.of_thread() {
            Some(writer) => writer,
            None => self.claim(),
        }
    }

    /// The thread's first record on this bot: claims a lane (`rs_bot_claim_lane`). In a forked
    /// child, the first claim through the parent's bot makes the child its worker first.
    #[cold]
    #[inline(never)]
    fn claim(&self) -> &Writer {
        if let Some(writer) = self.writers.of_thread() {
            return writer;
        }
        let mut state = self.state.lock();
        if state.forked {
            // On failure it said why on stderr, and the thread gets the disabled writer.
            let _ = self.become_worker_locked(&mut state);
        }
        // The disabled writer, else the laneless one, unless a lane is free.
        let mut writer = self.max_lanes + 1;
        if self.enabled.load(Relaxed) {
            writer = self.max_lanes;
            // Also when the thread's exit is under way (a record from a thread-local's destructor):
            // the key's destructor runs again afterwards and retires the lane.
            match watch_thread_exit() {
                Ok(()) => {
                    if let Some(lane) = self.take_lane_locked(&mut state) {
                        writer = lane;
                    }
                }
                Err(errno) => self.say_no_exit_hook(&mut state, errno),
            }
        }
        // Under the bot's mutex: a thread gets a writer of this generation only once the child
        // is a worker (or never will be), so becoming one never re-points a writer in use.
        self.writers.give_thread(writer)
    }

    /// Takes the lowest free lane, adding one if none is free (`rsp_take_lane_locked`); None
    /// when every lane is held or none could be added (said once on stderr).
    fn take_lane_locked(&self, state: &mut BotState) -> Option<u32> {
        if state.forked || !self.enabled.load(Relaxed) {
            return None;
        }
        let allocated = self.lanes_mapped.load(Relaxed); // ours, under this mutex
        if let Some(lane) = (0..allocated).find(|&lane| !state.held[lane as usize]) {
            self.hand_over_locked(state, lane);
            return Some(lane);
        }
        if allocated < self.max_lanes {
            if let Err(errno) = self.add_lane_locked(state, allocated) {
                self.say_laneless(state, allocated, errno);
                return None;
            }
            self.hand_over_locked(state, allocated);
            return Some(allocated);
        }
        let header = state.header.as_ref().expect("an enabled bot has its header").header();
        // Relaxed: a statistic only this process writes, under this mutex.
        header.lanes_exhausted.store(header.lanes_exhausted.load(Relaxed).wrapping_add(1), Relaxed);
        None
    }

    /// Appends lane `lane` (== lanes_mapped) to the file (`rsp_add_lane_locked`).
    fn add_lane_locked(&self, state: &mut BotState, lane: u32) -> Result<(), sys::Errno> {
        let fd = state.file.as_ref().expect("an enabled bot has its file").as_raw_fd();
        let offset = self.geometry.lane_offset(lane);
        // Reserve the lane's pages first, so a full directory is an error now and never a SIGBUS.
        sys::reserve(fd, offset, self.geometry.lane_size)?;
        let mapping = Mapping::map(fd, offset, self.geometry.lane_size)?;
        // A process that died while adding this lane may have written its header or cells (or gather cells).
        mapping.zero_lane_header_and_cells(&self.geometry);
        state.lanes[lane as usize] = Some(mapping);
        let header = state.header.as_ref().expect("an enabled bot has its header").header();
        // Release: a reader that sees the new count sees the lane's pages and its zeroed header.
        header.lanes_allocated.store(lane + 1, Release);
        // Release: pairs with lanes_allocated()'s acquire; the lane is mapped and zeroed.
        self.lanes_mapped.store(lane + 1, Release);
        Ok(())
    }

    /// Gives lane `lane` to the calling thread (`rsp_hand_over_locked`).
    fn hand_over_locked(&self, state: &mut BotState, lane: u32) {
        let header = state.header.as_ref().expect("an enabled bot has its header");
        let sampling: *mut Sampling = if self.sample_above == 0 {
            std::ptr::null_mut()
        } else {
            let made = state.samplings[lane as usize].get_or_insert_with(|| {
                Box::new(Sampling::new(header.header(), self.sample_above as u64, self.registry_capacity))
            });
            &mut **made
        };
        let mapping = state.lanes[lane as usize].as_ref().expect("a mapped lane");
        // SAFETY: the lane is free (no thread uses its writer) and we hold the bot's mutex; the
        // lane and the cells stay mapped until the bot is dropped or the process forks, and both
        // empty the writers (or no thread can reach them) before unmapping; the lane's sampling
        // is boxed in `samplings`, which keeps it until the bot is gone or a forked child, whose
        // writers point at nothing, makes its worker file.
        unsafe {
            self.writers[lane as usize].point_at_lane(
                mapping,
                &self.geometry,
                self.capacity_log2,
                header.cells(&self.geometry),
                sampling,
                self.doorbell_of(header),
            )
        };
        state.held[lane as usize] = true;
        let now = sys::clock_coarse_ns();
        // The kernel's name for the thread, as C writes it: std's thread::current() may panic
        // once the thread's exit has begun (a record from a pthread key's destructor claims here
        // too), and a panic there aborts; `Bot::name_thread` gives a longer name.
        let (name, length) = sys::thread_name();
        let name = thread_name_field(without_cut_character(&name[..length]));
        shm::activate(mapping.lane(), sys::gettid(), &name, now);
        // Relaxed: a hint for readers.
        header.header().heartbeat_ns.store(now, Relaxed);
    }

    /// The doorbell a lane's writer rings (DOORBELL in ringside.h): the file's while this process
    /// registered for the consumer's barrier (`start` did, at attach), else none (null).
    fn doorbell_of(&self, header: &Mapping) -> *const AtomicU32 {
        if sys::register_for_doorbell() {
            &header.header().doorbell
        } else {
            std::ptr::null()
        }
    }

    /// Retires the lane whose writer a thread's table entry holds, if a thread holds it (the
    /// laneless and disabled writers, after the lanes, are nobody's).
    fn release_writer_locked(&self, state: &mut BotState, writer: u32) {
        let lane = writer as usize;
        if lane < self.max_lanes as usize && state.held[lane] && !state.forked {
            state.held[lane] = false;
            // SAFETY: the calling thread held the lane (its writer came from its own table) and
            // lets go of it now, under the bot's mutex. What its sampling gathered is counted in
            // the lane's gather cells already: nothing is written.
            unsafe { self.writers[lane].end_sampling() };
            if let Some(mapping) = &state.lanes[lane] {
                shm::retire(mapping.lane());
            }
        }
    }

    /// Says once per bot, on stderr, why a thread records without a lane.
    fn say_laneless(&self, state: &mut BotState, lane: u32, errno: sys::Errno) {
        if std::mem::replace(&mut state.said_why_laneless, true) {
            return;
        }
        if errno == sys::ENOSPC || errno == sys::EDQUOT {
            eprintln!(
                "ringside: bot {}: no space for lane {lane} ({} bytes) in {} (is {} full?): a thread without a lane \
                 keeps its counts and gauges, and counts its records as dropped",
                self.name,
                self.geometry.lane_size,
                state.path.display(),
                self.directory.display()
            );
        } else {
            eprintln!(
                "ringside: bot {}: lane {lane} could not be added to {}: {} (errno {errno}): a thread without a lane \
                 keeps its counts and gauges, and counts its records as dropped",
                self.name,
                state.path.display(),
                std::io::Error::from_raw_os_error(errno)
            );
        }
    }

    /// Says once per bot, on stderr, that threads record without a lane for want of an exit hook.
    fn say_no_exit_hook(&self, state: &mut BotState, errno: sys::Errno) {
        if std::mem::replace(&mut state.said_why_laneless, true) {
            return;
        }
        eprintln!(
            "ringside: bot {}: no pthread key to retire a thread's lane when it exits: {} (errno {errno}): threads \
             record without a lane, keeping their counts and gauges and counting their records as dropped",
            self.name,
            std::io::Error::from_raw_os_error(errno)
        );
    }

    /// Names the calling thread's lane, claiming one if it has none (`rs_bot_name_thread`).
    fn name_thread(&self, name: &str) -> Result<(), Error> {
        if name.contains('\0') {
            return Err(Error::InvalidOption {
                bot: self.name.clone(),
                reason: format!("a thread name holds no NUL: {:?}", shorten(name)),
            });
        }
        self.writer(); // claims a lane if the thread has none
        let Some(writer) = self.writers.of_thread_index() else { return Ok(()) };
        let state = self.state.lock();
        // The laneless and disabled writers (after the lanes) have no lane to name.
        if let Some(Some(mapping)) = state.lanes.get(writer as usize).filter(|_| !state.forked) {
            shm::name_lane(mapping.lane(), &thread_name_field(name.as_bytes()));
        }
        Ok(())
    }

    /// Retires the calling thread's lane now (`rs_bot_release_thread_lane`).
    fn release_thread_lane(&self) {
        let Some(writer) = self.writers.take_thread() else { return };
        if self.enabled.load(Relaxed) {
            let mut state = self.state.lock();
            self.release_writer_locked(&mut state, writer);
        }
    }

    // MARK: Registration

    /// Registers (or finds again) a metric: its index (`rs_bot_register_encoded`).
    pub(crate) fn register(&self, request: &Request<'_>) -> Result<u32, Error> {
        let mut state = self.state.lock();
        if state.forked {
            self.become_worker_locked(&mut state)?;
        }
        let Some(mapping) = state.header.as_ref().filter(|_| self.enabled.load(Relaxed)) else {
            // Disabled: a handle below the registry's capacity, so record calls stay harmless.
            let index = state.disabled_metrics % self.registry_capacity;
            state.disabled_metrics = state.disabled_metrics.wrapping_add(1);
            return Ok(index);
        };
        let header = mapping.header();
        let count = header.metric_count.load(Relaxed); // relaxed: only we write it, under this mutex
        let identity = (request.name.to_string(), request.labels.clone());
        if let Some(&index) = state.known.get(&identity) {
            // Entries below metric_count never change: the one we validated or wrote is there.
            let entry = mapping.read_entry(&self.geometry, index);
            let shown = if request.labels.is_empty() {
                String::new()
            } else {
                format!("{{{}}}", String::from_utf8_lossy(&request.labels).replace('\n', ","))
            };
            if entry.kind != request.kind
                || entry.unit != request.unit as u8
                || entry.sample_every != request.sample_every
            {
                return Err(Error::Conflict {
                    bot: self.name.clone(),
                    metric: request.name.to_string(),
                    reason: format!(
                        "metric {}{shown} is already registered as {} in {} sampled 1 in {}; asked for {} in {} sampled 1 in {}",
                        request.name,
                        kind_name(entry.kind),
                        unit_name(entry.unit),
                        entry.sample_every,
                        kind_name(request.kind),
                        request.unit.name(),
                        request.sample_every
                    ),
                });
            }
            if entry.form != request.form || entry.scale != request.scale {
                let form = |form: u8| if form == FORM_SIGNED { "signed" } else { "unsigned" };
                return Err(Error::Conflict {
                    bot: self.name.clone(),
                    metric: request.name.to_string(),
                    reason: format!(
                        "metric {}{shown} is already registered with {} values in steps of 1e{}; asked for {} values \
                         in steps of 1e{}",
                        request.name,
                        form(entry.form),
                        entry.scale,
                        form(request.form),
                        request.scale
                    ),
                });
            }
            if entry.gauge_merge != request.merge as u8 {
                return Err(Error::Conflict {
                    bot: self.name.clone(),
                    metric: request.name.to_string(),
                    reason: format!(
                        "gauge {}{shown} is already registered merging its workers by {}; asked for {}",
                        request.name,
                        merge_phrase(entry.gauge_merge),
                        request.merge.phrase()
                    ),
                });
            }
            // A retired entry registered again is live again (RETIRING A SERIES in ringside.h).
            let retired = mapping.entry_retired(&self.geometry, index);
            let word = retired.load(Relaxed); // relaxed: only we write it, under this mutex
            if word & 1 != 0 {
                retired.store(word.wrapping_add(1), Release);
            }
            return Ok(index);
        }
        if count >= self.registry_capacity {
            return Err(Error::RegistryFull {
                bot: self.name.clone(),
                metric: request.name.to_string(),
                capacity: self.registry_capacity,
            });
        }
        let mut entry = RegistryEntry::zeroed();
        entry.index = count;
        entry.kind = request.kind;
        entry.unit = request.unit as u8;
        entry.gauge_merge = request.merge as u8;
        entry.form = request.form;
        entry.scale = request.scale;
        entry.sample_every = request.sample_every;
        entry.name_length = request.name.len() as u16;
        entry.labels_length = request.labels.len() as u16;
        entry.help_length = request.help.len() as u16;
        entry.name[..request.name.len()].copy_from_slice(request.name.as_bytes());
        entry.labels[..request.labels.len()].copy_from_slice(&request.labels);
        entry.help[..request.help.len()].copy_from_slice(request.help.as_bytes());
        mapping.write_entry(&self.geometry, &entry);
        upgrade_for_entry(header, &entry);
        // Release: the entry's bytes are visible before the count that publishes it.
        header.metric_count.store(count + 1, Release);
        let bot_file = if state.worker { BotFileControls::read(&self.name, &self.directory) } else { None };
        take_control(header, mapping.metric_cell(&self.geometry, count), &entry, bot_file.as_ref());
        state.known.insert(identity, count);
        Ok(count)
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Counts a value of metric `index` that did not fit (`rsp_count_clamped`: VALUES in
    /// ringside.h) in its metric cell's `clamped`, or an exemplar refused (EXEMPLARS) in its
    /// `exemplars_refused`, as `refusal` says, without claiming a lane: through the calling
    /// thread's writer if it has one, else through the mapped cells under the bot's mutex (a
    /// thread whose first call is a NaN). Nothing when disabled, or in a forked child that is no
    /// worker yet.
    /// Retires metric `index` (`rs_bot_retire`): a gauge's `gauge_set` stored 0, then its entry's
    /// `retired` word made odd (release). Registering it again revives it.
    pub(crate) fn retire(&self, index: u32) -> Result<(), Error> {
        let mut state = self.state.lock();
        if state.forked {
            self.become_worker_locked(&mut state)?;
        }
        let Some(mapping) = state.header.as_ref().filter(|_| self.enabled.load(Relaxed)) else {
            return Ok(()); // disabled: nothing is written
        };
        if index >= mapping.header().metric_count.load(Relaxed) {
            return Err(Error::InvalidOption {
                bot: self.name.clone(),
                reason: format!("retire: metric index {index} is not registered"),
            });
        }
        let retired = mapping.entry_retired(&self.geometry, index);
        let word = retired.load(Relaxed); // relaxed: only we write it, under this mutex
        if word & 1 == 0 {
            if mapping.read_entry(&self.geometry, index).kind == KIND_GAUGE {
                mapping.metric_cell(&self.geometry, index).gauge_set.store(0, Relaxed);
            }
            retired.store(word.wrapping_add(1), Release);
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn count_refused(&self, index: u32, refusal: Refusal) {
        if let Some(writer) = self.writers.of_thread() {
            writer.count_refused(index, refusal);
            return;
        }
        let state = self.state.lock();
        match &state.header {
            Some(header) if self.enabled.load(Relaxed) && !state.forked => {
                let cell = header.metric_cell(&self.geometry, index);
                // Relaxed: a switch; the operator's "off" counts nothing (CONTROL in ringside.h).
                if cell.control.load(Relaxed) & (CONTROL_OFF | CONTROL_BOT_OFF) == 0 {
                    // Relaxed atomic add: threads share the cell; only the count matters.
                    cell.refusals(refusal).fetch_add(1, Relaxed);
                }
            }
            _ => {}
        }
    }
}

/// Makes the file format 4 (`rsp_upgrade_for_entry`) just before an entry that format 3 cannot
/// say (signed or scaled values: VALUES in ringside.h) is published: the layout is the same, and
/// a reader that cannot read 4 then refuses the file rather than misread it. Under the bot's
/// mutex, or with the file's lock before the bot is built: the version has one writer.
fn upgrade_for_entry(header: &shm::Header, entry: &RegistryEntry) {
    // Relaxed load: only this process writes the version. Release store: the layout it vouches
    // for was published with release already; the entry is published by `metric_count` after it.
    if (entry.form != FORM_UNSIGNED || entry.scale != 0) && header.version.load(Relaxed) < FORMAT_VERSION {
        header.version.store(FORMAT_VERSION, Release);
    }
}

/// Sets the operator's switches in the cell of a metric just published (CONTROL in ringside.h):
/// the bot's "off" if the file's `bot_control` has it, read after a full fence that follows the
/// release of `metric_count` (the operator's tool fences between its store of `bot_control` and
/// its read of `metric_count`: of two racing updates, neither is lost); and in a worker file, the
/// word of the same metric in the bot's own file and that file's "off", `bot_file`. Atomic ors:
/// the tool may be writing the word meanwhile.
fn take_control(
    header: &shm::Header,
    cell: &shm::MetricCell,
    entry: &RegistryEntry,
    bot_file: Option<&BotFileControls>,
) {
    fence(SeqCst);
    // Relaxed: ordered by the fence above.
    let mut word = header.bot_control.load(Relaxed) & CONTROL_BOT_OFF;
    if let Some(bot_file) = bot_file {
        word |= bot_file.word_of(entry.name(), entry.labels());
    }
    if word != 0 {
        // Relaxed: a switch; a call reads it at its next load.
        cell.control.fetch_or(word, Relaxed);
    }
}

/// The control words of a bot's own file, `<directory>/ringside.<name>`, for a worker file
/// publishing its metrics (CONTROL in ringside.h): mapped read only, its published entries by
/// name and labels. Only a file of this user's, whole and of this format, serves.
struct BotFileControls {
    mapping: Mapping,
    geometry: Geometry,
    known: HashMap<(Vec<u8>, Vec<u8>), u32>,
}

impl BotFileControls {
    /// The bot's own file, if it is there and valid (else None, silently: a worker without it
    /// starts as registered).
    fn read(name: &str, directory: &Path) -> Option<BotFileControls> {
        let path = file_path(name, directory, None).ok()?;
        let file = OpenOptions::new().read(true).custom_flags(sys::OPEN_FLAGS).open(path).ok()?;
        let metadata = file.metadata().ok()?;
        if !metadata.file_type().is_file() || metadata.uid() != sys::effective_uid() {
            return None;
        }
        let mut copy = [0u8; 0x40];
        file.read_exact_at(&mut copy, 0).ok()?;
        let version = le_u32(&copy, 0x08);
        if le_u64(&copy, 0x00) != MAGIC || !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&version) {
            return None;
        }
        let (capacity_log2, registry_capacity) = (le_u32(&copy, 0x14), le_u32(&copy, 0x18));
        if !(MIN_CAPACITY_LOG2..=MAX_CAPACITY_LOG2).contains(&capacity_log2)
            || !(1..=MAX_REGISTRY_CAPACITY).contains(&registry_capacity)
        {
            return None;
        }
        let geometry = Geometry::of(capacity_log2, registry_capacity);
        if le_u64(&copy, 0x20) != geometry.registry_offset
            || le_u64(&copy, 0x28) != geometry.cells_offset
            || le_u64(&copy, 0x30) != geometry.lanes_offset
            || metadata.len() < geometry.lanes_offset
        {
            return None;
        }
        let mapping = Mapping::map_read_only(file.as_raw_fd(), 0, geometry.lanes_offset).ok()?;
        // Acquire: the entries below the count are complete.
        let count = mapping.header().metric_count.load(Acquire).min(registry_capacity);
        let mut known = HashMap::new();
        for index in 0..count {
            let entry = mapping.read_entry(&geometry, index);
            known.entry((entry.name().to_vec(), entry.labels().to_vec())).or_insert(index);
        }
        Some(BotFileControls { mapping, geometry, known })
    }

    /// The word of the metric of this name and labels (0 if the file has none), with the bot's
    /// "off" from the file's `bot_control`.
    fn word_of(&self, name: &[u8], labels: &[u8]) -> u32 {
        // Relaxed: switches, each read whole.
        let bot_off = self.mapping.header().bot_control.load(Relaxed) & CONTROL_BOT_OFF;
        let word = match self.known.get(&(name.to_vec(), labels.to_vec())) {
            Some(&index) => self.mapping.metric_cell(&self.geometry, index).control.load(Relaxed),
            None => 0,
        };
        word | bot_off
    }
}

/// A registration's arguments, checked (`rsp_check_request`) and encoded.
pub(crate) struct Request<'a> {
    pub name: &'a str,
    pub kind: u8,
    pub unit: Unit,
    pub labels: Vec<u8>,
    pub help: &'a str,
    pub sample_every: u32,
    pub merge: GaugeMerge,
    /// `FORM_SIGNED` for a signed histogram, else `FORM_UNSIGNED` (VALUES in ringside.h).
    pub form: u8,
    /// A value is a whole number of 10^scale of the unit.
    pub scale: i8,
}

/// What a registration asks of a metric's values (VALUES in ringside.h), before it is checked:
/// signed or not, and its resolution, a power of ten of its unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ValuesAsked {
    pub signed: bool,
    pub resolution: f64,
}

impl Default for ValuesAsked {
    fn default() -> ValuesAsked {
        ValuesAsked { signed: false, resolution: 1.0 }
    }
}

impl<'a> Request<'a> {
    #[allow(clippy::too_many_arguments)] // rs_bot_register_encoded's, checked in one place
    pub fn new(
        bot: &str,
        name: &'a str,
        kind: u8,
        unit: Unit,
        labels: &[(&str, &str)],
        help: &'a str,
        sample_every: u32,
        merge: GaugeMerge,
        values: ValuesAsked,
    ) -> Result<Request<'a>, Error> {
        if !is_identifier(name.as_bytes()) || name.len() > NAME_MAX {
            return Err(Error::InvalidMetricName { bot: bot.to_string(), metric: shorten(name).to_string() });
        }
        let unit = if kind == KIND_COUNTER { Unit::None } else { unit }; // counters count: no unit
        let invalid =
            |reason: &str| Error::InvalidOption { bot: bot.to_string(), reason: format!("metric {name}: {reason}") };
        if sample_every < 1 {
            return Err(invalid("sample_every must be at least 1"));
        }
        if kind == KIND_COUNTER && sample_every != 1 {
            return Err(invalid("counters are exact: sample_every must be 1"));
        }
        if kind == KIND_GAUGE && sample_every != 1 {
            return Err(invalid("a gauge keeps its last value: sample_every must be 1"));
        }
        if values.signed && kind != KIND_HISTOGRAM {
            return Err(invalid(
                "only a histogram takes signed values (a counter never goes back; a gauge is a double)",
            ));
        }
        let Some(scale) = scale_of_resolution(values.resolution) else {
            return Err(invalid(&format!(
                "resolution {:?} is not a power of ten from 1e{SCALE_MIN} to 1e{SCALE_MAX} (0.01, 1e-6, 1, 100, ...)",
                values.resolution
            )));
        };
        if kind == KIND_GAUGE && scale != 0 {
            return Err(invalid("a gauge is a double: it takes no resolution"));
        }
        let form = if values.signed { FORM_SIGNED } else { FORM_UNSIGNED };
        if kind != KIND_GAUGE && merge != GaugeMerge::Last {
            return Err(invalid("only a gauge has a merge policy"));
        }
        if help.len() > HELP_MAX || help.contains('\0') {
            return Err(Error::InvalidHelp { bot: bot.to_string(), metric: name.to_string() });
        }
        let invalid_labels =
            |reason: String| Error::InvalidLabels { bot: bot.to_string(), metric: name.to_string(), reason };
        if merge == GaugeMerge::PerWorker && labels.iter().any(|&(key, _)| key == "pid") {
            return Err(invalid_labels(
                "a per-worker gauge is labelled pid by the collector: it cannot have a label named pid".into(),
            ));
        }
        let labels = encode_labels(labels).map_err(invalid_labels)?;
        Ok(Request { name, kind, unit, labels, help, sample_every, merge, form, scale })
    }
}

/// A counted hold on an attached bot: what `Bot` and every metric handle keep. The last one
/// dropped detaches the bot (the process table's `Arc` does not count, so it never keeps a bot
/// attached; it lets a thread's exit and the fork handlers reach a bot until it is detached).
pub(crate) struct BotRef(Arc<BotInner>);

impl Clone for BotRef {
    fn clone(&self) -> BotRef {
        // Relaxed: a new holder is made from a live one, so the count cannot reach zero meanwhile.
        self.0.holders.fetch_add(1, Relaxed);
        BotRef(Arc::clone(&self.0))
    }
}

impl Drop for BotRef {
    fn drop(&mut self) {
        // Release, then acquire before detaching (as Arc does): every holder's use of the bot
        // happens before its lanes are unmapped.
        if self.0.holders.fetch_sub(1, Release) == 1 {
            fence(Acquire);
            self.0.detach();
        }
    }
}

impl std::ops::Deref for BotRef {
    type Target = BotInner;
    #[inline(always)]
    fn deref(&self) -> &BotInner {
        &self.0
    }
}

impl BotInner {
    /// The last handle is gone: leave the slot, retire every lane, unmap, close (which releases
    /// the lock). The memory goes with the last `Arc`, the dropping handle's.
    fn detach(&self) {
        let mut process = PROCESS.lock();
        let slot = &mut process.slots[self.slot as usize];
        if slot.as_ref().is_some_and(|bot| std::ptr::eq(&**bot, self)) {
            *slot = None; // thread exits and forks no longer find it
        }
        {
            let mut state = self.state.lock();
            if self.enabled.load(Relaxed) && !state.forked {
                // Every lane is retired with the process's hold on the file (readers see it at once);
                // what its sampling gathered is in its gather cells already.
                for (index, lane) in state.lanes.iter().enumerate() {
                    let Some(lane) = lane else { continue };
                    // SAFETY: the bot's last handle is gone: no thread uses its writers.
                    unsafe { self.writers[index].end_sampling() };
                    shm::retire(lane.lane());
                }
            }
            // Unmapped and closed under the process's mutex, so a fork() either disowns them or
            // never sees them (a child's copy of a mapping would hold the lock as the fd would).
            state.lanes.clear();
            state.header = None;
            state.file = None; // with the mappings gone, this releases the producer lock
        }
    }
}

// MARK: - Fork

/// Before fork(): PROCESS and every bot's mutex, locked and left locked, so that the child finds
/// no structure half changed and no mutex held by a thread it does not have.
extern "C" fn fork_prepare() {
    let process = PROCESS.lock();
    for bot in process.slots.iter().flatten() {
        bot.state.lock_for_fork();
    }
    std::mem::forget(process); // left locked, as lock_for_fork leaves a mutex
}

/// After fork(), in the parent: unlocks what fork_prepare locked.
extern "C" fn fork_parent() {
    // SAFETY: fork_prepare locked PROCESS on this thread and left it locked.
    let process = unsafe { PROCESS.adopt_lock() };
    for bot in process.slots.iter().flatten() {
        // SAFETY: fork_prepare locked the mutex of every bot in a slot, on this thread; the slots
        // have not changed since (PROCESS is held).
        drop(unsafe { bot.state.adopt_lock() });
    }
}

/// After fork(), in the child: every bot gets a new generation and lets go of the parent's file;
/// the child's first record, registration or claim through it makes the child a worker of the bot
/// (`become_worker_locked`), lazily, since a fork handler may only make async-signal-safe calls.
extern "C" fn fork_child() {
    // SAFETY: fork_prepare locked PROCESS on the forking thread, of which this, the child's only
    // thread, is the copy.
    let process = unsafe { PROCESS.adopt_lock() };
    span_clock::after_fork_in_child();
    for bot in process.slots.iter().flatten() {
        // A new generation: every thread-table entry (the forking thread's) is stale now.
        bot.writers.renew_generation();
        // SAFETY: as above, fork_prepare locked the mutex of every bot in a slot.
        let mut state = unsafe { bot.state.adopt_lock() };
        if bot.enabled.load(Relaxed) && !state.forked {
            disown(bot, &mut state);
        }
        // A fork of a child that could not become a worker is another process: it tries on its
        // own (the reason's string stays, to be replaced then: freeing is no call for a handler).
        state.worker_failed = false;
    }
}

/// In a forked child: the bot's file is the parent's. Write nothing to it and let go of it: the
/// descriptor AND the mappings, since a mapping holds the open file description, and with it the
/// parent's lock, as long as it exists (the parent's death would go unseen while we live).
/// Only munmap, close and atomic stores: safe in the child of a threaded process. The path and
/// identity of the file stay, for the child to read its registry when it becomes a worker.
fn disown(bot: &BotInner, state: &mut BotState) {
    state.forked = true;
    bot.enabled.store(false, Relaxed);
    for writer in bot.writers.iter() {
        // SAFETY: the child has one thread, and it is here.
        unsafe { writer.point_at_nothing() };
    }
    for lane in state.lanes.iter_mut() {
        *lane = None; // munmap, without freeing the vector
    }
    state.header = None;
    // Relaxed: the child has one thread; a worker file's lanes are counted anew.
    bot.lanes_mapped.store(0, Relaxed);
    state.file = None; // close
}

impl BotInner {
    /// In a forked child, at its first record, registration or lane claim through a bot its
    /// parent attached: the child becomes a worker of the bot (`rsp_become_worker`). It writes a
    /// file of its own, `<name>@<pid>` (or `<name>@<pid>.<n>`: `attach_worker_file`), of the
    /// parent's shape and mode, whose registry starts with the parent's entries at the same
    /// indices, so the handles it inherited keep working; the collector merges it with the bot's
    /// other files. Under the bot's mutex: no thread holds a
    /// writer of this generation yet (see `claim`), and a fork meanwhile waits in fork_prepare.
    /// Err: why not (said once on stderr); the child then writes nothing to the bot, and later
    /// calls are [`Error::Forked`] at once.
    fn become_worker_locked(&self, state: &mut BotState) -> Result<(), Error> {
        let pid = std::process::id();
        if state.worker_failed {
            return Err(Error::Forked { bot: self.name.clone(), pid, reason: state.worker_failure.clone() });
        }
        let error = match self.make_worker_file(state) {
            Ok(()) => return Ok(()),
            Err(error) => error,
        };
        let reason = match &error {
            Error::Forked { reason, .. } => reason.clone(),
            other => {
                let sentence = other.to_string();
                let prefix = format!("bot {}: ", self.name);
                sentence.strip_prefix(&prefix).map(str::to_string).unwrap_or(sentence)
            }
        };
        // One write(2), not eprintln!: std's stderr lock may be held by a thread of the parent.
        let line = format!("ringside: bot {}: this forked child (pid {pid}) writes nothing: {reason}\n", self.name);
        sys::write_stderr_raw(line.as_bytes());
        state.worker_failed = true;
        state.worker_failure = reason;
        Err(error)
    }

    /// Makes (or adopts) the worker file, or continues a gone worker's past the bound, gives it the
    /// parent's registry and writes to it from now on.
    fn make_worker_file(&self, state: &mut BotState) -> Result<(), Error> {
        let entries = self.read_attached_registry(state)?;
        let own = file_path(&self.name, &self.directory, Some(std::process::id()))?;
        let options = Options {
            directory: Some(self.directory.clone()),
            lane_capacity: Some(1 << self.capacity_log2),
            max_metrics: Some(self.registry_capacity),
            max_lanes: Some(self.max_lanes),
            mode: Some(state.file_id.mode),
            worker: true,
            max_workers: self.max_workers,
            ..Options::default()
        };
        // On an error below, `file` and `attached` are dropped: unmapped and closed, which lets go
        // of the lock; a file made here stays, as a dead process's would.
        let (file, mut attached, file_id, path) = attach_worker_file(&self.name, &self.directory, &own, &options)?;
        let target = Target { name: &self.name, path: &path, directory: &self.directory };
        target.take_registry(&mut attached, &entries)?;
        start(attached.header.header(), self.sample_above);
        let Attached { known, header, lanes, .. } = attached;
        // SAFETY: no thread uses the laneless writer: a thread is given a writer of this
        // generation (a new one since the fork) only under this mutex, after this; the cells stay
        // mapped until the bot is detached (no handle is left to use the writer) or disowned in
        // a fork of this child (which first points every writer at nothing).
        unsafe { self.writers[self.max_lanes as usize].point_at_cells(header.cells(&self.geometry)) };
        let lanes_mapped = lanes.len() as u32;
        let mut lanes: Vec<Option<Mapping>> = lanes.into_iter().map(Some).collect();
        lanes.resize_with(self.max_lanes as usize, || None);
        state.lanes = lanes;
        state.held = vec![false; self.max_lanes as usize];
        state.known = known;
        state.header = Some(header);
        state.file = Some(file);
        state.path = path;
        state.file_id = file_id;
        state.forked = false;
        state.worker = true;
        state.said_why_laneless = false;
        // The parent's lanes' sampling is the parent's: the worker's lanes start with none (every
        // writer points at nothing since the fork, so none points into them).
        state.samplings = (0..self.max_lanes).map(|_| None).collect();
        // Release: pairs with lanes_allocated()'s acquire; the lanes are mapped.
        self.lanes_mapped.store(lanes_mapped, Release);
        // Relaxed: read under this mutex by every claim and registration.
        self.enabled.store(true, Relaxed);
        Ok(())
    }

    /// The registry of the file the bot attached (the parent's), read through a descriptor of our
    /// own, read only (it takes no lock and writes nothing), if its path still names that file.
    fn read_attached_registry(&self, state: &BotState) -> Result<Vec<RegistryEntry>, Error> {
        let path = state.path.as_path();
        let io = |operation: &str, error: std::io::Error| {
            Error::io(&self.name, operation, path, error.raw_os_error().unwrap_or(sys::EIO))
        };
        let not_attached = |now: &std::fs::Metadata| Error::Forked {
            bot: self.name.clone(),
            pid: std::process::id(),
            reason: format!(
                "{} is no longer the file the parent attached: its registry is gone (it is now {} owned by uid {})",
                path.display(),
                file_kind(now.file_type()),
                now.uid()
            ),
        };
        let is_attached = |now: &std::fs::Metadata| now.dev() == state.file_id.dev && now.ino() == state.file_id.ino;
        let file = match OpenOptions::new().read(true).custom_flags(sys::OPEN_FLAGS).open(path) {
            Ok(file) => file,
            // A socket (ENXIO), say: what is there is not the parent's file.
            Err(error) => match std::fs::symlink_metadata(path) {
                Ok(now) if !is_attached(&now) => return Err(not_attached(&now)),
                _ => return Err(io("open the parent's file", error)),
            },
        };
        let metadata = file.metadata().map_err(|e| io("fstat", e))?;
        if !is_attached(&metadata) {
            return Err(not_attached(&metadata));
        }
        let corrupt = |reason: String| Error::Corrupt { bot: self.name.clone(), path: path.to_path_buf(), reason };
        let mut copy = [0u8; 0x180];
        file.read_exact_at(&mut copy, 0).map_err(|e| io("read", e))?;
        let count = le_u32(&copy, 0x84);
        let registry_offset = le_u64(&copy, 0x20);
        if count > self.registry_capacity || registry_offset != self.geometry.registry_offset {
            return Err(corrupt(format!("metric_count {count}, registry_offset {registry_offset}")));
        }
        let mut bytes = vec![0u8; count as usize * REGISTRY_ENTRY_SIZE as usize];
        file.read_exact_at(&mut bytes, registry_offset).map_err(|e| io("read the registry of", e))?;
        let mut entries = Vec::with_capacity(count as usize);
        for (index, chunk) in bytes.chunks_exact(REGISTRY_ENTRY_SIZE as usize).enumerate() {
            let entry = RegistryEntry::from_bytes(chunk);
            if let Some(problem) = Target::entry_problem(&entry, index as u32) {
                return Err(corrupt(format!("registry entry {index}: {problem}")));
            }
            entries.push(entry);
        }
        Ok(entries)
    }
}

// MARK: - Attaching

fn le_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

fn le_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

struct Target<'a> {
    name: &'a str,
    path: &'a Path,
    directory: &'a Path,
}

impl Target<'_> {
    fn corrupt(&self, reason: String) -> Error {
        Error::Corrupt { bot: self.name.to_string(), path: self.path.to_path_buf(), reason }
    }

    /// The error for the path, which is not a regular file (`metadata`: its fstat or lstat).
    fn not_regular(&self, metadata: &std::fs::Metadata) -> Error {
        Error::NotRegularFile {
            bot: self.name.to_string(),
            path: self.path.to_path_buf(),
            kind: file_kind(metadata.file_type()),
            owner: metadata.uid(),
        }
    }

    fn open_error(&self, error: std::io::Error, created: bool) -> Error {
        let errno = error.raw_os_error().unwrap_or(0);
        let (bot, path) = (self.name.to_string(), self.path.to_path_buf());
        // A directory (opened to write), a socket or a device without a driver: said as what it is.
        let not_regular = [sys::EISDIR, sys::ENXIO, sys::ENODEV]
            .contains(&errno)
            .then(|| std::fs::symlink_metadata(self.path).ok())
            .flatten()
            .filter(|metadata| !metadata.file_type().is_file());
        if errno == sys::ELOOP {
            Error::SymbolicLink { bot, path }
        } else if let Some(metadata) = not_regular {
            self.not_regular(&metadata)
        } else if created && (errno == sys::ENOSPC || errno == sys::EDQUOT) {
            // Creating the file failed for want of room: with no byte reserved yet, that is the
            // file system's inodes (or a quota), not the ring's size.
            Error::NoInodes { bot, path, directory: self.directory.to_path_buf() }
        } else if errno == sys::EACCES {
            let reason = format!("open {}: {error}", self.path.display());
            Error::PermissionDenied { bot, path, owner: None, reason }
        } else {
            Error::io(self.name, "open", self.path, errno)
        }
    }

    /// Opens (or creates) the file and takes the producer lock (`rsp_open_and_lock`).
    /// Ok(None): the path names another file now; open it again.
    fn open_and_lock(&self, mode: u32) -> Result<Option<(File, bool, u64)>, Error> {
        let mut created = true;
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(sys::OPEN_FLAGS)
            .open(self.path);
        let file = match opened {
            Ok(file) => file,
            Err(error) if error.kind() == ErrorKind::AlreadyExists => {
                created = false;
                match OpenOptions::new().read(true).write(true).custom_flags(sys::OPEN_FLAGS).open(self.path) {
                    Ok(file) => file,
                    Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None), // removed between the opens
                    Err(error) => return Err(self.open_error(error, false)),
                }
            }
            Err(error) => return Err(self.open_error(error, true)),
        };
        let fail = |operation: &str, error: std::io::Error| {
            Error::io(self.name, operation, self.path, error.raw_os_error().unwrap_or(0))
        };
        if created {
            // Exactly the mode asked for, whatever the umask.
            file.set_permissions(std::fs::Permissions::from_mode(mode)).map_err(|e| fail("chmod", e))?;
        }
        let metadata = file.metadata().map_err(|e| fail("fstat", e))?;
        if !metadata.file_type().is_file() {
            return Err(self.not_regular(&metadata));
        }
        let euid = sys::effective_uid();
        if metadata.uid() != euid {
            return Err(Error::PermissionDenied {
                bot: self.name.to_string(),
                path: self.path.to_path_buf(),
                owner: Some(metadata.uid()),
                reason: format!(
                    "{} is owned by uid {}, not {euid}; bot files are private to their user",
                    self.path.display(),
                    metadata.uid()
                ),
            });
        }
        match sys::lock_byte(file.as_raw_fd(), LOCK_BYTE_PRODUCER) {
            Ok(()) => {}
            Err(errno) if errno == sys::EAGAIN || errno == sys::EACCES => {
                let mut copy = [0u8; 0xA4];
                let mut pid = 0;
                if file.read_exact_at(&mut copy, 0).is_ok() {
                    // Format version 1 kept the pid at 0xA0.
                    let at = if le_u32(&copy, 8) == 1 { 0xA0 } else { 0x98 };
                    pid = le_u32(&copy, at) as i32;
                }
                return Err(Error::ProducerAlive { bot: self.name.to_string(), pid });
            }
            Err(errno) => return Err(Error::io(self.name, "lock", self.path, errno)),
        }
        // Under the lock the file changes only through us: is it still the one at the path?
        let metadata = file.metadata().map_err(|e| fail("fstat", e))?;
        match std::fs::symlink_metadata(self.path) {
            Ok(at_path) if at_path.ino() == metadata.ino() && at_path.dev() == metadata.dev() => {}
            _ => return Ok(None),
        }
        Ok(Some((file, created, metadata.len())))
    }

    fn no_space(&self, bytes: u64) -> Error {
        Error::NoSpace {
            bot: self.name.to_string(),
            path: self.path.to_path_buf(),
            directory: self.directory.to_path_buf(),
            bytes,
        }
    }

    /// A new file, or one whose creation never finished (version 0): lay it out under the lock.
    fn create(&self, file: &File, o: &Options, created: bool) -> Result<Attached, Error> {
        let capacity_log2 = o.lane_capacity.map_or(DEFAULT_LANE_CAPACITY_LOG2, |c| c.trailing_zeros());
        let registry_capacity = o.max_metrics.unwrap_or(DEFAULT_REGISTRY_CAPACITY);
        let max_lanes = o.max_lanes.unwrap_or(DEFAULT_MAX_LANES);
        let geometry = Geometry::of(capacity_log2, registry_capacity);
        let size = geometry.lanes_offset;
        // Start from zeros (a half-created file may hold anything), then reserve the header part
        // now, so a full directory fails here and never as SIGBUS later.
        let result = file
            .set_len(0)
            .map_err(|e| e.raw_os_error().unwrap_or(0))
            .and_then(|()| sys::reserve(file.as_raw_fd(), 0, size));
        let mapped = match result {
            Err(errno) if errno == sys::ENOSPC || errno == sys::EDQUOT => Err(self.no_space(size)),
            Err(errno) => Err(Error::io(self.name, "reserve space for", self.path, errno)),
            Ok(()) => {
                Mapping::map(file.as_raw_fd(), 0, size).map_err(|errno| Error::io(self.name, "mmap", self.path, errno))
            }
        };
        let mapping = match mapped {
            Ok(mapping) => mapping,
            Err(error) => {
                if created {
                    let _ = std::fs::remove_file(self.path); // ours, and we still hold its lock
                }
                return Err(error);
            }
        };
        let h = mapping.header();
        // Relaxed: `version`, stored last, publishes them all.
        h.magic.store(MAGIC, Relaxed);
        h.header_size.store(HEADER_SIZE, Relaxed);
        h.record_size.store(RECORD_SIZE, Relaxed);
        h.capacity_log2.store(capacity_log2, Relaxed);
        h.registry_capacity.store(registry_capacity, Relaxed);
        h.registry_entry_size.store(REGISTRY_ENTRY_SIZE, Relaxed);
        h.registry_offset.store(geometry.registry_offset, Relaxed);
        h.cells_offset.store(geometry.cells_offset, Relaxed);
        h.lanes_offset.store(geometry.lanes_offset, Relaxed);
        h.created_realtime_ns.store(sys::clock_realtime_ns(), Relaxed);
        h.created_monotonic_ns.store(sys::clock_precise_ns(), Relaxed);
        h.lane_size.store(geometry.lane_size, Relaxed);
        h.lane_records_offset.store(geometry.lane_records_offset, Relaxed);
        h.max_lanes.store(max_lanes, Relaxed);
        h.metric_cell_size.store(METRIC_CELL_SIZE, Relaxed);
        h.lane_header_size.store(LANE_HEADER_SIZE, Relaxed);
        h.lane_gather_offset.store(geometry.lane_gather_offset, Relaxed);
        h.gather_cell_size.store(GATHER_CELL_SIZE, Relaxed);
        // Release, written last: a reader that sees the version sees the whole layout. Format 3,
        // which producers and readers of 0.4 read too; 4 at its first signed or scaled metric
        // (`upgrade_for_entry`), as C does.
        h.version.store(FORMAT_VERSION_MIN, Release);
        Ok(Attached {
            known: HashMap::new(),
            header: mapping,
            lanes: Vec::new(),
            geometry,
            capacity_log2,
            registry_capacity,
            max_lanes,
        })
    }

    /// Checks an existing header's layout (`rsp_layout_check`), then the options against it.
    fn check_layout(&self, copy: &[u8], size: u64, o: &Options) -> Result<(u32, u32, u32), Error> {
        let magic = le_u64(copy, 0x00);
        let version = le_u32(copy, 0x08);
        let capacity_log2 = le_u32(copy, 0x14);
        let registry_capacity = le_u32(copy, 0x18);
        let max_lanes = le_u32(copy, 0x54);
        if magic != MAGIC {
            return Err(self.corrupt(format!("bad magic 0x{magic:016x} (not a Ringside file)")));
        }
        if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&version) {
            let before = match version {
                1 => " (one ring per file, before lanes)",
                2 => " (before gather cells)",
                _ => "",
            };
            return Err(Error::Incompatible {
                bot: self.name.to_string(),
                path: self.path.to_path_buf(),
                version: Some(version),
                reason: format!(
                    "it is format version {version}{before}; this library reads and writes versions \
                     {FORMAT_VERSION_MIN} and {FORMAT_VERSION} (a lane per thread, gather cells): remove the file, or \
                     attach with recreate to replace it"
                ),
            });
        }
        if !(MIN_CAPACITY_LOG2..=MAX_CAPACITY_LOG2).contains(&capacity_log2) {
            return Err(self
                .corrupt(format!("capacity_log2 is {capacity_log2}, not {MIN_CAPACITY_LOG2} to {MAX_CAPACITY_LOG2}")));
        }
        if !(1..=MAX_REGISTRY_CAPACITY).contains(&registry_capacity) {
            return Err(
                self.corrupt(format!("registry_capacity is {registry_capacity}, not 1 to {MAX_REGISTRY_CAPACITY}"))
            );
        }
        if !(1..=MAX_LANES).contains(&max_lanes) {
            return Err(self.corrupt(format!("max_lanes is {max_lanes}, not 1 to {MAX_LANES}")));
        }
        let g = Geometry::of(capacity_log2, registry_capacity);
        let fields: [(&str, u64, u64); 12] = [
            ("header_size", le_u32(copy, 0x0C) as u64, HEADER_SIZE as u64),
            ("record_size", le_u32(copy, 0x10) as u64, RECORD_SIZE as u64),
            ("registry_entry_size", le_u32(copy, 0x1C) as u64, REGISTRY_ENTRY_SIZE as u64),
            ("metric_cell_size", le_u32(copy, 0x58) as u64, METRIC_CELL_SIZE as u64),
            ("lane_header_size", le_u32(copy, 0x5C) as u64, LANE_HEADER_SIZE as u64),
            ("registry_offset", le_u64(copy, 0x20), g.registry_offset),
            ("cells_offset", le_u64(copy, 0x28), g.cells_offset),
            ("lanes_offset", le_u64(copy, 0x30), g.lanes_offset),
            ("lane_size", le_u64(copy, 0x48), g.lane_size),
            ("lane_records_offset", le_u32(copy, 0x50) as u64, g.lane_records_offset as u64),
            ("lane_gather_offset", le_u32(copy, 0x60) as u64, g.lane_gather_offset as u64),
            ("gather_cell_size", le_u32(copy, 0x64) as u64, GATHER_CELL_SIZE as u64),
        ];
        for (field, value, expected) in fields {
            if value != expected {
                return Err(self.corrupt(format!("{field} is {value}, expected {expected}")));
            }
        }
        if size < g.lanes_offset {
            return Err(self.corrupt(format!("it has {size} bytes, less than the {} before its lanes", g.lanes_offset)));
        }
        let capacity = 1u64 << capacity_log2;
        if o.lane_capacity.is_some_and(|c| c != capacity)
            || o.max_metrics.is_some_and(|m| m != registry_capacity)
            || o.max_lanes.is_some_and(|l| l != max_lanes)
        {
            let asked = |value: Option<u64>| value.map_or("any".to_string(), |v| v.to_string());
            return Err(Error::Incompatible {
                bot: self.name.to_string(),
                path: self.path.to_path_buf(),
                version: None,
                reason: format!(
                    "it holds lanes of {capacity} records, {registry_capacity} metrics and {max_lanes} lanes; asked for \
                     lanes of {} records, {} metrics and {} lanes (attach with recreate to replace it, losing its contents)",
                    asked(o.lane_capacity),
                    asked(o.max_metrics.map(u64::from)),
                    asked(o.max_lanes.map(u64::from))
                ),
            });
        }
        Ok((capacity_log2, registry_capacity, max_lanes))
    }

    /// Why registry entry `index` of an existing file is invalid, as a reader would check it.
    fn entry_problem(entry: &RegistryEntry, index: u32) -> Option<String> {
        if entry.index != index {
            return Some(format!("its index field says {}", entry.index));
        }
        if !(KIND_COUNTER..=KIND_HISTOGRAM).contains(&entry.kind) {
            return Some(format!("unknown kind {}", entry.kind));
        }
        if Unit::from_code(entry.unit).is_none() {
            return Some(format!("unknown unit {}", entry.unit));
        }
        if entry.sample_every < 1 {
            return Some("sample_every is 0".into());
        }
        if GaugeMerge::from_code(entry.gauge_merge).is_none() || (entry.kind != KIND_GAUGE && entry.gauge_merge != 0) {
            return Some(format!("gauge merge policy {} on {}", entry.gauge_merge, kind_name(entry.kind)));
        }
        if entry.form > FORM_SIGNED || (entry.form == FORM_SIGNED && entry.kind != KIND_HISTOGRAM) {
            return Some(format!("value form {} on {}", entry.form, kind_name(entry.kind)));
        }
        if !(SCALE_MIN..=SCALE_MAX).contains(&entry.scale) || (entry.kind == KIND_GAUGE && entry.scale != 0) {
            return Some(format!("scale {} on {}", entry.scale, kind_name(entry.kind)));
        }
        if entry.name_length as usize > NAME_MAX || !is_identifier(entry.name()) {
            return Some(format!("its name is not an identifier of 1 to {NAME_MAX} bytes"));
        }
        if entry.labels_length as usize > LABELS_MAX {
            return Some(format!("labels length {}", entry.labels_length));
        }
        if let Some(problem) = labels_problem(entry.labels()) {
            return Some(problem);
        }
        if entry.help_length as usize > HELP_MAX || entry.help().contains(&0) {
            return Some(format!("its help is longer than {HELP_MAX} bytes or holds a NUL"));
        }
        None
    }

    /// An existing file: validate it field by field, then take it over with its lanes retired.
    fn adopt(&self, file: &File, copy: &[u8], size: u64, o: &Options) -> Result<Attached, Error> {
        let (capacity_log2, registry_capacity, max_lanes) = self.check_layout(copy, size, o)?;
        let geometry = Geometry::of(capacity_log2, registry_capacity);
        let fd = file.as_raw_fd();
        let header = Mapping::map(fd, 0, geometry.lanes_offset)
            .map_err(|errno| Error::io(self.name, "mmap", self.path, errno))?;
        let h = header.header();
        let count = h.metric_count.load(Acquire); // acquire: the entries below it are complete
        if count > registry_capacity {
            return Err(self.corrupt(format!("metric_count {count} exceeds registry_capacity {registry_capacity}")));
        }
        let mut known = HashMap::new();
        for index in 0..count {
            let entry = header.read_entry(&geometry, index);
            if let Some(problem) = Self::entry_problem(&entry, index) {
                return Err(self.corrupt(format!("registry entry {index}: {problem}")));
            }
            // Two entries of the same identity: the first is the one registration finds, as in C.
            let name = String::from_utf8_lossy(entry.name()).into_owned(); // an identifier: ASCII
            known.entry((name, entry.labels().to_vec())).or_insert(index);
        }
        let allocated = h.lanes_allocated.load(Acquire); // acquire: the lanes' headers
        if allocated > max_lanes {
            return Err(self.corrupt(format!("lanes_allocated {allocated} exceeds max_lanes {max_lanes}")));
        }
        let needed = geometry.lane_offset(allocated);
        if size < needed {
            return Err(self.corrupt(format!("it has {size} bytes, but its {allocated} lanes need {needed}")));
        }
        let capacity = 1u64 << capacity_log2;
        let mut lanes = Vec::with_capacity(allocated as usize);
        for lane in 0..allocated {
            let mapping = Mapping::map(fd, geometry.lane_offset(lane), geometry.lane_size)
                .map_err(|errno| Error::io(self.name, "mmap a lane of", self.path, errno))?;
            let l = mapping.lane();
            let write = l.write_cursor.load(Acquire); // acquire: pairs with the writer's release
            let read = l.read_cursor.load(Acquire); // acquire: pairs with the consumer's release
            if read > write {
                return Err(self.corrupt(format!("lane {lane}'s read_cursor {read} is past its write_cursor {write}")));
            }
            if write - read > capacity {
                return Err(self.corrupt(format!(
                    "lane {lane}'s cursors (read {read}, write {write}) hold more records than its capacity of {capacity}"
                )));
            }
            lanes.push(mapping);
        }
        // Valid: only now is anything written. The process that held the lanes is gone (it held the lock).
        for lane in &lanes {
            shm::retire(lane.lane());
        }
        Ok(Attached { known, header, lanes, geometry, capacity_log2, registry_capacity, max_lanes })
    }

    /// Attaches the file at the path (`rsp_attach_file`), opening it again while it is replaced
    /// under us: the file (holding the lock), its parts mapped, and which file it is.
    fn attach(&self, o: &Options) -> Result<(File, Attached, FileId), Error> {
        for _ in 0..ATTEMPTS {
            if let Some((file, attached)) = self.attach_once(o)? {
                let id = FileId::of(&file)
                    .map_err(|e| Error::io(self.name, "fstat", self.path, e.raw_os_error().unwrap_or(sys::EIO)))?;
                return Ok((file, attached, id));
            }
        }
        Err(Error::NotReady { bot: self.name.to_string(), path: self.path.to_path_buf() })
    }

    /// Gives a forked child's worker file the parent's entries (checked already), at the same
    /// indices, since the child's handles hold them: an entry already there (a file a dead process
    /// left) must be the same metric. The file is attached (we hold its lock), the bot not built.
    fn take_registry(&self, attached: &mut Attached, entries: &[RegistryEntry]) -> Result<(), Error> {
        let header = &attached.header;
        let h = header.header();
        let had = h.metric_count.load(Relaxed); // relaxed: we hold the lock; adopt read it with acquire
        for (index, entry) in (0u32..).zip(entries) {
            let name = String::from_utf8_lossy(entry.name()).into_owned(); // an identifier: ASCII
            if index < had {
                let there = header.read_entry(&attached.geometry, index);
                if there.kind != entry.kind
                    || there.unit != entry.unit
                    || there.sample_every != entry.sample_every
                    || there.gauge_merge != entry.gauge_merge
                    || there.form != entry.form
                    || there.scale != entry.scale
                    || there.name() != entry.name()
                    || there.labels() != entry.labels()
                {
                    let describe = |e: &RegistryEntry| {
                        let labels = String::from_utf8_lossy(e.labels()).replace('\n', ",");
                        let labels = if labels.is_empty() { labels } else { format!("{{{labels}}}") };
                        let merge = if e.gauge_merge != GaugeMerge::Last as u8 {
                            format!(", merging its workers by {}", merge_phrase(e.gauge_merge))
                        } else {
                            String::new()
                        };
                        let values = if e.form != FORM_UNSIGNED || e.scale != 0 {
                            let form = if e.form == FORM_SIGNED { "signed" } else { "unsigned" };
                            format!(", {form} values in steps of 1e{}", e.scale)
                        } else {
                            String::new()
                        };
                        format!(
                            "{}{labels} ({} in {}, sampled 1 in {}{merge}{values})",
                            String::from_utf8_lossy(e.name()),
                            kind_name(e.kind),
                            unit_name(e.unit),
                            e.sample_every
                        )
                    };
                    return Err(Error::Conflict {
                        bot: self.name.to_string(),
                        metric: name,
                        reason: format!(
                            "{} holds another metric at index {index} than the parent's registry: {} where the \
                             parent's is {}",
                            self.path.display(),
                            describe(&there),
                            describe(entry)
                        ),
                    });
                }
                continue;
            }
            header.write_entry(&attached.geometry, entry);
            upgrade_for_entry(h, entry);
            attached.known.entry((name, entry.labels().to_vec())).or_insert(index);
        }
        let count = entries.len() as u32;
        if count > had {
            // Release: the entries' bytes are visible before the count that publishes them.
            h.metric_count.store(count, Release);
        }
        // Every metric of the copied registry takes its word in the bot's own file (and the
        // bot's "off"), those the file had already (a gone worker's, continued) as well.
        let bot_file = BotFileControls::read(self.name, self.directory);
        for (index, entry) in (0u32..).zip(entries) {
            take_control(h, header.metric_cell(&attached.geometry, index), entry, bot_file.as_ref());
        }
        Ok(())
    }

    /// One attempt (`rsp_attach_once`): Ok(None) to open the path again.
    fn attach_once(&self, o: &Options) -> Result<Option<(File, Attached)>, Error> {
        let Some((file, created, size)) = self.open_and_lock(o.mode.unwrap_or(0o600))? else {
            return Ok(None);
        };
        let mut copy = [0u8; 0x180];
        let result = if size >= HEADER_SIZE as u64 {
            file.read_exact_at(&mut copy, 0)
                .map_err(|e| Error::io(self.name, "read", self.path, e.raw_os_error().unwrap_or(0)))
        } else {
            Ok(())
        };
        let result = result.and_then(|()| {
            if size < HEADER_SIZE as u64 || le_u32(&copy, 8) == 0 {
                self.create(&file, o, created)
            } else {
                self.adopt(&file, &copy, size, o)
            }
        });
        match result {
            Err(Error::Incompatible { .. } | Error::Corrupt { .. }) if o.recreate => {
                // Asked to replace it: we hold its lock (`file` is still open) and it is still
                // the file at the path. Unlink it, then make it again.
                match std::fs::remove_file(self.path) {
                    Ok(()) => Ok(None),
                    Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
                    Err(error) => Err(Error::io(self.name, "remove", self.path, error.raw_os_error().unwrap_or(0))),
                }
            }
            other => other.map(|attached| Some((file, attached))),
        }
    }
}

/// Writes the producer line of a freshly attached file (`rsp_start`).
fn start(header: &shm::Header, sample_above: u32) {
    // Relaxed: readers treat these as hints; the lock is the truth.
    header.producer_pid.store(std::process::id() as i32, Relaxed);
    header.producer_start_ns.store(sys::clock_realtime_ns(), Relaxed);
    header.producer_attaches.store(header.producer_attaches.load(Relaxed).wrapping_add(1), Relaxed);
    header.heartbeat_ns.store(sys::clock_coarse_ns(), Relaxed);
    header.sample_above.store(sample_above, Relaxed);
    header.rings_doorbell.store(sys::register_for_doorbell() as u32, Relaxed);
}

/// The records in a lane of `1 << capacity_log2` below which its histograms are never sampled,
/// by `Options::sample_above_percent` (`rsp_sample_above`): 0 when it never samples.
fn sample_above(percent: u32, capacity_log2: u32) -> u32 {
    let percent = if percent == 0 { DEFAULT_SAMPLE_ABOVE_PERCENT } else { percent };
    if percent >= 100 {
        return 0;
    }
    (((percent as u64) << capacity_log2) / 100).max(1) as u32
}

/// `<directory>/ringside.<name>`, or worker `pid`'s `<directory>/ringside.<name>@<pid>`.
fn file_path(name: &str, directory: &Path, worker: Option<u32>) -> Result<PathBuf, Error> {
    let mut path = directory.to_path_buf().into_os_string();
    path.push("/");
    path.push(FILE_PREFIX);
    path.push(name);
    if let Some(pid) = worker {
        path.push(format!("{WORKER_SEPARATOR}{pid}"));
    }
    if path.len() > PATH_MAX {
        let whose = if worker.is_some() { "worker's" } else { "bot's" };
        return Err(Error::InvalidOption {
            bot: name.to_string(),
            reason: format!("the {whose} path in {} is longer than {PATH_MAX} bytes", directory.display()),
        });
    }
    Ok(PathBuf::from(path))
}

/// The longest path of a bot's file, in bytes (`rs_bot`'s `path`, its NUL aside).
const PATH_MAX: usize = 4095;

/// A worker's own path `own` (`<directory>/ringside.<name>@<pid>`) with the random number
/// `suffix` of a name taken in its place, `<own>.<suffix>` (WORKERS in ringside.h); None if too long.
fn suffixed_path(own: &Path, suffix: u32) -> Option<PathBuf> {
    let mut path = own.as_os_str().to_os_string();
    path.push(format!("{WORKER_SUFFIX_SEPARATOR}{suffix}"));
    (path.len() <= PATH_MAX).then(|| PathBuf::from(path))
}

/// `<directory>/<entry>`: the path of a directory entry, as C writes it.
fn entry_path(directory: &Path, entry: &OsStr) -> PathBuf {
    let mut path = directory.to_path_buf().into_os_string();
    path.push("/");
    path.push(entry);
    PathBuf::from(path)
}

/// The number of 1 to 10 ASCII digits, without a leading 0, at the start of `text`, if it is at
/// most `most`, and the bytes after them (`rsp_read_number`).
fn read_number(text: &[u8], most: u64) -> Option<(u64, &[u8])> {
    let digits = text.iter().take_while(|byte| byte.is_ascii_digit()).count();
    if !(1..=10).contains(&digits) || text[0] == b'0' {
        return None;
    }
    let value = text[..digits].iter().fold(0u64, |value, digit| value * 10 + u64::from(digit - b'0'));
    (value <= most).then_some((value, &text[digits..]))
}

/// The pid a directory entry names if it is a worker file of bot `name`, else None
/// (`rsp_worker_pid_of_entry`): `ringside.<name>@<pid>`, or `ringside.<name>@<pid>.<n>` (a name
/// taken in place of an unusable one: WORKERS in ringside.h), the pid of 1 to 10 digits without a
/// leading zero, at most i32::MAX, and `n` likewise, at most u32::MAX.
fn worker_pid_of_entry(entry: &[u8], name: &str) -> Option<i32> {
    let after = entry
        .strip_prefix(FILE_PREFIX.as_bytes())?
        .strip_prefix(name.as_bytes())?
        .strip_prefix(WORKER_SEPARATOR.as_bytes())?;
    let (pid, rest) = read_number(after, i32::MAX as u64)?;
    let rest = match rest.strip_prefix(WORKER_SUFFIX_SEPARATOR.as_bytes()) {
        Some(suffix) => read_number(suffix, u32::MAX as u64)?.1,
        None => rest,
    };
    rest.is_empty().then_some(pid as i32)
}

/// The bot's worker files in `directory` of this process's user (regular files, never through a
/// link: `rsp_entry_is_ours`), but `me`'s own name, in the directory's order: each one's pid and
/// entry. Another user's files never count, and are never continued (WORKERS in ringside.h).
/// None when the directory cannot be read.
fn other_workers(directory: &Path, name: &str, me: i32) -> Option<Vec<(i32, OsString)>> {
    let euid = sys::effective_uid();
    let entries = std::fs::read_dir(directory).ok()?;
    let workers = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let pid = worker_pid_of_entry(entry.file_name().as_bytes(), name)?;
            // DirEntry::metadata is fstatat(AT_SYMLINK_NOFOLLOW): a link is a link, not its target.
            let ours = entry.metadata().is_ok_and(|m| m.file_type().is_file() && m.uid() == euid);
            (pid != me && ours).then(|| (pid, entry.file_name()))
        })
        .collect();
    Some(workers)
}

/// A random worker suffix, 1 to u32::MAX (`rsp_random_suffix`): from getrandom, which another
/// user cannot foresee; else the clock's and the pid's bits, which still differ from one try to
/// the next.
fn random_suffix() -> u32 {
    let value = sys::random_u32().unwrap_or_else(|| {
        ((sys::clock_precise_ns().wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32) ^ std::process::id()
    });
    value.max(1)
}

/// What a file of type `kind` is, for a person: "a FIFO (named pipe)", "a directory", ...
fn file_kind(kind: std::fs::FileType) -> &'static str {
    if kind.is_file() {
        "a regular file"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "a file of an unknown type"
    }
}

/// Whether an attach's failure means the name is unusable to this process, so that another name
/// may serve (`rsp_name_is_unusable`): another user's file or one it may not open, a link, a
/// directory or a file that is not a regular one, a file it cannot take over (corrupt, of another
/// format or shape, replaced under it again and again), or one held by another live process. A
/// want of space is not: another name would not cure it.
fn name_is_unusable(error: &Error) -> bool {
    match error {
        Error::ProducerAlive { .. }
        | Error::PermissionDenied { .. }
        | Error::SymbolicLink { .. }
        | Error::NotRegularFile { .. }
        | Error::Corrupt { .. }
        | Error::Incompatible { .. }
        | Error::NotReady { .. } => true,
        Error::Io { source, .. } => {
            matches!(source.raw_os_error(), Some(sys::EACCES | sys::EPERM | sys::ELOOP | sys::EISDIR | sys::ENXIO))
        }
        _ => false,
    }
}

/// Adds 1 to `workers_refused` in the bot's own file, `<directory>/ringside.<name>`, if it is there
/// and whole (`rsp_count_refused_worker`): opened without following a link, a regular file of ours
/// of at least a header, of this format. True if counted.
fn count_refused_worker(name: &str, directory: &Path) -> bool {
    let Ok(path) = file_path(name, directory, None) else { return false };
    let Ok(file) = OpenOptions::new().read(true).write(true).custom_flags(sys::OPEN_FLAGS).open(&path) else {
        return false;
    };
    let Ok(metadata) = file.metadata() else { return false };
    if !metadata.file_type().is_file() || metadata.uid() != sys::effective_uid() || metadata.len() < HEADER_SIZE as u64
    {
        return false;
    }
    let Ok(mapping) = Mapping::map(file.as_raw_fd(), 0, HEADER_SIZE as u64) else { return false };
    let h = mapping.header();
    // Acquire: pairs with the creator's release of `version`: the layout before it is written.
    if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&h.version.load(Acquire)) || h.magic.load(Relaxed) != MAGIC {
        return false;
    }
    // Relaxed atomic add: the one field that processes other than the attached one write; only
    // the count matters.
    h.workers_refused.fetch_add(1, Relaxed);
    true
}

/// Attaches this process's worker file within the bound (`rsp_attach_worker_file`; WORKERS in
/// ringside.h): while the directory holds fewer than `max_workers` worker files of the bot of this
/// user (its own aside), its own, `own` (`<name>@<pid>`), or, when that name is unusable (another
/// user's file planted there, a link, a file held by another live process), one of
/// `WORKER_NAME_ATTEMPTS` random `<name>@<pid>.<n>`; past the bound, or when none of them serves,
/// the file of a worker of this user that is gone, whose totals it continues. Returns the file
/// attached and its path. When every one is held, [`Error::TooManyWorkers`], counted in the bot's
/// file. A want of space is returned as it is: another name would not cure it.
fn attach_worker_file(
    name: &str,
    directory: &Path,
    own: &Path,
    o: &Options,
) -> Result<(File, Attached, FileId, PathBuf), Error> {
    let bound = if o.max_workers == 0 { DEFAULT_MAX_WORKERS } else { o.max_workers };
    let me = std::process::id() as i32;
    let attach = |path: &Path| {
        let (file, attached, id) = Target { name, path, directory }.attach(o)?;
        Ok((file, attached, id, path.to_path_buf()))
    };
    let Some(others) = other_workers(directory, name, me) else {
        return attach(own); // the attach says what is wrong with the directory
    };
    let others = others.len() as u32;
    if others < bound {
        let mut result = attach(own);
        // Held by this very process (a second attach as a worker): one worker file per process,
        // refused as any second attach of a live bot is. (C takes it for an unusable name.)
        if matches!(result, Err(Error::ProducerAlive { pid, .. }) if pid == me) {
            return result;
        }
        for _ in 0..WORKER_NAME_ATTEMPTS {
            if !matches!(&result, Err(error) if name_is_unusable(error)) {
                break;
            }
            let Some(path) = suffixed_path(own, random_suffix()) else { break };
            result = attach(&path);
        }
        match result {
            // Every name unusable (held by another live process, say): continue a gone worker's
            // file instead, as past the bound.
            Err(error) if name_is_unusable(&error) => {}
            result => return result,
        }
    }
    // The directory again, as C reads it again: the files there now.
    for (pid, entry) in other_workers(directory, name, me).unwrap_or_default() {
        // A file is its worker's while that process lives, even before it holds the lock
        // (between creating the file and locking it): only a gone worker's file is continued.
        if sys::process_exists(pid) {
            continue;
        }
        // By the entry's own name, `<name>@<pid>` or `<name>@<pid>.<n>`, under its lock, and only
        // if it is still the file at its name (`open_and_lock`); held, or not one to continue
        // (another shape, corrupt): the next.
        let path = entry_path(directory, &entry);
        if let Ok((file, attached, id)) = (Target { name, path: &path, directory }).attach(o) {
            return Ok((file, attached, id, path));
        }
    }
    Err(Error::TooManyWorkers {
        bot: name.to_string(),
        workers: others,
        own_file_unusable: (others < bound).then(|| own.to_path_buf()),
        counted: count_refused_worker(name, directory),
    })
}

/// Attaches to the bot `name` (`rs_bot_attach`).
pub(crate) fn attach(name: &str, options: &Options) -> Result<BotRef, Error> {
    if !is_bot_name(name) {
        return Err(Error::InvalidBotName { bot: shorten(name).to_string() });
    }
    check_options(name, options)?;
    FORK_HANDLERS.call_once(|| {
        sys::at_fork(fork_prepare, fork_parent, fork_child);
    });
    span_clock::init(); // once a process, outside PROCESS: it sleeps a millisecond
    let directory = options
        .directory
        .clone()
        .filter(|d| !d.as_os_str().is_empty())
        .or_else(|| std::env::var_os("RINGSIDE_DIR").filter(|d| !d.is_empty()).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/dev/shm"));
    let path = file_path(name, &directory, options.worker.then(std::process::id))?;
    let disabled = options.disabled || disabled_by_environment();

    // Under the process's mutex: a fork() or a thread's exit never sees a bot half attached.
    let mut process = PROCESS.lock();
    let Some(slot) = process.slots.iter().position(Option::is_none) else {
        return Err(Error::TooManyBots { bot: name.to_string() });
    };
    let attached = if disabled {
        None
    } else if options.worker {
        Some(attach_worker_file(name, &directory, &path, options)?)
    } else {
        let (file, attached, id) = Target { name, path: &path, directory: &directory }.attach(options)?;
        Some((file, attached, id, path))
    };
    let (registry_capacity, max_lanes, capacity_log2, geometry) = match &attached {
        Some((_, a, _, _)) => (a.registry_capacity, a.max_lanes, a.capacity_log2, a.geometry),
        None => {
            let registry = options.max_metrics.unwrap_or(DEFAULT_REGISTRY_CAPACITY);
            (registry, 0, DEFAULT_LANE_CAPACITY_LOG2, Geometry::of(DEFAULT_LANE_CAPACITY_LOG2, registry))
        }
    };
    let sample_above = sample_above(options.sample_above_percent, capacity_log2);
    if let Some((_, a, _, _)) = &attached {
        start(a.header.header(), sample_above);
    }
    let writers = Writers::new(slot, max_lanes, registry_capacity);
    let (file, header, lanes, known, file_id, path) = match attached {
        Some((file, a, id, path)) => (Some(file), Some(a.header), a.lanes, a.known, id, path),
        None => (None, None, Vec::new(), HashMap::new(), FileId::default(), PathBuf::new()),
    };
    let lanes_mapped = lanes.len() as u32;
    if let Some(header) = &header {
        // SAFETY: nobody can use the writer yet (the bot is not built); the cells stay mapped
        // until the bot is detached (no handle is left to use the writer) or disowned in a forked
        // child (which first points every writer at nothing).
        unsafe { writers[max_lanes as usize].point_at_cells(header.cells(&geometry)) };
    }
    let mut lane_mappings: Vec<Option<Mapping>> = lanes.into_iter().map(Some).collect();
    lane_mappings.resize_with(max_lanes as usize, || None);
    let bot = Arc::new(BotInner {
        slot: slot as u32,
        enabled: AtomicBool::new(header.is_some()),
        name: name.to_string(),
        directory,
        registry_capacity,
        max_lanes,
        capacity_log2,
        geometry,
        max_workers: options.max_workers,
        sample_above,
        writers,
        holders: AtomicUsize::new(1),
        lanes_mapped: AtomicU32::new(lanes_mapped),
        state: PMutex::new(BotState {
            file,
            header,
            lanes: lane_mappings,
            held: vec![false; max_lanes as usize],
            disabled_metrics: 0,
            known,
            path,
            file_id,
            forked: false,
            worker: options.worker && !disabled,
            worker_failed: false,
            worker_failure: String::new(),
            said_why_laneless: false,
            samplings: (0..max_lanes).map(|_| None).collect(),
        }),
    });
    process.slots[slot] = Some(Arc::clone(&bot));
    drop(process);
    Ok(BotRef(bot))
}

// MARK: - The public face

/// An attached bot: one process's hold on `<dir>/ringside.<name>`. Clone it freely (it is an
/// `Arc`); the file is let go (lanes retired, lock released) when the last `Bot` and the last
/// metric handle are dropped. See the crate documentation.
#[derive(Clone)]
pub struct Bot {
    pub(crate) inner: BotRef,
}

impl std::fmt::Debug for Bot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bot")
            .field("name", &self.inner.name)
            .field("path", &self.path())
            .field("enabled", &self.is_enabled())
            .finish()
    }
}

impl Bot {
    /// Attaches to the bot `name` with the default options (see [`Options`]), creating its file
    /// `$RINGSIDE_DIR/ringside.<name>` (default directory `/dev/shm`) if it does not exist.
    pub fn attach(name: &str) -> Result<Bot, Error> {
        Self::attach_with(name, Options::default())
    }

    /// Attaches with options. With `RINGSIDE_DISABLED=1` (or `true`, `yes`) in the environment,
    /// or `options.disabled`, maps nothing and returns a bot that writes nothing (registration
    /// still checks its arguments).
    pub fn attach_with(name: &str, options: Options) -> Result<Bot, Error> {
        Ok(Bot { inner: attach(name, &options)? })
    }

    /// The bot's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The file this process writes: `<dir>/ringside.<name>`, or a worker's
    /// `<dir>/ringside.<name>@<pid>` (`<name>@<pid>.<n>` when its own name was unusable; past
    /// `Options::max_workers`, the file of a gone worker it continues, by that file's name; in a
    /// forked child, the parent's file until the child's first record makes it a worker); None
    /// when disabled.
    pub fn path(&self) -> Option<PathBuf> {
        let state = self.inner.state.lock();
        Some(state.path.clone()).filter(|path| !path.as_os_str().is_empty())
    }

    /// True while this process's records are kept: it writes the bot's file, or it is a forked
    /// child whose first record will make its worker file. False when disabled, and in a forked
    /// child that could not make its worker file.
    pub fn is_enabled(&self) -> bool {
        if self.inner.enabled.load(Relaxed) {
            return true;
        }
        let state = self.inner.state.lock();
        state.forked && !state.worker_failed
    }

    /// Lanes this process has in the file (a thread's first record may add one).
    pub fn lanes_allocated(&self) -> u32 {
        // Acquire: pairs with the release that counted the lane.
        self.inner.lanes_mapped.load(Acquire)
    }

    /// Registry entries published (0 for a disabled bot).
    pub fn metric_count(&self) -> u32 {
        let state = self.inner.state.lock();
        match &state.header {
            // Acquire: the entries below it are complete.
            Some(header) if self.is_enabled() => header.header().metric_count.load(Acquire),
            _ => 0,
        }
    }

    /// Retires the calling thread's lane now, as its exit would (for a thread that stops
    /// recording for good, or a pool thread handed to other work). Its next record claims again.
    pub fn release_thread_lane(&self) {
        self.inner.release_thread_lane();
    }

    /// Names the calling thread in its lane of this bot (THREAD NAMES in ringside.h), claiming
    /// the lane if it has none yet, as C's `rs_bot_name_thread` does. A lane carries the kernel's
    /// name for its thread from its claim on: the one std's `thread::Builder::name` gave it, cut
    /// by the kernel to 15 bytes (the program's name for the main thread and unnamed ones). This
    /// gives another, up to 32 bytes (cut at a character's boundary past them):
    /// `bot.name_thread(std::thread::current().name().unwrap_or("main"))?`. It lasts while the
    /// thread holds the lane; the next claim writes the kernel's name again. A thread without a
    /// lane, or a disabled bot, has nowhere to keep it: Ok, nothing written. Err
    /// ([`Error::InvalidOption`]) for a name holding a NUL.
    pub fn name_thread(&self, name: &str) -> Result<(), Error> {
        self.inner.name_thread(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_files_name_gives_its_pid_with_or_without_a_random_number() {
        let pid = |entry: &str| worker_pid_of_entry(entry.as_bytes(), "bot-a");
        assert_eq!(pid("ringside.bot-a@4242"), Some(4242));
        assert_eq!(pid("ringside.bot-a@4242.3141592653"), Some(4242));
        assert_eq!(pid("ringside.bot-a@1.1"), Some(1));
        assert_eq!(pid("ringside.bot-a@2147483647.4294967295"), Some(i32::MAX), "the largest of each");
        // Not a worker file of this bot.
        for entry in ["ringside.bot-a", "ringside.bot-b@4242", "ringside.bot-a.x@4242", "bot-a@4242", "ringside.bot-a@"]
        {
            assert_eq!(pid(entry), None, "{entry}");
        }
        // Bad pids.
        for entry in ["ringside.bot-a@0", "ringside.bot-a@04242", "ringside.bot-a@2147483648", "ringside.bot-a@-1"] {
            assert_eq!(pid(entry), None, "{entry}");
        }
        assert_eq!(pid("ringside.bot-a@12345678901"), None, "11 digits");
        // Bad suffixes: empty, a leading 0, 0, past u32::MAX, 11 digits, not digits, a second one.
        for entry in [
            "ringside.bot-a@4242.",
            "ringside.bot-a@4242.0",
            "ringside.bot-a@4242.07",
            "ringside.bot-a@4242.4294967296",
            "ringside.bot-a@4242.12345678901",
            "ringside.bot-a@4242.x",
            "ringside.bot-a@4242.1x",
            "ringside.bot-a@4242.+1",
            "ringside.bot-a@4242.1.2",
            "ringside.bot-a@4242..1",
            "ringside.bot-a@4242-1",
        ] {
            assert_eq!(pid(entry), None, "{entry}");
        }
        // A bot whose name holds dots: the suffix is read after the '@' only.
        assert_eq!(worker_pid_of_entry(b"ringside.a.b@77.5", "a.b"), Some(77));
        assert_eq!(worker_pid_of_entry(b"ringside.a.b@77.5", "a"), None);
    }

    #[test]
    fn a_name_taken_in_place_of_its_own_is_its_own_and_a_random_number() {
        let own = file_path("bot-a", Path::new("/dev/shm"), Some(4242)).unwrap();
        assert_eq!(suffixed_path(&own, 3_141_592_653), Some(PathBuf::from("/dev/shm/ringside.bot-a@4242.3141592653")));
        let name = suffixed_path(&own, random_suffix()).unwrap();
        let entry = name.file_name().unwrap().as_bytes();
        assert_eq!(worker_pid_of_entry(entry, "bot-a"), Some(4242), "{}", name.display());
        // Past PATH_MAX: no such name.
        let long = PathBuf::from(format!("/{}/ringside.bot-a@4242", "d".repeat(PATH_MAX - 23)));
        assert_eq!(long.as_os_str().len(), PATH_MAX - 2);
        assert_eq!(suffixed_path(&long, 1).map(|p| p.as_os_str().len()), Some(PATH_MAX));
        assert_eq!(suffixed_path(&long, 10), None);
    }

    #[test]
    fn only_a_name_another_name_may_cure_is_unusable() {
        let path = PathBuf::from("/dev/shm/ringside.bot-a@4242");
        let (bot, directory) = ("bot-a".to_string(), PathBuf::from("/dev/shm"));
        let unusable = [
            Error::ProducerAlive { bot: bot.clone(), pid: 7 },
            Error::PermissionDenied { bot: bot.clone(), path: path.clone(), owner: Some(65534), reason: String::new() },
            Error::SymbolicLink { bot: bot.clone(), path: path.clone() },
            Error::Corrupt { bot: bot.clone(), path: path.clone(), reason: String::new() },
            Error::Incompatible { bot: bot.clone(), path: path.clone(), version: Some(2), reason: String::new() },
            Error::NotReady { bot: bot.clone(), path: path.clone() },
            Error::io(&bot, "open", &path, sys::EISDIR),
            Error::io(&bot, "open", &path, sys::ENXIO),
            Error::io(&bot, "open", &path, sys::EPERM),
        ];
        for error in &unusable {
            assert!(name_is_unusable(error), "{error:?}");
        }
        let not = [
            Error::NoSpace { bot: bot.clone(), path: path.clone(), directory: directory.clone(), bytes: 4096 },
            Error::NoInodes { bot: bot.clone(), path: path.clone(), directory },
            Error::io(&bot, "open", &path, sys::ENOSPC),
            Error::io(&bot, "open", &path, sys::EDQUOT),
            Error::io(&bot, "open", &path, sys::EIO),
        ];
        for error in &not {
            assert!(!name_is_unusable(error), "{error:?}");
        }
    }

    #[test]
    fn a_worker_refused_for_want_of_a_usable_name_says_so_as_c_does() {
        let refused = Error::TooManyWorkers {
            bot: "bot-a".into(),
            workers: 3,
            own_file_unusable: Some(PathBuf::from("/dev/shm/ringside.bot-a@4242")),
            counted: true,
        };
        assert_eq!(
            refused.to_string(),
            "bot bot-a: its worker file /dev/shm/ringside.bot-a@4242 and 8 other names were unusable, and no gone \
             worker's file is free to continue; counted in the bot's file (workers_refused)"
        );
    }
}
