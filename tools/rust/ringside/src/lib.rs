//! # Ringside for Rust
//!
//! A bot's telemetry in the Ringside format (versions 3 and 4, `Sources/CRingside/include/ringside.h`):
//! one memory-mapped file per bot under `/dev/shm`, one lock-free single-producer ring ("lane") per
//! recording thread, which the `ringside-collector` daemon drains as it drains the C, Swift and
//! Python producers'. The crate has no dependencies (std, plus a few libc calls declared by hand)
//! and runs on **Linux only, x86_64 and aarch64**.
//!
//! ## A first bot
//!
//! ```toml
//! [dependencies]
//! ringside = { path = "<ringside>/tools/rust/ringside" }
//! ```
//!
//! ```no_run
//! use ringside::{Bot, Exemplar, GaugeMerge, Unit};
//!
//! fn main() -> Result<(), ringside::Error> {
//!     let bot = Bot::attach("rs-bot")?;                       // /dev/shm/ringside.rs-bot
//!     let fill = bot.histogram("order_fill_latency", Unit::Microseconds, &[("symbol", "AAPL")])?;
//!     let orders = bot.metric("orders").label("side", "buy").help("Orders sent").counter()?;
//!     let exposure = bot.gauge("gross_exposure", Unit::None, &[])?;
//!     let in_flight = bot.metric("orders_in_flight").merge(GaugeMerge::Sum).gauge(Unit::None)?; // workers add up
//!     let slippage = bot.metric("slippage_bps").resolution(0.01).signed().histogram(Unit::None)?;
//!     let commission = bot.metric("commission_usd").resolution(1e-6).counter()?;
//!
//!     // On any thread (the handles are Clone + Send + Sync):
//!     fill.record(42);                                        // in the metric's unit: 42 us
//!     slippage.record_value(-3.5);                            // basis points, to 0.01: -350 steps
//!     commission.increment_value(0.37);                       // 370,000 micro-dollars, exact
//!     fill.record_duration(std::time::Duration::from_micros(42));
//!     let order = Exemplar::new(&[("order_id", "A17")])?;      // checked once, its bytes inline
//!     fill.record_with_exemplar(42, &order);                  // which order it was
//!     {
//!         let _span = fill.span();                            // records the scope's time on drop
//!         // send_order();
//!     }
//!     orders.increment(1);                                    // exact, even when the lane is full
//!     exposure.set(1.25e6);
//!     in_flight.set(3.0);
//!     Ok(())
//! }   // the last handle dropped: lanes retired, lock released; the records stay for the collector
//! ```
//!
//! [`Bot::attach_with`] takes [`Options`]: the directory (default `$RINGSIDE_DIR`, else
//! `/dev/shm`), the lane capacity (default 65,536 records, 2 MiB a lane), the registry's size
//! (`max_metrics`, default 256), `max_lanes` (default 64), the file's mode (default 0600),
//! `recreate`, `disabled`, `worker` and `max_workers` (see "Workers and fork"). [`Bot::metric`] starts a
//! [`MetricBuilder`] for labels, help text, sampling (`sample_every(n)`: histograms write 1 call
//! in n; the collector scales counts by n) and a gauge's merge policy across workers
//! (`merge(GaugeMerge::Sum)`, see "Workers and fork").
//!
//! ## The rules (those of `ringside_producer.h`, written again in Rust)
//!
//! - The file is `<dir>/ringside.<name>` (a worker's `<dir>/ringside.<name>@<pid>`), the name 1 to
//!   200 of `[A-Za-z0-9._-]`. It is created `O_CREAT | O_EXCL | O_NOFOLLOW` (a symbolic link is
//!   refused), mode 0600 unless asked, and every page it uses is reserved with `posix_fallocate`
//!   before use (the header part at attach, each lane when it is added), so a full `/dev/shm` is
//!   an [`Error::NoSpace`] (or a thread without a lane, said once on stderr), never a SIGBUS later.
//! - A bot never waits on a file it did not make: every open of a path in the directory is
//!   `O_NOFOLLOW | O_NONBLOCK | O_NOCTTY`, and only a regular file of the process's user is used.
//!   A FIFO, a device, a directory or a socket another user put at the bot's name is
//!   [`Error::NotRegularFile`] at attach, at once; at a worker's own name it sends the worker to a
//!   fresh name ("Workers and fork").
//! - The process takes an open-file-description lock (`F_OFD_SETLK`) on byte 0: a second attach
//!   of a live bot, from this process or another, is refused with [`Error::ProducerAlive`] ("bot
//!   X: another producer is attached (pid N); a bot has one process, or several as its workers
//!   (attach with the worker option)"). After locking, the file must still be the one at the path
//!   (same inode), else attach opens it again.
//! - A file whose creation never finished (version 0) is laid out again under the lock, the
//!   version stored last with release ordering. An existing file is validated field by field
//!   (layout, registry, cursors) and attached with its metrics, cells and lanes, every lane
//!   retired first (the process that held them is gone). A file of another format version is
//!   [`Error::Incompatible`], naming both versions (version 1, one ring per file, is not read);
//!   `Options::recreate` replaces an incompatible or corrupt file instead.
//! - Metrics: names `[a-zA-Z_][a-zA-Z0-9_]*` of at most 104 bytes; labels `key=value` pairs, keys
//!   as names not starting with `__`, values without newline or NUL, at most 256 bytes as stored
//!   (sorted by key, joined by `\n`); help at most 128 bytes without NUL. (name, labels)
//!   identifies a metric: registering it again returns it again, and with another kind, unit,
//!   sampling, (a gauge's) merge policy, or values (signed or not, resolution) is [`Error::Conflict`]. Only a gauge has a merge policy
//!   (the registry entry's `gauge_merge`; 0 for the other kinds). A registry entry is written in full, then published by a
//!   release store of `metric_count`. Everything the format cannot hold is an error at
//!   registration; the record calls never fail or panic: they return whether they wrote.
//! - Units: a histogram records unsigned integers in its [`Unit`] (whole numbers of its steps: see
//!   "Signed and fractional values"); `record_duration` and spans convert to it (truncating;
//!   nanoseconds for a unit that is not a time). Counters have no unit.
//!
//! ## Signed and fractional values
//!
//! A histogram's or counter's values are whole numbers of a *step*, a power of ten of its unit
//! (VALUES in `ringside.h`, format 4): `.resolution(0.01)` on the [`MetricBuilder`] records basis
//! points to a hundredth, `.resolution(1e-6)` dollars to a micro-dollar, `.resolution(100.0)`
//! hundreds (1e-18 to 1e18; 1, whole units, unless told). A histogram may be `.signed()`: a
//! slippage is negative when a fill beats the quote, a PnL when a trade loses.
//!
//! - [`Histogram::record_value`] and [`Counter::increment_value`] take an `f64` in the unit,
//!   multiply it by 10^-scale and round it to the nearest step, ties to even, as C's
//!   `rs_bot_record_value` and `rs_bot_count_value` do (the same double operations: the same
//!   step, byte for byte; `tests/values.rs` compares the two). A counter adds steps, so it is
//!   exact: a million increments of 0.01 to a counter of resolution 0.01 are 1,000,000 steps,
//!   10,000.00, where the doubles' own sum is not. [`Histogram::record_signed`] takes a signed
//!   histogram's steps, an `i64`; [`Histogram::record`] and [`Counter::increment`] take steps too
//!   (whole units at resolution 1, as before).
//! - A signed histogram's values are -(2^63 - 1) to 2^63 - 1 steps, stored in records and in the
//!   gather, drop and metric cells as their offset binary (the top bit flipped), so sampling,
//!   gathering, drops and maxima work as for any histogram. `record(u64)`,
//!   `record_with_exemplar`, `record_duration` and spans on a signed histogram write nothing and
//!   return false, as C's `rs_bot_record` refuses it (a duration is never negative: give it a
//!   histogram of its own); `record_signed` on an unsigned one likewise.
//! - A value the metric cannot hold (below 0 for an unsigned histogram or a counter's increment,
//!   beyond 2^64 - 1 or +-(2^63 - 1) steps, an infinity) is clamped to the nearest end and
//!   recorded (a counter: nothing for an increment below 0, 2^64 - 1 steps above), and a NaN is
//!   not recorded; both are counted in the metric cell's `clamped` (an atomic add), for the
//!   collector to export. Never wrapped, never a panic, nothing on the fast path but a range test.
//! - Registration checks them: a resolution that is no power of ten in that range, `signed()` on
//!   a counter or gauge, or a resolution other than 1 on a gauge (a double) is
//!   [`Error::InvalidOption`] naming the metric ("metric slippage_bps: resolution 0.03 is not a
//!   power of ten from 1e-18 to 1e18 (0.01, 1e-6, 1, 100, ...)"); the same metric registered
//!   again with other values, [`Error::Conflict`] ("metric slippage_bps{venue=XNAS} is already
//!   registered with signed values in steps of 1e-2; asked for unsigned values in steps of
//!   1e-2"), as C says it.
//! - Durations and spans into a histogram with a resolution are converted to its steps, exactly
//!   (1.5 ms into a millisecond histogram of resolution 0.001: 1,500 steps), truncated.
//! - The file is made format 3, which readers and producers of 0.4 read too, and becomes format 4
//!   (a release store of `version`) just before its first signed or scaled entry is published,
//!   as C's producer does: a reader that cannot read 4 then refuses the file rather than misread
//!   it, and a bot of plain metrics writes format 3 as before. The crate attaches files of both.
//!   A forked child's worker file takes the parent's entries with their values, and becomes
//!   format 4 with them.
//! - The handle knows its form and step: a value call is a multiply, a range test and a rounding
//!   before the record, with no lookup.
//!
//! ## Exemplars
//!
//! An [`Exemplar`] names what a histogram's value measured (an order id, a trace id), for the
//! slowest values' "which order?" (EXEMPLARS in `ringside.h`). Make it once, from label pairs in
//! their order (`Exemplar::new(&[("order_id", id)])`) or from the format's form
//! (`Exemplar::from_encoded("order_id=A17\nvenue=XNAS")`): it is checked then, by the rules of C's
//! `rs_exemplar_check` (`key=value` pairs joined by newlines, keys names and each given once,
//! values without newline or NUL, at most [`Exemplar::MAX_BYTES`], 64, in all), and anything else
//! is [`Error::InvalidExemplar`] saying why: an exemplar is never cut. Its bytes live inline (65
//! bytes, `Copy`). Then [`Histogram::record_with_exemplar`], `record_duration_with_exemplar` or a
//! span's [`Span::finish_with_exemplar`] write the value's record flagged `RS_FLAG_EXEMPLAR` with
//! the exemplar's length, then its bytes in the lane's next records (one per 16 bytes: 12 bytes
//! take one, a 41-byte trace id three), and publish them together with one release store of
//! `write_cursor`: a reader sees all of them or none. The value's record is stamped with
//! CLOCK_MONOTONIC, not the coarse clock the other records carry (CLOCKS in `ringside.h`): an
//! exemplar's time is shown to people, and a coarse reading may precede the call by up to a tick
//! (a few ms); a span's carries its end, as any span's. A lane without room for all of them drops
//! the value and its exemplar as one counted drop, as a thread without a lane does. No check, no
//! allocation, no system call on the way. The collector keeps each window's largest values'
//! exemplars and each bucket's latest, with the pid and the lane's thread id and name, in
//! `/latest` and on OpenMetrics bucket lines. A collector of 0.3 or before counts each exemplar
//! record as rejected (and may quarantine a bot that records many): upgrade it first.
//!
//! ## The doorbell
//!
//! A collector asleep is woken by the first record, increment or gauge set written after it fell
//! asleep, not at its next `--poll` (DOORBELL in `ringside.h`). At its first attach the process
//! registers for the collector's barrier (`membarrier`, once per process: a forked child
//! registers anew for its worker file) and says so in the file (`rings_doorbell` 1, else 0 and
//! it never rings). Every record published and every increment then loads the header's
//! `doorbell` (relaxed) and branches; the call that finds it set swaps it with 0 and, if it took
//! the 1, makes one `FUTEX_WAKE` (once a sleep, never a wait, its error ignored). A thread
//! without a lane writes no record and never rings.
//!
//! ## Threads
//!
//! Each thread that records gets a lane of its own. Its first record on a bot claims one under
//! the bot's mutex (the lowest retired lane, else one appended to the file: 2 to 3 ms for a
//! 2 MiB lane, 1 to 2 us to reuse one); afterwards a record is a `thread_local!` read and a few
//! stores, with no lock, allocation or system call (the coarse clock is read through the vDSO;
//! the one exception wakes a sleeping collector, below).
//! When the thread exits, a pthread key's destructor retires its lane for the next thread, as in
//! C (`JoinHandle::join` returns after it; `std::thread::scope` may return a moment before, so
//! threads of the next scope can briefly find it held; [`Bot::release_thread_lane`] retires it
//! sooner, at a point of your choosing). It runs after the thread's `thread_local!` destructors,
//! and again if one of them (or another pthread key's destructor) records after it, so what a
//! thread-local's destructor records reaches the thread's lane (claimed then if it had none) like
//! any other record. The thread that ends the process (main's return, or `exit`) runs no pthread
//! key destructor: an `atexit` handler retires its lanes instead (after its thread-locals'
//! destructors): a bot kept to the end, in a `static` say, leaves main's lane retired. With
//! every lane held by live threads (`max_lanes`), a thread records without a lane, as the C
//! producer does: its counter increments and gauge values are still kept exactly (the metric
//! cell's `unlaned`, an atomic add), its histogram and gauge records are counted there as
//! dropped. A full lane drops the new record and counts it (never blocks, never overwrites), with
//! a histogram's value in its lane's sum and largest of the values dropped; a lane about to fill
//! may sample its histograms first (see "Overload").
//!
//! A lane carries its thread's name (THREAD NAMES in `ringside.h`), written at each claim before
//! the lane is marked active, which the collector shows beside the thread's id (with each
//! exemplar): the kernel's name for the thread, as C writes it, which is the one
//! `std::thread::Builder::name` gave it (the kernel keeps 15 bytes), else the program's.
//! [`Bot::name_thread`] gives it another, of up to 32 bytes (cut at a character's boundary past
//! them, as C cuts it): `bot.name_thread(std::thread::current().name().unwrap_or("main"))?`. The
//! crate does not read `std::thread::current()` at a claim: it panics once the thread's exit has
//! destroyed std's thread data (in a pthread key's destructor, where a record claims a lane too),
//! and a panic there aborts the process.
//! [`Bot`] and the handles are `Clone + Send + Sync` (each holds an `Arc` of the bot): the file
//! is let go when the last of them is dropped. A process holds at most
//! [`MAX_BOTS_PER_PROCESS`] (64) bots at once.
//!
//! ## Overload: sampling and gathering
//!
//! A lane that would fill before the collector drains it again samples its histograms rather
//! than drop their newest calls (SAMPLING AND GATHERING in `ringside.h`, by the C producer's
//! rules and thresholds). Below `Options::sample_above_percent` of the lane (default half) it
//! never does; past it, the thread looks at the lane every 1/64 of it and measures what it gains
//! over the collector's drain interval (the consumer line's `drain_interval_ns`): its reserve R,
//! at least 1/64 and at most 1/32 of the lane. From `capacity - R` records on, one call in 2^L of
//! each histogram is written (L rises by one each eighth of R, to 15, and is 15 once the lane is
//! full), its record carrying k
//! (2^k - 1 calls gathered before it), and every other call is *gathered*: added, in the lane's
//! gather cell of its metric in the file, to its count and sum, as its latest value, and to the
//! largest not yet taken (a compare-and-swap), with release stores of its count and the lane's
//! `gathered`. The collector reads the gather cells at every drain, so a histogram's count, sum
//! and largest value stay exact for every call not dropped, within one drain, whatever the thread
//! does next: it idles, blocks, exits, or its process is killed. Nothing is left to write when the
//! lane stops sampling or its thread lets go of it. A gathered call returns false (it wrote no
//! record), as one skipped by `sample_every` does. A bot samples only while its collector says it
//! reads gather cells (`weights_reader_pid`); with an older one, or `sample_above_percent: 100`, a
//! full lane drops. A record dropped adds its value to its gather cell's `dropped_sum` and
//! `dropped_max` (a thread without a lane: its metric cell's `unlaned_sum` and `unlaned_max`,
//! atomically), which the collector exports beside the count of drops.
//!
//! ## Control: turning metrics off, sampling them, while the bot runs
//!
//! An operator turns a metric off, or the whole bot, or samples a histogram 1 in 2^n, while the
//! bot runs, with one word per metric in the bot's file (CONTROL in `ringside.h`, format 4: the
//! metric cell's `control`, and the header's `bot_control`), written by the operator's tool
//! (`ringside-dump control`), never by the bot's code. Every call loads its metric's word once it
//! has its thread's lane (one relaxed load and a branch; zero is the ordinary path), so a change
//! takes effect at each thread's next call:
//! - off (the metric's or the bot's): the call records nothing and counts nothing: a histogram's
//!   record returns false, a counter adds nothing (nor to `clamped`), a gauge is not set (false);
//! - sampled 1 in 2^n (n from 1 to 15; more is 15): histograms only (counters and gauges go on as
//!   usual). Past the metric's own `sample_every`, while the collector reads gather cells, a call
//!   is written only when it makes its metric's calls on the lane 2^k (k >= n), with k in the
//!   record, and every other call is gathered (counted, summed, its largest kept, as "Overload"
//!   above says), so the count, sum and largest stay exact; a gathered call returns false. The
//!   record then goes the usual way (a full lane may still drop it, or the lane's own sampling
//!   gather it). A call with an exemplar sampled so is written without its exemplar. With a
//!   collector that reads no gather cells, every call is written.
//!
//! A metric registered while the bot is off starts off. A worker's file (see below) takes, for
//! each metric it publishes (the forked child's copy of the registry too), the word of the same
//! metric (name and labels) in the bot's own file, if that file is there, this user's and valid,
//! and the bot's off, so that a change the tool makes while a worker starts reaches it either way.
//! The words stay in the file: a bot that attaches its file again keeps them until the tool sets
//! them back.
//!
//! ## Workers and fork
//!
//! Several processes may write one bot, as its workers: each writes a file of its own, and a
//! reader merges the files of a bot by metric name and labels (WORKERS in `ringside.h`), so one
//! process's death or corruption never touches another's. A process becomes a worker in one of
//! two ways.
//!
//! - By asking: with `Options { worker: true, .. }` it writes `<dir>/ringside.<name>@<pid>` (a bot
//!   file like any other, with a registry of its own) instead of `<dir>/ringside.<name>`, beside
//!   the process that holds the name, if one does, and beside the other workers.
//! - In a child made by `fork()`, with nothing to call. A `pthread_atfork` handler lets go of the
//!   parent's file at once (it unmaps and closes the child's copy, either of which would keep the
//!   parent's lock alive and hide its death). Then the child's first record, registration or lane
//!   claim through a bot its parent attached makes it a worker of that bot: it reads the parent's
//!   registry (through a read-only descriptor of its own, and only if the path still names the
//!   file the parent attached), makes `<dir>/ringside.<name>@<childpid>` (or adopts it, if a dead
//!   process left one, by the rules of any attach) with the parent's lane capacity, registry
//!   size, lane count and file mode, and copies the parent's entries to it at the same indices,
//!   so every handle the child inherited keeps working. A child that never records makes nothing
//!   and says nothing. The work is done then, under the bot's mutex (the child's threads may
//!   race to it), not in the fork handler, which may only make async-signal-safe calls.
//!
//! If the worker file cannot be made (a full directory, a file left at `<name>@<childpid>` with
//! other metrics at the parent's indices, the parent's file gone or replaced), the child writes
//! nothing to that bot and says why once on stderr: "ringside: bot NAME: this forked child (pid
//! P) writes nothing: WHY". Its record calls return false; its registrations return the error,
//! then [`Error::Forked`]. A fork of that child tries again, being another process.
//! [`Bot::path`] and [`Bot::is_enabled`] follow: in a forked child, the parent's file and false
//! until the first record, then the worker file and true.
//!
//! A name it cannot use is not a worker's end. Worker names are predictable, and `/dev/shm` is
//! everyone's: another user may plant files under the names a bot's next children will want. A
//! worker whose own name is unusable (another user's file, a link, a directory, a file it cannot
//! take over, or one held by another live process) tries up to 8 names `<name>@<pid>.<n>`, `n`
//! from 1 to 4,294,967,295 drawn from getrandom(2), which nobody can plant ahead of it; the
//! collector takes the bot's name before the last `@`. Only when all of them are unusable does it
//! continue a gone worker's file, or is refused, as below. A want of space is not retried under
//! another name.
//!
//! A bot has at most `max_workers` worker files (`Options { max_workers: .. }`, 1 to 65,536; 0,
//! the default, is 256; a forked child takes its parent's), as in C, Swift and Python (WORKERS
//! in `ringside.h`): a process that becomes a worker, by the option or by a fork, while the
//! directory holds that many worker files of the bot owned by its user (its own aside; another
//! user's files never count, and are never continued) makes no other. It
//! continues the file of a worker that is gone (the process its name gives no longer exists and
//! the file's lock is free; attached under the lock, and only if it is still the file at its
//! name), as a restarted bot attaches its own file: its counters continue that file's totals,
//! and [`Bot::path`] names it. When every one is held by a live worker it writes nothing to the
//! bot: a worker by option gets [`Error::TooManyWorkers`], a forked child says so once on stderr
//! ("ringside: bot NAME: this forked child (pid P) writes nothing: the bot has N worker files
//! (max_workers), each held by a live worker; counted in the bot's file (workers_refused)"), and
//! either adds 1 atomically to `workers_refused` in the bot's own file, which the collector
//! exports as `ringside_ring_workers_refused_total`. A worker whose own name and 8 random ones
//! were all unusable continues a gone worker's file (by that file's name, random number and all),
//! or is refused the same way ("its worker file PATH and 8 other names were unusable, and no gone
//! worker's file is free to continue; ...").
//!
//! A gauge declares how the collector merges it across the bot's workers, as C's
//! `rs_bot_register_gauge`, Swift's `gauge(merge:)` and Python's `gauge(merge=)` do:
//! `bot.metric("in_flight").merge(GaugeMerge::Sum).gauge(Unit::None)`. [`GaugeMerge::Last`] (the
//! default: the value set last, by any worker), `Sum`, `Max` or `Min` of the live workers' last
//! values, or `PerWorker`, a series per live worker labelled `pid` (so the gauge's own labels may
//! not name `pid`: [`Error::InvalidLabels`]). A bot of one process has one value whatever the
//! policy. The same gauge registered again with another policy is [`Error::Conflict`] ("gauge
//! in_flight is already registered merging its workers by sum; asked for max"), a policy on
//! another kind [`Error::InvalidOption`]. A forked child's worker file copies the parent's entries
//! whole, policies included, and adopts a file a dead process left only if its entries at the
//! parent's indices match the parent's in every field, the policy too. `"sum".parse::<GaugeMerge>()`
//! takes a policy's name (last, sum, max, min, per_worker) from a configuration.
//!
//! ## RINGSIDE_DISABLED
//!
//! With `RINGSIDE_DISABLED=1` (or `true`, `yes`) in the environment, or `Options::disabled`,
//! attach creates no file and maps nothing; the handles write nothing and registration still
//! checks its arguments.
//!
//! ## Memory ordering
//!
//! Every shared field is an `AtomicU64`/`AtomicU32` laid over the file (module `shm`, the only
//! place with pointer work). Release stores, as the format requires: `version`,
//! `lanes_allocated`, `metric_count`, a lane's `write_cursor` (after the record's 32 bytes) and
//! `state` (after its owner and claim count, or its last holder's records), a cell's `gauge_set`
//! (after `gauge_bits`), a gather cell's `calls` (after its `sum` and `latest`) and the lane's
//! `gathered` after it. Acquire loads: a lane's `read_cursor` (read only when the lane looks
//! full, or is due a look while it may sample), and an existing file's counts and cursors at
//! attach. The rest is relaxed: cells and counters have a single writer (the lane's holder),
//! `unlaned` and `unlaned_sum` take atomic adds, and `unlaned_max` and a gather cell's `max` (which
//! the collector takes by an exchange with 0) are raised by compare-and-swap.
//!
//! ## Spans
//!
//! [`Histogram::span`] times a scope on the span clock (THE SPAN CLOCK in `ringside.h`, whose
//! rules and calibration this crate ports): the TSC (`core::arch::x86_64::_rdtsc`) where the CPU's
//! is invariant (CPUID 0x80000007 EDX bit 8) and the kernel's clocksource is `tsc`, else
//! CLOCK_MONOTONIC. The process's first attach chooses it and calibrates the TSC against
//! CLOCK_MONOTONIC (two anchors a millisecond apart); a span's start reads the TSC alone, its end
//! reads it again and converts with a multiply and a shift, and the first span to end once the
//! calibration is due (about once a second) takes a new anchor, if no other thread is taking one,
//! through a latch the other ends only read. A span's record carries its end in CLOCK_MONOTONIC
//! nanoseconds within [`SpanClock::BOUND_NS`] (5 us). A fork() child inherits the calibration (the
//! TSC is the machine's). `RINGSIDE_SPAN_CLOCK=monotonic` keeps spans on CLOCK_MONOTONIC;
//! [`SpanClock::describe`] says which clock is in use and why, [`SpanClock::select`] switches it
//! (spans under way end on the clock they started on). A process that also links the C producer
//! has two calibrations, each its own spans'.
//!
//! ## Cost
//!
//! `cargo run --release --example bench` measures the crate beside the C header's calls in the
//! same process, interleaved. On the reference VM (AMD EPYC, 2 vCPUs, rustc 1.95, gcc 12 -O2),
//! whose speed varies between runs: `Histogram::record` 6 to 10 ns a call, as `rs_bot_record`
//! (median per-round ratio Rust/C 0.91 to 0.99 over four runs); `Gauge::set` 7 to 11 ns, as
//! `rs_bot_set` (0.97 to 1.04); `Counter::increment` about 1 ns (`rs_bot_count` 2 ns). A span
//! (two TSC reads, the conversion and a record) 23 to 35 ns, as `rs_bot_record_span` from
//! `rs_span_clock_start()` (0.94 to 1.00 over four runs), 0.34 to 0.44 times the same span on
//! CLOCK_MONOTONIC (C's: 0.40 to 0.51).
//! `Histogram::record_with_exemplar` with a 12-byte exemplar costs 1.15 to 1.24 times
//! `Histogram::record` (the median per-round ratio, in the same round, over five runs; C's
//! `rs_bot_record_checked_exemplar` 1.3 to 1.7 times `rs_bot_record`): docs/benchmarks.md.
//! A record into a lane that samples, nearly every call gathered (the bench's lane of 1,024 kept
//! full by a consumer that reads gather cells), costs 0.98 to 1.20 times a plain record (C's
//! 1.09 to 1.17), Rust/C 0.80 to 1.04 (four runs of 2026-11-25, on a noisier day: a plain record
//! 8 to 10 ns).
//! The control word's load (see "Control"), one relaxed load of the metric cell and a branch at
//! every call, costs a plain record 1.07 to 1.16 times what it cost without it (3.8 to 4.1 ns
//! before, 4.2 to 4.5 after; six interleaved runs of 7 rounds of 32 loops, 2026-11-25, the
//! same VM), a counter's increment 1.22 to 1.27 times (0.7 ns before, 0.9 after), a gauge's set
//! 1.00 to 1.07 times.
//!
//! ## Differences from the C producer
//!
//! There is no exclusive (thread-independent) producer, and no SIGBUS guard: a bot whose file is
//! truncated under it by another process of the same user faults, as the Python producer does.
//! A fork of a child that could not become a worker tries again (in C it inherits the failure, and
//! writes nothing without a word).
//! A worker whose own worker file this very process holds already (a second attach as a worker)
//! is refused with [`Error::ProducerAlive`], as any second attach of a live bot; C takes it for
//! an unusable name, and makes a second worker file under a random name (`<name>@<pid>.<n>`).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod bot;
mod error;
mod exemplar;
mod layout;
mod metrics;
mod shm;
mod span_clock;
mod sys;

pub use bot::{Bot, Options, MAX_BOTS_PER_PROCESS};
pub use error::Error;
pub use exemplar::Exemplar;
pub use layout::{GaugeMerge, Unit, UnknownGaugeMerge};
pub use metrics::{Counter, Gauge, Histogram, MetricBuilder, Span};
pub use span_clock::SpanClock;
