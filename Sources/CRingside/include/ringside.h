/*
 * ringside.h: the Ringside shared-memory format, version 4.
 *
 * This header exists for one reason: it is the specification of the file a producer (a trading
 * bot) and a consumer (the collector, the dump tool) share, with the atomics and clocks the
 * format needs and the producer's hot path. A C or C++ bot that includes it writes the same
 * files as the Swift library. Everything is an offset from the start of the file, never a pointer.
 *
 * ONE FILE PER BOT, ONE LANE PER THREAD
 *
 * A bot (one process's attachment under a name) owns one file. The file holds the bot's header,
 * its one metric registry, one cell per metric shared by all its threads, and up to `max_lanes`
 * lanes. A lane is a single-producer/single-consumer ring with its own cursors and its own
 * per-metric cells: each thread that records owns one lane, so no two threads ever write the
 * same lane, and the hot path takes no lock. Lanes are appended to the file as threads first
 * record; a thread's lane is retired when it exits and handed to the next thread that needs one.
 *
 *   /dev/shm/ringside.<name>        (directory overridable by RINGSIDE_DIR), mode 0600
 *   /dev/shm/ringside.<name>@<pid>  a worker of the bot: another process writing the same bot
 *
 * WORKERS: several processes may write one bot, each its own file: one may hold
 * `ringside.<name>`, and each worker holds `ringside.<name>@<pid>` (its pid when it made the
 * file), or `ringside.<name>@<pid>.<n>` when that name was unusable (a file of another user, a
 * link, a FIFO, device, directory or socket (opened without waiting, and refused by its type), a
 * file it cannot read, or one held by another live process: names are predictable, and
 * another user may plant files ahead of a bot's children), n a random number from 1 to
 * 4294967295 that nobody can plant ahead of it (RS_WORKER_NAME_ATTEMPTS of them at the most).
 * A reader takes the bot's name before the last '@'. Each file is a bot file as below, with a
 * registry of its own; a reader merges the files of a bot by metric name and labels, never by
 * index (and shows each file's owner, since a collector may be allowed other users' files). A process becomes a worker by asking
 * (ringside_producer.h: the worker option), or, in a child made by fork(), at its first record
 * through a bot its parent attached (the child's file starts with a copy of the parent's
 * registry, so inherited handles keep their indices).
 * The bound: a process that becomes a worker while the directory holds `max_workers` (default
 * RS_DEFAULT_MAX_WORKERS) worker files of the bot owned by its user, its own aside (another
 * user's files never count, and are never continued), does not make another: it
 * attaches the file of a worker that is gone (the process its name gives no longer exists, and
 * its producer byte is unlocked), as a restarted bot attaches its own file, and continues its
 * totals under that worker's name. When every one is
 * held by a live worker, it writes nothing to the bot, says why, and adds 1 to the bot's file's
 * `workers_refused` (an atomic add: the one field a process other than the attached one writes).
 * A reader removes a gone worker's file once it has drained and kept its totals.
 *
 *   offset 0          header page, RS_HEADER_SIZE (4096) bytes:
 *     0x000  layout    written once, before `version`; never changes afterwards
 *     0x080  producer  line: written only by the attached process    (128 bytes)
 *     0x100  consumer  line: written only by the consumer             (128 bytes)
 *   registry_offset   registry_capacity entries of RS_REGISTRY_ENTRY_SIZE (512) bytes
 *   cells_offset      registry_capacity rs_metric_cell (64 bytes): per metric, shared by threads
 *   lanes_offset      lane 0, lane 1, ... each `lane_size` bytes (a multiple of 4096):
 *                       +0                    rs_lane_header (256 bytes): producer and consumer lines
 *                       +RS_LANE_HEADER_SIZE  registry_capacity uint64_t lane cells
 *                       +lane_gather_offset   registry_capacity rs_gather_cell (64 bytes; see SAMPLING)
 *                       +lane_records_offset  capacity records of RS_RECORD_SIZE (32) bytes
 *   file size         >= lanes_offset + lanes_allocated * lane_size (the file grows by whole lanes)
 *
 * READY: the creator writes the layout, then stores `version` with release ordering. A reader
 * that loads a non-zero `version` (acquire) sees the whole layout. Version 0 means "being
 * created": readers skip the file and look again later. A file of another version is refused
 * with a message naming both versions; version 1 (one ring per file, before lanes) and version 2
 * (before gather cells) are not read. Version 3 is version 4 without VALUES (its entries' `form`
 * and `scale` are zero, which reads the same): a reader reads both, and a producer may write 3
 * while it registers no signed or scaled metric.
 *
 * LANES: the attached process reserves a new lane's pages (the file grows by `lane_size`),
 * writes its header, then stores `lanes_allocated` + 1 with release ordering. A reader that
 * loads `lanes_allocated` (acquire) may map every lane below it, after checking that the file is
 * that long. `lanes_allocated` never decreases and never exceeds `max_lanes`. A lane's `state`
 * says who holds it: RS_LANE_ACTIVE (a live thread, `owner_tid`), RS_LANE_RETIRED (its thread
 * exited; the next thread that needs a lane takes it over, cursors, records and cells and all,
 * so exactly one writer at a time). A process that attaches an existing file retires every lane
 * first: the process that held them is gone (it held the producer lock).
 *
 * CURSORS (per lane): `write_cursor` and `read_cursor` are free-running 64-bit counts (never
 * wrapped); the record at cursor c lives in slot c & (capacity - 1). Records in
 * [read_cursor, write_cursor) are published and not yet consumed. The producer never writes slot
 * c while c - read_cursor >= capacity: a full lane drops the new record and counts it in the
 * lane's `dropped_total` and in the lane cell of its metric; it never blocks and never
 * overwrites. Hence, exactly, per lane:
 *     records written   == write_cursor
 *     records attempted == write_cursor + dropped_total   (calls gathered aside: see SAMPLING)
 *     records in lane   == write_cursor - read_cursor
 * where an exemplar's records (see EXEMPLARS) count among those written, and a value dropped
 * with its exemplar counts once among those dropped.
 *
 * CELLS: counters and gauges do not depend on the rings, so a full ring never changes them.
 * - Lane cells (one uint64_t per metric, written only by the lane's owner with plain relaxed
 *   stores): a counter's cell is the sum of its increments made on that lane; a histogram's or
 *   gauge's cell counts its records the lane dropped. A counter's total is the sum of its cells
 *   over every allocated lane plus its metric cell's `unlaned`; the collector samples these sums
 *   for rates. Counters write no records: after each increment the owner also adds 1 to its lane
 *   header's `cell_writes` (a release store, wrapping), beside `write_cursor` on the producer
 *   line, so a reader that watches both words of each lane sees a counter move as soon as it sees
 *   a record, and reads the cells then (after an acquire load of `cell_writes`). Readers before
 *   0.3.0 never look at it (it was reserved, zero); a producer before 0.3.0 leaves it at zero,
 *   and its counters are seen when the reader samples cells on its own schedule (the collector:
 *   once a second, or every 10 s while every bot is quiet).
 * - Metric cells (rs_metric_cell, any thread, atomic stores and adds): a gauge's last value
 *   (`gauge_bits` stored, then `gauge_set` stored 1 with release, by whichever thread sets it:
 *   the last store wins), and `unlaned`: what threads that found no free lane could not keep
 *   apart (counter increments, added atomically and still exact; or records of a histogram or
 *   gauge, dropped and counted, with a histogram's dropped values' sum and largest in
 *   `unlaned_sum` and `unlaned_max`). Gauges also write a record per set, for windowed min and max.
 * - Gather cells (rs_gather_cell, one per lane and metric): a histogram's calls gathered on the
 *   lane, and the values it dropped (see SAMPLING).
 *
 * OWNERSHIP AND LIVENESS: one process and one consumer at a time, each holding an open file
 * description lock (fcntl F_OFD_SETLK, exclusive) on one byte of the file: byte
 * RS_LOCK_BYTE_PRODUCER (0) for the producer process, RS_LOCK_BYTE_CONSUMER (1) for the
 * consumer. The kernel drops the lock when the process dies, so "the producer byte is locked" is
 * the process's liveness (producer_pid says who); a lane's `state` and `heartbeat_ns` are its
 * thread's. Within the process, lanes are handed out under a process-private mutex; the thread
 * lookup afterwards is a thread-local read. A child made by fork() never writes its parent's file
 * (ringside_producer.c closes and disowns it in the child).
 *
 * CLOCKS: record timestamps are CLOCK_MONOTONIC nanoseconds, read with CLOCK_MONOTONIC_COARSE
 * (same origin, about 5 ns a read against 25 to 35 for CLOCK_MONOTONIC on our reference machine,
 * with a resolution of a few milliseconds: ample to place a record in a one-second window), except
 * a span's (RS_FLAG_SPAN), which carries the end its span clock read, converted to CLOCK_MONOTONIC
 * nanoseconds within RS_SPAN_CLOCK_BOUND_NS, and a value's with an exemplar (RS_FLAG_EXEMPLAR),
 * read with CLOCK_MONOTONIC itself: an exemplar's time is shown to people beside an order id, and
 * the coarse clock's reading may precede the call by up to its resolution. Spans (durations) are timed by THE SPAN CLOCK below.
 * Every timestamp counts from the same origin (boot), so a consumer compares them with its own
 * reading of CLOCK_MONOTONIC. `created_realtime_ns` and `created_monotonic_ns` let a reader turn
 * a record's timestamp into wall time: wall = created_realtime_ns + (timestamp_ns - created_monotonic_ns).
 *
 * THE SPAN CLOCK: a producer process times its spans with the TSC (rdtsc: 10.6 ns a read on our
 * reference machine against 27.6 for CLOCK_MONOTONIC through the vDSO, ringside-bench's clock.tsc
 * and clock.precise), as Quill's TSC clock and Tracy do, when all of these hold at its first attach (or first span), else with
 * CLOCK_MONOTONIC:
 *   - the CPU is x86-64 and its TSC is invariant (CPUID 0x80000007 EDX bit 8; Linux shows it as
 *     the flags constant_tsc and nonstop_tsc): it ticks at one rate in every P- and C-state, and
 *     the kernel keeps the cores' TSCs in step, so a span may start on one core and end on another;
 *   - the kernel keeps time with it (/sys/devices/system/clocksource/clocksource0/current_clocksource
 *     is "tsc"): Linux found it stable and synchronised across the cores, and CLOCK_MONOTONIC is
 *     itself a linear function of it between NTP's adjustments;
 *   - RINGSIDE_SPAN_CLOCK is unset, "auto" or "tsc" ("monotonic" chooses CLOCK_MONOTONIC; any
 *     other value is said on stderr and taken as "auto", as is "tsc" on a machine without a usable TSC).
 * A span's start is one reading (rs_span_clock_start: the TSC with RS_SPAN_TSC_BIT set, or
 * CLOCK_MONOTONIC nanoseconds, which never reach that bit), so its end knows which clock to read
 * again: a span started before the clock was switched (rs_span_clock_select), or a start a caller
 * read with rs_clock_precise_ns, is ended on its own clock. The end converts with a multiply and a
 * shift: duration = ticks * mult >> 32, end = anchor_ns + (tsc - anchor_tsc) * mult >> 32.
 * Calibration: an anchor is a TSC reading bracketed by two CLOCK_MONOTONIC readings (the narrowest
 * of several, at most RS_SPAN_CLOCK_ANCHOR_MAX_NS wide; its midpoint is the CLOCK_MONOTONIC of the
 * reading); `mult` is the rate between the last two anchors. The first two are taken at the
 * process's first attach, 1 ms apart; afterwards the first span to end more than 4 times the last
 * interval after the last anchor (at most RS_SPAN_CLOCK_REFRESH_NS) takes a new one: lazily, with
 * no thread, and only if no other thread is doing it (it tries a flag, never waits). A new anchor
 * is published through a latch (two copies and a count: readers read the copy the count names, and
 * read again if the count moved), so a span's end only reads, and never waits for a writer, even
 * one preempted mid-write. A rate more than 1 % from the last one is not taken (the machine was
 * suspended, or the TSC was reset); the anchor is. A fork() child inherits the calibration (the TSC
 * is the machine's) and repairs a latch the fork cut in the middle of a write.
 * THE BOUND: a span's end is within RS_SPAN_CLOCK_BOUND_NS (5 us) of CLOCK_MONOTONIC: half an
 * anchor's width (0.5 us at most), plus the rate's error (both anchors' half widths over their
 * interval) times the time since the last anchor (at most 4 intervals): 4.5 us at the most; on our
 * reference machine, within 0.1 us of the midpoint of two CLOCK_MONOTONIC reads around it, over
 * a minute. A span's duration errs by the rate's error, at most RS_SPAN_CLOCK_ANCHOR_MAX_NS /
 * interval: 1 ppm once the interval reaches a second (1.4 s after the first attach of a process
 * that spans often), 0.1 % in its first milliseconds. Both hold while CLOCK_MONOTONIC runs at a
 * steady rate against the TSC, and while anchors can be taken: a span's end that finds one due and
 * cannot take it (another thread is taking it, or 8 brackets were all wider than
 * RS_SPAN_CLOCK_ANCHOR_MAX_NS: the thread was preempted) converts with the last one, and the next
 * span's end tries again. When NTP slews CLOCK_MONOTONIC (ntpd changes its rate by up to 500 ppm,
 * chrony by more), the end moves away by the change in rate times the time since the last anchor
 * (at most a second: 0.5 ms at 500 ppm), and the duration is the TSC's, which no slewing bends.
 *
 * REGISTRY: the producer writes entry n in full, then stores `metric_count` = n + 1 with
 * release ordering; entries below `metric_count` never change again, but for their `retired`
 * word (see RETIRING A SERIES). A record names its metric
 * by index; a reader that loads `metric_count` (acquire) after a lane's `write_cursor` sees the
 * metric of every record it can read there. Strings are UTF-8, not NUL-terminated, with
 * explicit lengths:
 *   name    [a-zA-Z_][a-zA-Z0-9_]*, 1 to RS_NAME_MAX bytes
 *   labels  "key=value" pairs sorted by key and joined by '\n'; keys as names, values any
 *           UTF-8 without '\n' or NUL; at most RS_LABELS_MAX bytes in all
 *   help    any UTF-8 without NUL, at most RS_HELP_MAX bytes
 * (name, labels) identifies a metric: a producer that attaches again reuses matching entries.
 * `sample_every` > 1 (histograms only) writes 1 record in N calls; readers scale counts by N.
 * `gauge_merge` (gauges only; 0 for the other kinds) says how a reader merges the gauge across
 * the bot's workers (rs_gauge_merge); a file written before it existed holds 0, the value set
 * last, which is what readers did then. A per-worker gauge has no label of its own named "pid".
 *
 * VALUES (format 4): a histogram's or counter's values are whole numbers of a step, 10^`scale` of
 * its unit (`scale` -18 to 18: -2 records basis points to 0.01, -6 dollars to a micro-dollar; 0,
 * format 3's, whole units), and a histogram's may be signed (`form` RS_FORM_SIGNED; counters never
 * go back, and gauges, doubles, take neither). A value v of a signed histogram is an int64 from
 * -(2^63 - 1) to 2^63 - 1, stored everywhere as its OFFSET BINARY, (uint64)v + 2^63 (the top bit
 * flipped): in records, and in the gather and metric cells' `latest`, `max`, `sum`, `dropped_max`,
 * `dropped_sum`, `unlaned_max` and `unlaned_sum`. Unsigned order is then signed order, so a
 * producer raises a maximum with the unsigned compare it uses for every histogram, and 0 still
 * means "none" (-2^63 is never stored). A sum of n offset values is their values' sum plus
 * n * 2^63, modulo 2^64: a reader subtracts n * 2^63 (n the calls, or the drops, it sums) and reads
 * the difference of two readings as an int64. A producer turns a fractional value into steps by
 * rounding to the nearest (ties to even); a value beyond what the metric holds (below 0 for an
 * unsigned one or a counter's increment, past 2^64 - 1 or +-(2^63 - 1) steps, an infinity) is
 * clamped to the nearest end and recorded, a NaN is not recorded, and both are counted in the
 * metric cell's `clamped` (an atomic add): never wrapped, never silent.
 *
 * CONTROL (format 4): an operator turns a metric's recording off, or samples a histogram 1 in
 * 2^n, while the bot runs, with one word per metric that its producers read at every call: the
 * metric cell's `control` (a uint32). Zero (what a file is made with) is "as registered". Bits:
 *   RS_CONTROL_OFF       the metric is off: its calls record nothing, count nothing;
 *   RS_CONTROL_BOT_OFF   the bot is off (the same, for every metric: see `bot_control` below);
 *   RS_CONTROL_SAMPLE    (bits 0 to 4) n, 0 to RS_WEIGHT_LOG2_MAX: a histogram writes 1 call in 2^n
 *                        and gathers the others (SAMPLING AND GATHERING: counted, summed and their
 *                        largest kept exactly), a record standing for the 2^k - 1 calls before it
 *                        (k >= n) as any sampled record does; only while the consumer reads gather
 *                        cells (else every call is written, as a lane that never samples).
 * A producer loads the word (relaxed) after it has its lane, before anything else the call does,
 * and goes its ordinary way when the word is zero, so a change takes effect at each thread's next
 * call. Only the operator's tool writes these words, with atomic read-modify-writes, and the
 * header's `bot_control` (0x180: RS_CONTROL_BOT_OFF or 0): to turn the bot off it stores
 * `bot_control` first, then sets RS_CONTROL_BOT_OFF in every published metric's word; a producer
 * publishing a new metric sets that bit in the new metric's word (an atomic or) if `bot_control`
 * has it, reading `bot_control` after its release of `metric_count` with a full fence between
 * (as the tool fences between its store and its read of `metric_count`), so that of two racing
 * updates neither is lost. WORKERS: the tool writes the bot's file and every worker file of the bot;
 * a producer that makes a worker file copies, at each metric it registers there, the word of the
 * same metric (name and labels) in the bot's own file, and the bot's `bot_control`, after making
 * its file, so that a change made while it started reaches it either way. The words stay in the
 * file: a bot that attaches its file again (a restart) keeps them, until the tool sets them back.
 *
 * RETIRING A SERIES (format 4): a producer retires a series it will not write again (a delisted
 * symbol's: prometheus_client's remove() and clear()), and readers drop it from what they show,
 * through one word of its registry entry, `retired` (0x014, a uint32): a generation, even while
 * the series is live (0, what an entry is made with), odd while it is retired.
 * - Retiring: the producer (rs_bot_retire, under its registration mutex) stores a gauge's
 *   `gauge_set` 0 (its value is not one set since), then `retired` + 1 with release ordering.
 * - Reviving: registering the same name and labels again (same kind, unit and values, as any
 *   registration) finds the entry and stores `retired` + 1 (release): the same entry, index and
 *   cells, live again. So retiring and reviving one series any number of times takes one entry;
 *   a retired entry is never given to other labels (entries never change identity), so a bot that
 *   goes through many label sets needs `registry_capacity` for all of them, retired or not.
 * - A reader loads `retired` (acquire) when it samples the entry's cells. While it is odd, the
 *   entry counts for nothing: the records of it the reader drains (written before the retirement,
 *   or through a handle kept after it) are dropped and counted as refused, its cells' growth is
 *   not counted, and the series is on no page once no file of the bot holds it live. When it reads an even word again (revived), the series starts anew: a
 *   counter's total and a histogram's count from zero (from the cells as they were when the
 *   reader saw the retirement), which Prometheus reads as a counter reset, as it would of
 *   prometheus_client's series removed and made again. A retirement and a revival both made
 *   between two of the reader's looks are seen as neither: the series goes on.
 * - A reader lets go of what it keeps for a retired series (its windows, history, exemplars, the
 *   totals it saves across restarts) once no file of the bot holds it live.
 * - The word is the producer's: a reader never trusts it beyond its parity (any uint32 is either
 *   live or retired), and a word flipping at any rate costs a reader one series' removal or
 *   re-admission per look, its caps applying to every re-admission.
 * - Readers before this rule ignore the word (it was reserved, zero): a retired series stays on
 *   their pages, as before. A file that retires nothing is read the same by every reader; the
 *   word does not make a file format 4.
 *
 * EXEMPLARS: a histogram's record may carry an exemplar, a short set of labels naming what was
 * measured (an order id, a trace id), as OpenMetrics has them. The record has RS_FLAG_EXEMPLAR and
 * `exemplar_length`, 1 to RS_EXEMPLAR_MAX bytes; the exemplar's bytes follow it in the lane's next
 * ceil(exemplar_length / 16) slots, each an "exemplar record": kind RS_KIND_EXEMPLAR, `metric` the
 * value record's, `sequence` its own cursor, flags and `exemplar_length` zero, and 16 of the bytes
 * in `timestamp_ns` then `value` (the bytes as they lie in memory, the last record's zero-padded).
 * The producer writes the value record and its exemplar records, then publishes them all with one
 * release store of `write_cursor`: a reader sees all of them or none. A lane without room for all
 * of them drops the record whole (one drop, counted as any). The bytes: "key=value" pairs joined
 * by '\n', keys as names, unique, values UTF-8 without '\n' or NUL (`order_id=A17`), at most
 * RS_EXEMPLAR_MAX bytes in all. A producer never writes a longer or malformed one, nor a cut one:
 * it records the value without it and counts the exemplar in the metric cell's `exemplars_refused`
 * (an atomic add), as it does an exemplar given to a signed histogram, whose values carry none
 * (format 4; a binding's strict mode, for tests, refuses the call instead and writes nothing). A
 * reader keeps the value of a record whose exemplar is malformed and counts the exemplar as
 * rejected. Readers of 0.3 and before count the value as any other
 * and skip each exemplar record as one of a kind its metric does not have (counted in their
 * ringside_ring_records_rejected_total): they lose no value, and read the file as before.
 *
 * SAMPLING AND GATHERING (histograms only): a lane that would otherwise fill before its consumer
 * drains it writes 1 record in 2^L calls of each histogram and *gathers* the others: a gathered
 * call writes no record, but is added, by the lane's holder, to its metric's GATHER CELL in the
 * lane (rs_gather_cell: calls, sum, latest value, and the largest value not yet taken), in shared
 * memory where the consumer reads it at every drain. So every call is counted within one drain
 * whatever its thread does afterwards (it idles, blocks, exits or is killed), and a histogram's
 * count, sum and largest value are exact for every call not dropped:
 *     count == records written (each one call) + `calls` of its gather cells
 *     sum   == the records' values + `sum` of its gather cells
 *     max   == the largest of the records' values and of the values taken from `max`
 * What a producer does:
 * - Where sampling starts: never while a lane holds fewer than `sample_above` records (the
 *   producer line: half the lane by default, 0 when the producer never samples). Past that line
 *   the producer looks at the lane (the consumer's cursor, and CLOCK_MONOTONIC) every 1/64 of the
 *   lane's records, and measures what the lane gains (records held, net of the consumer's drains)
 *   over the consumer's `drain_interval_ns` (the consumer line: the longest it expects to leave a
 *   filling lane undrained; RS_DEFAULT_DRAIN_INTERVAL_NS when 0): its reserve R is what it gained
 *   over the last whole interval, or since the current one began if that is more, at least 1/64
 *   of the lane and at most 1/32 (both at least RS_RESERVE_MIN, and at most what lies above
 *   `sample_above`). Sampling starts when the
 *   lane holds capacity - R records or more: where, gaining as it did, it would be full before the
 *   consumer's next drain. Below that, every call is written exactly, record by record: whatever
 *   the consumer does, a burst of up to 31/32 of a lane's capacity is recorded exactly, and a
 *   lane the consumer keeps up with is never sampled.
 * - The level L: 0 below capacity - R; past it, 1 more for each eighth of R (rounded down to a
 *   power of two records), at most RS_WEIGHT_LOG2_MAX (15), and 15 once the lane is full (a call
 *   written then could only be dropped). A level every two records or more leaves more records
 *   beside the calls gathered, the sample their quantiles come from: a burst at 10 times what
 *   the lane drains keeps one call in 11, where a level a record kept one in 14. While L > 0 the
 *   producer reads the consumer's cursor at every call, so L follows the fill call by call, and
 *   sampling stops as soon as the lane holds fewer than capacity - R records (R is measured again
 *   at the next look).
 * - Per lane and metric, a call is written when the calls of its metric on its lane since that
 *   metric's last record there, this one included, are a power of two and at least 2^L; the record
 *   carries k = log2(those calls) in its flags (RS_FLAG_WEIGHT_SHIFT): it stands for the 2^k - 1
 *   calls gathered before it, which a reader places among the values of the records near it
 *   (the collector: spread evenly over its lane's last 16 records of the metric, weighted or not,
 *   itself the newest; quantiles from a sample of the calls: see docs/format.md for the bound measured,
 *   drifting bursts included). Every other call is gathered: the
 *   holder adds 1 to `calls`, the value to `sum` (modulo 2^64), stores it in `latest`, and raises
 *   `max` to it if it is larger (an atomic compare-and-swap: the consumer takes `max` by exchanging
 *   it with 0). A call with an exemplar is sampled as a unit (a gathered one keeps no exemplar).
 * - A written record whose k > 0 that does not fit is dropped as any record: one call, counted in
 *   `dropped_total` and its lane cell (the calls gathered before it are counted in the gather cell).
 * - Nothing is left to write when sampling stops or a thread lets go of its lane: gathered calls
 *   are already counted. Gathered calls whose records never come (the lane stopped sampling, the
 *   thread went idle) are placed by the reader once the lane is drained: the collector spreads
 *   them over those recent records' values and the gather cell's `latest`.
 * - Only while the consumer says it reads gather cells: `weights_reader_pid` (the consumer line)
 *   equals `consumer_pid`, non-zero. A consumer that reads them stores its pid in both at attach;
 *   the word outlives a consumer that dies (the lock goes, the pids stay). A producer that sees
 *   another word drops when full, as without sampling. (Readers that do not consume, such as a
 *   dump, show k and the cells.)
 * - Gauges are never sampled: their records feed a window's min and max. Counters write none.
 * - DROPPED VALUES: a histogram's record that is dropped adds its value to its gather cell's
 *   `dropped_sum` and raises `dropped_max` (the holder's plain stores); one dropped by a thread
 *   without a lane adds to its metric cell's `unlaned_sum` and raises `unlaned_max` (atomically).
 *   An operator sees what a full lane hid: how many, their sum and the largest.
 * Hence, per lane and histogram, exactly: calls (after `sample_every`) == records written + the
 * gather cell's `calls` + the lane cell (dropped). No call is held anywhere a reader cannot see.
 * The holder stores a gathered call's `sum` and `latest`, then `calls` and its lane header's
 * `gathered` (the sum of the lane's cells' `calls`) with release ordering. A consumer loads
 * `write_cursor` (acquire) and drains the records below it, then loads `gathered` (acquire) and,
 * when it moved, each histogram's `calls` (acquire) and `sum`, takes `max` (an exchange with 0),
 * and places the calls that no record's weight carried at `latest`. A cell read between two of a
 * call's stores may show its count before its value: the next read shows both.
 * THREAD NAMES: a thread that claims a lane writes its name (pthread_getname_np, or the
 * language's own name for its thread) into the lane's `thread_name` before it stores `state`,
 * NUL-padded, at most RS_THREAD_NAME_MAX bytes of UTF-8 (a longer name is cut at a character's
 * boundary: it is a label for humans, not data). A reader shows it beside `owner_tid`.
 *
 * DOORBELL: a consumer that sleeps is woken by the first record, increment or gauge written
 * after it fell asleep, instead of at its next poll, through the header's `doorbell` (0x140, a
 * uint32 alone on its cache line, so that a producer's load of it stays a cache hit while it does
 * not change):
 * - The consumer, before it sleeps: stores 1 in the `doorbell` of each file it will be woken by,
 *   then makes every thread of every producer that rings pass a full barrier
 *   (membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)), then looks at every lane's `write_cursor`,
 *   `gathered` and `cell_writes` again, and sleeps only if none moved. It waits with a
 *   FUTEX_WAIT (or FUTEX_WAITV, 128 words at most a wait: a wait a thread) on the words it set,
 *   expecting 1, for as long as it likes. Awake, it may leave its words at 1: while a word
 *   still holds the 1 stored before a look that found nothing, no producer of that file wrote
 *   since (one that did took the 1), so the consumer need not look at those lanes again, nor
 *   store the 1 again before its next sleep; a producer that writes while it is awake rings all
 *   the same (one FUTEX_WAKE, harmless). It stores 0 in a word it no longer waits on.
 * - A producer, after each record it publishes (the release store of `write_cursor`) and each
 *   increment (of `cell_writes`): loads `doorbell` (relaxed); when it is not 0, exchanges it
 *   with 0 and, if it took the 1, wakes its waiters (FUTEX_WAKE on the word, not private: one
 *   system call a sleep, never a wait); a producer whose threads never write at once (Python's,
 *   under its lock) may store 0 instead: a second wake is harmless. Otherwise the call pays that
 *   load and a branch.
 * - No wake is lost: the producer's store of its cursor and its load of `doorbell` need no fence
 *   of their own, because the consumer's membarrier puts a full barrier on every running thread
 *   of the processes registered for it (a thread not running passed one when it was switched
 *   out): either the consumer's look sees the cursor, or the producer's load sees the 1.
 * - A producer process rings only once it registered for that barrier
 *   (MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, once per process, at its first attach), and says
 *   so in `rings_doorbell` (1) when it attaches; a process that could not register stores 0 and
 *   never rings. A consumer polls the files whose producer does not ring; the others it still
 *   looks at now and then (a producer that died mid-ring, a file the doorbell cannot reach): the
 *   collector wakes at its poll while any file is polled, else every second (or its poll, if
 *   longer), and then looks at the lanes of every word it finds 0, and at least every 10 s at all.
 * - Nobody but the consumer stores 1; a producer of an older revision never reads the word (its
 *   records are drained at the poll), and a consumer of an older one never sets it (the producer
 *   never rings). Any uint32 is read as "set" or "not": a 1 planted by another writer of the file
 *   costs its producers one FUTEX_WAKE, once.
 *
 * WRITING WITHOUT A C COMPILER: every shared field is an aligned 32- or 64-bit integer. A
 * producer in another language needs plain loads and stores plus the orderings written here
 * (release for `version`, `lanes_allocated`, `metric_count`, `write_cursor`, `state` and
 * `gauge_set`; acquire for `read_cursor`), which x86-64's ordinary stores and loads provide, and
 * an atomic add for `unlaned` (or a lock of its own: only its own threads write the file).
 *
 * Nothing read from the file is trusted by a consumer: every size, cursor, index, length and
 * string is checked before use.
 */
#ifndef RINGSIDE_H
#define RINGSIDE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RS_INLINE static inline __attribute__((always_inline))

/* C11 spells it _Static_assert, C++11 static_assert: the layout checks hold in both. */
#ifdef __cplusplus
#define RS_STATIC_ASSERT(condition, message) static_assert(condition, message)
#else
#define RS_STATIC_ASSERT(condition, message) _Static_assert(condition, message)
#endif

/* MARK: - Constants */

/** "RINGSIDE" read as a little-endian 64-bit integer. */
#define RS_MAGIC 0x45444953474E4952ULL
#define RS_FORMAT_VERSION 4u
/** The oldest version a reader of this header reads (see READY). */
#define RS_FORMAT_VERSION_MIN 3u

#define RS_HEADER_SIZE 4096u
#define RS_RECORD_SIZE 32u
#define RS_REGISTRY_ENTRY_SIZE 512u
#define RS_METRIC_CELL_SIZE 64u
#define RS_GATHER_CELL_SIZE 64u
#define RS_LANE_HEADER_SIZE 256u
/** Lanes and the cells before them start on page boundaries, so each lane can be mapped alone. */
#define RS_PAGE_SIZE 4096u

#define RS_NAME_MAX 104u
#define RS_LABELS_MAX 256u
#define RS_HELP_MAX 128u

/** 64K records, 2 MiB a lane: a bot's default, since its memory grows with its threads. */
#define RS_DEFAULT_LANE_CAPACITY_LOG2 16u
#define RS_MIN_CAPACITY_LOG2 4u
#define RS_MAX_CAPACITY_LOG2 28u
#define RS_DEFAULT_REGISTRY_CAPACITY 256u
#define RS_MAX_REGISTRY_CAPACITY 4096u
/** Lanes of a bot: threads recording at the same time. Past it a thread's records are counted
    as dropped (its counter increments and gauge values are still kept: see CELLS). */
#define RS_DEFAULT_MAX_LANES 64u
#define RS_MAX_LANES 1024u

#define RS_LOCK_BYTE_PRODUCER 0
#define RS_LOCK_BYTE_CONSUMER 1

/** File name prefix: bot "bot-a" lives in "<dir>/ringside.bot-a". */
#define RS_FILE_PREFIX "ringside."
/** Between a bot's name and a worker's pid: worker 4242 of "bot-a" writes "<dir>/ringside.bot-a@4242". */
#define RS_WORKER_SEPARATOR "@"
/** Between a worker's pid and the random number of a name it took because its own was unusable
    (see WORKERS): "<dir>/ringside.bot-a@4242.3141592653". */
#define RS_WORKER_SUFFIX_SEPARATOR "."
/** Random names a worker tries, past its own, before it gives up (see WORKERS). */
#define RS_WORKER_NAME_ATTEMPTS 8u
/** Worker files of a bot before a new worker attaches a gone worker's file instead (see WORKERS). */
#define RS_DEFAULT_MAX_WORKERS 256u
#define RS_MAX_WORKERS 65536u
#define RS_NAME_LENGTH_MAX 200u
/** An exemplar's bytes at the most (see EXEMPLARS): 4 exemplar records after its value's. */
#define RS_EXEMPLAR_MAX 64u
/** An exemplar's bytes in each exemplar record. */
#define RS_EXEMPLAR_BYTES_PER_RECORD 16u
/** A lane's thread name at the most, in bytes (see THREAD NAMES). */
#define RS_THREAD_NAME_MAX 32u

/** Metric kinds, as stored in the registry and in each record. */
typedef enum {
    RS_KIND_COUNTER = 1,   /* lane cells: the sum of increments; no records */
    RS_KIND_GAUGE = 2,     /* metric cell: the last value; records: the bits of an IEEE 754 double */
    RS_KIND_HISTOGRAM = 3, /* records: an observation in the metric's unit (unsigned) */
    RS_KIND_EXEMPLAR = 4,  /* records only, never a metric's: an exemplar's bytes (see EXEMPLARS) */
} rs_kind;

/** A histogram's values: whole numbers of steps, unsigned (format 3's only form) or signed (see VALUES). */
typedef enum {
    RS_FORM_UNSIGNED = 0,
    RS_FORM_SIGNED = 1,
} rs_value_form;
/** The steps a metric's `scale` may choose: 10^-18 to 10^18 of its unit. */
#define RS_SCALE_MIN (-18)
#define RS_SCALE_MAX 18
/** A signed value's offset binary: the top bit flipped (see VALUES). */
#define RS_OFFSET_BINARY_BIAS 0x8000000000000000ULL
/** A metric cell's `control` word, and the header's `bot_control` (see CONTROL). */
#define RS_CONTROL_OFF 0x80000000u
#define RS_CONTROL_BOT_OFF 0x40000000u
#define RS_CONTROL_SAMPLE 0x1Fu

/** Units of a metric's values. */
typedef enum {
    RS_UNIT_NONE = 0,
    RS_UNIT_NANOSECONDS = 1,
    RS_UNIT_MICROSECONDS = 2,
    RS_UNIT_MILLISECONDS = 3,
    RS_UNIT_SECONDS = 4,
    RS_UNIT_BYTES = 5,
} rs_unit;
#define RS_UNIT_LAST RS_UNIT_BYTES

/** How a reader merges a gauge's values across the workers of a bot (see WORKERS), as declared
    at registration. A bot of one process has one value: every policy shows it. */
typedef enum {
    RS_MERGE_LAST = 0,       /* the value set last, by any worker (as across threads); the default */
    RS_MERGE_SUM = 1,        /* the sum of the live workers' last values (in flight, queue depth) */
    RS_MERGE_MAX = 2,        /* the largest of the live workers' last values */
    RS_MERGE_MIN = 3,        /* the smallest of the live workers' last values */
    RS_MERGE_PER_WORKER = 4, /* a series per live worker, labelled pid="<pid>" (the label is the reader's) */
} rs_gauge_merge;
#define RS_MERGE_POLICIES 5u /* policies 0 to 4; a reader refuses an entry with another */

/** Record flags. */
#define RS_FLAG_SPAN 0x01u     /* the value is a duration timed by the span clock (see CLOCKS) */
#define RS_FLAG_EXEMPLAR 0x02u /* exemplar records follow: `exemplar_length` bytes (see EXEMPLARS) */
/* Bits 2 and 3 are zero. Bits 4 to 7 hold k: 2^k - 1 calls of its metric were gathered on its lane
   since its metric's last record there (see SAMPLING); the record itself is one call. */
#define RS_FLAG_WEIGHT_SHIFT 4u
#define RS_FLAG_WEIGHT_MASK 0xF0u
/** The largest k a record holds: a weight of 32,768. */
#define RS_WEIGHT_LOG2_MAX 15u
/** The share of a lane, in percent, below which its histograms are never sampled by default (see SAMPLING). */
#define RS_DEFAULT_SAMPLE_ABOVE_PERCENT 50u
/** The consumer's drain interval a producer assumes when the consumer has not said (see SAMPLING). */
#define RS_DEFAULT_DRAIN_INTERVAL_NS 2000000u
/** A lane's fill is looked at every 2^-RS_LOOK_FRACTION_LOG2 of its records past `sample_above`. */
#define RS_LOOK_FRACTION_LOG2 6u
/** Sampling uses at most the top 2^-RS_RESERVE_FRACTION_LOG2 of a lane (see SAMPLING)... */
#define RS_RESERVE_FRACTION_LOG2 5u
/** ... and at least its top RS_RESERVE_MIN records (or what lies above `sample_above`): two a level. */
#define RS_RESERVE_MIN 16u

/** A lane's `state`. */
#define RS_LANE_UNUSED 0u  /* allocated, never claimed (a reader may see it briefly) */
#define RS_LANE_ACTIVE 1u  /* a live thread of the attached process writes it */
#define RS_LANE_RETIRED 2u /* its thread exited (or its process): free for the next thread */

/* MARK: - Layout */

/** The header page's first 448 bytes; the rest of the page is zero. */
typedef struct {
    /* 0x000: layout, written by the creator before `version` */
    uint64_t magic;                /* 0x000 RS_MAGIC */
    uint32_t version;              /* 0x008 RS_FORMAT_VERSION, stored last (release) */
    uint32_t header_size;          /* 0x00C RS_HEADER_SIZE */
    uint32_t record_size;          /* 0x010 RS_RECORD_SIZE */
    uint32_t capacity_log2;        /* 0x014 each lane holds 1 << capacity_log2 records */
    uint32_t registry_capacity;    /* 0x018 entries in the registry */
    uint32_t registry_entry_size;  /* 0x01C RS_REGISTRY_ENTRY_SIZE */
    uint64_t registry_offset;      /* 0x020 == header_size */
    uint64_t cells_offset;         /* 0x028 == registry_offset + registry_capacity * 512 */
    uint64_t lanes_offset;         /* 0x030 == cells_offset + registry_capacity * 64, rounded up to 4096 */
    uint64_t created_realtime_ns;  /* 0x038 CLOCK_REALTIME at creation */
    uint64_t created_monotonic_ns; /* 0x040 CLOCK_MONOTONIC at creation */
    uint64_t lane_size;            /* 0x048 == lane_records_offset + capacity * 32, rounded up to 4096 */
    uint32_t lane_records_offset;  /* 0x050 == lane_gather_offset + registry_capacity * 64, rounded up to 4096 */
    uint32_t max_lanes;            /* 0x054 1 to RS_MAX_LANES */
    uint32_t metric_cell_size;     /* 0x058 RS_METRIC_CELL_SIZE */
    uint32_t lane_header_size;     /* 0x05C RS_LANE_HEADER_SIZE */
    uint32_t lane_gather_offset;   /* 0x060 == 256 + registry_capacity * 8, rounded up to 64 */
    uint32_t gather_cell_size;     /* 0x064 RS_GATHER_CELL_SIZE */
    uint8_t layout_reserved[0x80 - 0x68];

    /* 0x080: the producer's line, written by the attached process */
    uint32_t lanes_allocated;      /* 0x080 lanes whose header is written (release store) */
    uint32_t metric_count;         /* 0x084 registry entries published (release store) */
    uint64_t heartbeat_ns;         /* 0x088 CLOCK_MONOTONIC_COARSE of the last attach or lane claim */
    uint64_t producer_start_ns;    /* 0x090 CLOCK_REALTIME when the process attached */
    int32_t producer_pid;          /* 0x098 pid of the process that attached last */
    uint32_t producer_attaches;    /* 0x09C how many times a process attached */
    uint64_t lanes_exhausted;      /* 0x0A0 times a thread found every lane taken (see CELLS) */
    uint64_t workers_refused;      /* 0x0A8 the bot's file only: processes refused a worker file (see
                                      WORKERS), each adding 1 atomically: the one field others write */
    uint32_t sample_above;         /* 0x0B0 records in a lane past which its histograms are sampled (see
                                      SAMPLING), as the attached process chose; 0: never */
    uint32_t rings_doorbell;       /* 0x0B4 1 while the attached process rings the doorbell (see DOORBELL);
                                      0: it never does (the consumer polls it) */
    uint8_t producer_reserved[0x100 - 0xB8];

    /* 0x100: the consumer's line */
    int32_t consumer_pid;          /* 0x100 pid of the consumer that attached last */
    int32_t weights_reader_pid;    /* 0x104 the same pid, stored after it by a consumer that reads weighted
                                      records (see SAMPLING); anything else: it does not */
    uint64_t consumer_heartbeat_ns;/* 0x108 CLOCK_MONOTONIC_COARSE of the last drain */
    uint64_t drain_interval_ns;    /* 0x110 the longest the consumer expects to leave a filling lane
                                      undrained (see SAMPLING); 0: not said */
    uint8_t consumer_reserved[0x140 - 0x118];

    /* 0x140: the doorbell's line (see DOORBELL), alone on it: a producer reads it at every call */
    uint32_t doorbell;             /* 0x140 1: the consumer sleeps and asks to be woken; else 0 */
    uint8_t doorbell_reserved[0x180 - 0x144];

    /* 0x180: the operator's line (see CONTROL): written by its tool only */
    uint32_t bot_control;          /* 0x180 RS_CONTROL_BOT_OFF while the bot is off, else 0 */
    uint8_t control_reserved[0x1C0 - 0x184];
} rs_header;

/** One registry entry (512 bytes). */
typedef struct {
    uint32_t index;         /* 0x000 this entry's position in the registry */
    uint8_t kind;           /* 0x004 rs_kind */
    uint8_t unit;           /* 0x005 rs_unit */
    uint8_t gauge_merge;    /* 0x006 rs_gauge_merge for a gauge; 0 for the other kinds */
    uint8_t form;           /* 0x007 rs_value_form: RS_FORM_SIGNED for a signed histogram, else 0 (see VALUES) */
    uint32_t sample_every;  /* 0x008 1 in N calls is written (1: every call; histograms only) */
    uint16_t name_length;   /* 0x00C */
    uint16_t labels_length; /* 0x00E */
    uint16_t help_length;   /* 0x010 */
    int8_t scale;           /* 0x012 a value is a whole number of 10^scale of the unit (histograms
                               and counters; RS_SCALE_MIN to RS_SCALE_MAX; 0 for gauges) */
    uint8_t reserved1;      /* 0x013 */
    uint32_t retired;       /* 0x014 even: live; odd: retired (see RETIRING A SERIES): the one word of a
                               published entry that changes (release stores, by its producer only) */
    char name[RS_NAME_MAX];     /* 0x018 */
    char labels[RS_LABELS_MAX]; /* 0x080 */
    char help[RS_HELP_MAX];     /* 0x180 */
} rs_registry_entry;

/** One metric's cell shared by every thread of the bot (64 bytes). */
typedef struct {
    uint64_t gauge_bits;    /* 0x00 gauges: the last value set (IEEE 754 bits), any thread */
    uint64_t gauge_set;     /* 0x08 gauges: 1 once a value was set (stored after gauge_bits, release) */
    uint64_t unlaned;       /* 0x10 from threads with no lane (atomic add): counters, increments;
                               histograms and gauges, records dropped */
    uint64_t unlaned_sum;   /* 0x18 histograms: the sum of the values dropped by threads with no lane
                               (atomic add, modulo 2^64) */
    uint64_t unlaned_max;   /* 0x20 histograms: the largest of them (atomic compare-and-swap) */
    uint64_t clamped;       /* 0x28 histograms and counters: values clamped or not recorded (see
                               VALUES; atomic add) */
    uint32_t control;       /* 0x30 the operator's switches (see CONTROL; written by its tool only) */
    uint32_t reserved0;     /* 0x34 */
    uint64_t exemplars_refused; /* 0x38 histograms: exemplars refused (malformed, too long, or given to
                               a signed histogram), their values recorded without them (see EXEMPLARS;
                               atomic add) */
} rs_metric_cell;

/** One histogram's gathered calls on one lane (64 bytes; see SAMPLING): written by the lane's
    holder, but for `max`, which the consumer takes. Cumulative over the lane's life but `max`. */
typedef struct {
    uint64_t calls;         /* 0x00 calls gathered: counted, written as no record (release store) */
    uint64_t sum;           /* 0x08 their values' sum, modulo 2^64 */
    uint64_t latest;        /* 0x10 the last one's value */
    uint64_t max;           /* 0x18 the largest gathered value the consumer has not taken (0: none):
                               raised by the holder (compare-and-swap), taken by the consumer (exchange) */
    uint64_t dropped_sum;   /* 0x20 the sum of the values of this histogram's records the lane dropped
                               (their count is the lane cell), modulo 2^64 */
    uint64_t dropped_max;   /* 0x28 the largest of them */
    uint64_t reserved[2];   /* 0x30 */
} rs_gather_cell;

/** A lane's header (256 bytes): its producer line, then its consumer line. */
typedef struct {
    /* 0x00: written only by the thread that holds the lane (and by the process when it hands
       the lane over) */
    uint64_t write_cursor;   /* 0x00 records published, ever (release store) */
    uint64_t dropped_total;  /* 0x08 records dropped because the lane was full */
    uint64_t heartbeat_ns;   /* 0x10 CLOCK_MONOTONIC_COARSE of the last record or claim */
    uint32_t state;          /* 0x18 RS_LANE_* (release store) */
    int32_t owner_tid;       /* 0x1C the kernel thread id holding it; 0 when retired */
    uint32_t claims;         /* 0x20 threads that have held this lane */
    uint32_t cell_writes;    /* 0x24 counter increments made through this lane, wrapping (see CELLS) */
    char thread_name[RS_THREAD_NAME_MAX]; /* 0x28 the holder's name, NUL-padded (see THREAD NAMES) */
    uint64_t gathered;       /* 0x48 calls gathered on this lane, all histograms (release store; see SAMPLING) */
    uint8_t producer_reserved[0x80 - 0x50];

    /* 0x80: written only by the consumer */
    uint64_t read_cursor;          /* 0x80 records consumed, ever (release store) */
    uint64_t consumer_heartbeat_ns;/* 0x88 CLOCK_MONOTONIC_COARSE of the last drain */
    uint8_t consumer_reserved[0x100 - 0x90];
} rs_lane_header;

/** One record (32 bytes). */
typedef struct {
    uint64_t timestamp_ns; /* 0x00 CLOCK_MONOTONIC ns when written (coarse clock; a span's end, an exemplar's precise: see CLOCKS) */
    uint64_t value;        /* 0x08 gauge double bits, or observation */
    uint64_t sequence;     /* 0x10 the record's cursor: lets a reader check slot and record agree */
    uint32_t metric;       /* 0x18 registry index */
    uint8_t kind;          /* 0x1C rs_kind, equal to the registry's */
    uint8_t flags;         /* 0x1D RS_FLAG_*, and k in bits 4 to 7: 2^k - 1 gathered calls before it */
    uint16_t exemplar_length; /* 0x1E with RS_FLAG_EXEMPLAR, the exemplar's bytes; else zero */
} rs_record;

/* The layout above is the format: every offset its comments give is checked here, so that a
 * compiler that lays a struct out otherwise stops the build instead of writing other files. */
#define RS_FIELD_AT(type, field, offset) \
    RS_STATIC_ASSERT(offsetof(type, field) == (offset), #type "." #field " at " #offset)
RS_STATIC_ASSERT(sizeof(rs_header) == 0x1C0, "rs_header is 448 bytes");
RS_FIELD_AT(rs_header, magic, 0x000);
RS_FIELD_AT(rs_header, version, 0x008);
RS_FIELD_AT(rs_header, header_size, 0x00C);
RS_FIELD_AT(rs_header, record_size, 0x010);
RS_FIELD_AT(rs_header, capacity_log2, 0x014);
RS_FIELD_AT(rs_header, registry_capacity, 0x018);
RS_FIELD_AT(rs_header, registry_entry_size, 0x01C);
RS_FIELD_AT(rs_header, registry_offset, 0x020);
RS_FIELD_AT(rs_header, cells_offset, 0x028);
RS_FIELD_AT(rs_header, lanes_offset, 0x030);
RS_FIELD_AT(rs_header, created_realtime_ns, 0x038);
RS_FIELD_AT(rs_header, created_monotonic_ns, 0x040);
RS_FIELD_AT(rs_header, lane_size, 0x048);
RS_FIELD_AT(rs_header, lane_records_offset, 0x050);
RS_FIELD_AT(rs_header, max_lanes, 0x054);
RS_FIELD_AT(rs_header, metric_cell_size, 0x058);
RS_FIELD_AT(rs_header, lane_header_size, 0x05C);
RS_FIELD_AT(rs_header, lane_gather_offset, 0x060);
RS_FIELD_AT(rs_header, gather_cell_size, 0x064);
RS_FIELD_AT(rs_header, lanes_allocated, 0x080);
RS_FIELD_AT(rs_header, metric_count, 0x084);
RS_FIELD_AT(rs_header, heartbeat_ns, 0x088);
RS_FIELD_AT(rs_header, producer_start_ns, 0x090);
RS_FIELD_AT(rs_header, producer_pid, 0x098);
RS_FIELD_AT(rs_header, producer_attaches, 0x09C);
RS_FIELD_AT(rs_header, lanes_exhausted, 0x0A0);
RS_FIELD_AT(rs_header, workers_refused, 0x0A8);
RS_FIELD_AT(rs_header, sample_above, 0x0B0);
RS_FIELD_AT(rs_header, rings_doorbell, 0x0B4);
RS_FIELD_AT(rs_header, consumer_pid, 0x100);
RS_FIELD_AT(rs_header, weights_reader_pid, 0x104);
RS_FIELD_AT(rs_header, consumer_heartbeat_ns, 0x108);
RS_FIELD_AT(rs_header, drain_interval_ns, 0x110);
RS_FIELD_AT(rs_header, doorbell, 0x140);
RS_FIELD_AT(rs_header, bot_control, 0x180);
RS_STATIC_ASSERT(sizeof(rs_registry_entry) == RS_REGISTRY_ENTRY_SIZE, "registry entry is 512 bytes");
RS_FIELD_AT(rs_registry_entry, index, 0x000);
RS_FIELD_AT(rs_registry_entry, kind, 0x004);
RS_FIELD_AT(rs_registry_entry, unit, 0x005);
RS_FIELD_AT(rs_registry_entry, gauge_merge, 0x006);
RS_FIELD_AT(rs_registry_entry, form, 0x007);
RS_FIELD_AT(rs_registry_entry, sample_every, 0x008);
RS_FIELD_AT(rs_registry_entry, name_length, 0x00C);
RS_FIELD_AT(rs_registry_entry, labels_length, 0x00E);
RS_FIELD_AT(rs_registry_entry, help_length, 0x010);
RS_FIELD_AT(rs_registry_entry, scale, 0x012);
RS_FIELD_AT(rs_registry_entry, name, 0x018);
RS_FIELD_AT(rs_registry_entry, labels, 0x080);
RS_FIELD_AT(rs_registry_entry, help, 0x180);
RS_STATIC_ASSERT(sizeof(rs_metric_cell) == RS_METRIC_CELL_SIZE, "a metric cell is 64 bytes");
RS_FIELD_AT(rs_metric_cell, gauge_bits, 0x00);
RS_FIELD_AT(rs_metric_cell, gauge_set, 0x08);
RS_FIELD_AT(rs_metric_cell, unlaned, 0x10);
RS_FIELD_AT(rs_metric_cell, unlaned_sum, 0x18);
RS_FIELD_AT(rs_metric_cell, unlaned_max, 0x20);
RS_FIELD_AT(rs_metric_cell, clamped, 0x28);
RS_FIELD_AT(rs_metric_cell, control, 0x30);
RS_FIELD_AT(rs_metric_cell, exemplars_refused, 0x38);
RS_STATIC_ASSERT(sizeof(rs_gather_cell) == RS_GATHER_CELL_SIZE, "a gather cell is 64 bytes");
RS_FIELD_AT(rs_gather_cell, calls, 0x00);
RS_FIELD_AT(rs_gather_cell, sum, 0x08);
RS_FIELD_AT(rs_gather_cell, latest, 0x10);
RS_FIELD_AT(rs_gather_cell, max, 0x18);
RS_FIELD_AT(rs_gather_cell, dropped_sum, 0x20);
RS_FIELD_AT(rs_gather_cell, dropped_max, 0x28);
RS_STATIC_ASSERT(sizeof(rs_lane_header) == RS_LANE_HEADER_SIZE, "a lane header is 256 bytes");
RS_FIELD_AT(rs_lane_header, write_cursor, 0x00);
RS_FIELD_AT(rs_lane_header, dropped_total, 0x08);
RS_FIELD_AT(rs_lane_header, heartbeat_ns, 0x10);
RS_FIELD_AT(rs_lane_header, state, 0x18);
RS_FIELD_AT(rs_lane_header, owner_tid, 0x1C);
RS_FIELD_AT(rs_lane_header, claims, 0x20);
RS_FIELD_AT(rs_lane_header, cell_writes, 0x24);
RS_FIELD_AT(rs_lane_header, thread_name, 0x28);
RS_FIELD_AT(rs_lane_header, gathered, 0x48);
RS_FIELD_AT(rs_lane_header, read_cursor, 0x80);
RS_FIELD_AT(rs_lane_header, consumer_heartbeat_ns, 0x88);
RS_STATIC_ASSERT(sizeof(rs_record) == RS_RECORD_SIZE, "a record is 32 bytes");
RS_FIELD_AT(rs_record, timestamp_ns, 0x00);
RS_FIELD_AT(rs_record, value, 0x08);
RS_FIELD_AT(rs_record, sequence, 0x10);
RS_FIELD_AT(rs_record, metric, 0x18);
RS_FIELD_AT(rs_record, kind, 0x1C);
RS_FIELD_AT(rs_record, flags, 0x1D);
RS_FIELD_AT(rs_record, exemplar_length, 0x1E);
#undef RS_FIELD_AT

/** Rounds up to a whole page (RS_PAGE_SIZE). */
RS_INLINE uint64_t rs_page_round_up(uint64_t bytes) { return (bytes + RS_PAGE_SIZE - 1) & ~(uint64_t)(RS_PAGE_SIZE - 1); }

/** The geometry every field of the layout must equal, computed from the three free choices. */
typedef struct {
    uint64_t registry_offset, cells_offset, lanes_offset, lane_size;
    uint32_t lane_gather_offset, lane_records_offset;
} rs_geometry;

RS_INLINE rs_geometry rs_geometry_of(uint32_t capacity_log2, uint32_t registry_capacity) {
    rs_geometry g;
    g.registry_offset = RS_HEADER_SIZE;
    g.cells_offset = g.registry_offset + (uint64_t)registry_capacity * RS_REGISTRY_ENTRY_SIZE;
    g.lanes_offset = rs_page_round_up(g.cells_offset + (uint64_t)registry_capacity * RS_METRIC_CELL_SIZE);
    /* The gather cells start on a cache line of their own, after the lane cells. */
    g.lane_gather_offset = (uint32_t)((RS_LANE_HEADER_SIZE + (uint64_t)registry_capacity * sizeof(uint64_t) + 63) & ~(uint64_t)63);
    g.lane_records_offset = (uint32_t)rs_page_round_up(g.lane_gather_offset + (uint64_t)registry_capacity * RS_GATHER_CELL_SIZE);
    g.lane_size = rs_page_round_up(g.lane_records_offset + ((uint64_t)1 << capacity_log2) * RS_RECORD_SIZE);
    return g;
}

/* MARK: - Atomics on shared memory */

/* Acquire pairs with the other side's release store: what was written before it is visible. */
RS_INLINE uint64_t rs_load_acquire_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
RS_INLINE uint32_t rs_load_acquire_u32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
RS_INLINE uint64_t rs_load_relaxed_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
RS_INLINE uint32_t rs_load_relaxed_u32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
RS_INLINE int32_t rs_load_relaxed_i32(const int32_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
/** The operator's tool's write of a control word (see CONTROL): clears `clear`, then sets `set`,
    in one atomic step (no other writer's bits are lost); returns the word as it was. */
RS_INLINE uint32_t rs_control_update(uint32_t *p, uint32_t clear, uint32_t set) {
    uint32_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(p, &old, (old & ~clear) | set, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    return old;
}
/** The full fence CONTROL puts between a store of `bot_control` and a read of `metric_count`. */
RS_INLINE void rs_control_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
RS_INLINE void rs_store_release_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
RS_INLINE void rs_store_release_u32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
RS_INLINE void rs_store_relaxed_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
RS_INLINE void rs_store_relaxed_u32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
RS_INLINE void rs_store_relaxed_i32(int32_t *p, int32_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
RS_INLINE void rs_add_relaxed_u64(uint64_t *p, uint64_t v) { (void)__atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
/** Raises `*p` to `v` if it is smaller (a compare-and-swap loop; relaxed: a figure, ordering nothing). */
RS_INLINE void rs_raise_relaxed_u64(uint64_t *p, uint64_t v) {
    uint64_t seen = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v > seen && !__atomic_compare_exchange_n(p, &seen, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}
/** Takes `*p`, leaving 0 (an exchange: a gather cell's `max`, by its consumer). */
RS_INLINE uint64_t rs_take_relaxed_u64(uint64_t *p) { return __atomic_exchange_n(p, 0, __ATOMIC_RELAXED); }
/** Orders the plain loads before it ahead of the loads after it (a seqlock reader's fence). */
RS_INLINE void rs_fence_acquire(void) { __atomic_thread_fence(__ATOMIC_ACQUIRE); }

/* MARK: - Clocks */

/** CLOCK_MONOTONIC_COARSE in nanoseconds: the records' timestamps. */
RS_INLINE uint64_t rs_clock_coarse_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/** CLOCK_MONOTONIC in nanoseconds: the precise clock (spans' on a machine without a usable TSC). */
RS_INLINE uint64_t rs_clock_precise_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/** CLOCK_REALTIME in nanoseconds: wall time, for humans. */
RS_INLINE uint64_t rs_clock_realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

/** The TSC (rdtsc, not serialising: the instructions around it may run before or after it, tens
    of cycles that no span of interest notices); 0 on a CPU that is not x86-64. */
RS_INLINE uint64_t rs_clock_tsc(void) {
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    return 0;
#endif
}

/* MARK: - The span clock (see THE SPAN CLOCK; the calibration is ringside.c's) */

/** What spans start on (rs_span_clock). */
#define RS_SPAN_CLOCK_UNSET 0u     /* not chosen yet: the first attach or span chooses */
#define RS_SPAN_CLOCK_MONOTONIC 1u /* CLOCK_MONOTONIC */
#define RS_SPAN_CLOCK_TSC 2u       /* the TSC, converted to CLOCK_MONOTONIC nanoseconds at the end */

/** Set in a span's start read on the TSC, clear in one read on CLOCK_MONOTONIC (whose nanoseconds
    reach 2^63 after 292 years): the end reads the clock the start did. */
#define RS_SPAN_TSC_BIT 0x8000000000000000ULL
/** The widest an anchor's bracket may be (two CLOCK_MONOTONIC reads around a TSC read), in ns. */
#define RS_SPAN_CLOCK_ANCHOR_MAX_NS 1000u
/** How far a span's end (its record's timestamp_ns) may be from CLOCK_MONOTONIC, in ns (see THE BOUND). */
#define RS_SPAN_CLOCK_BOUND_NS 5000u
/** The longest interval between anchors while spans end, in ns. */
#define RS_SPAN_CLOCK_REFRESH_NS 1000000000u

/** One calibration: an anchor and the rate. The latch holds two copies. */
typedef struct {
    uint64_t tsc;      /* the anchor: a TSC reading... */
    uint64_t ns;       /* ...and CLOCK_MONOTONIC in ns at that instant */
    uint64_t mult;     /* ns per tick, times 2^32 (0: not calibrated) */
    uint64_t refresh;  /* ticks after `tsc` past which a span's end takes a new anchor (0: not calibrated) */
    uint64_t anchors;  /* anchors taken in this process, this one included */
    uint64_t width_ns; /* this anchor's bracket: its CLOCK_MONOTONIC is within half of it */
} rs_tsc_calibration;

/** The process's span clock: what every span's start and end read (ringside.c defines it,
    128-byte aligned, and is its only writer). */
typedef struct {
    uint32_t clock;              /* RS_SPAN_CLOCK_*: what rs_span_clock_start reads */
    uint32_t sequence;           /* the latch's count: readers use copy[sequence & 1] */
    uint64_t reserved;
    rs_tsc_calibration copy[2];  /* the latch: the writer changes the copy readers are not told to use */
} rs_span_clock_state;

extern rs_span_clock_state rs_span_clock_shared;

/** A span's duration and its end. */
typedef struct {
    uint64_t elapsed_ns; /* the span's duration in ns (0 if its end read less than its start) */
    uint64_t end_ns;     /* its end, CLOCK_MONOTONIC ns (within RS_SPAN_CLOCK_BOUND_NS on the TSC) */
} rs_span_time;

/** The cold paths (ringside.c): the first span before any attach chose the clock; a span's end
    when the calibration is due a new anchor, or the latch moved while it read. */
uint64_t rs_span_clock_start_slow(void);
rs_span_time rs_span_clock_end_slow(uint64_t start, uint64_t now);

/** TSC ticks in ns at `mult` (ns per tick times 2^32): one 64 by 64 multiply and a shift. */
RS_INLINE uint64_t rs_tsc_to_ns(uint64_t ticks, uint64_t mult) {
    return (uint64_t)(((unsigned __int128)ticks * mult) >> 32);
}

/**
 * A span's start: the TSC with RS_SPAN_TSC_BIT, or CLOCK_MONOTONIC in ns, as the process's span
 * clock is. Nothing else is read or converted; rs_span_clock_end finishes the span.
 */
RS_INLINE uint64_t rs_span_clock_start(void) {
    /* Relaxed: a start on the TSC needs no calibration, and its end finds the calibration (the latch). */
    uint32_t clock = rs_load_relaxed_u32(&rs_span_clock_shared.clock);
#if defined(__x86_64__)
    if (__builtin_expect(clock == RS_SPAN_CLOCK_TSC, 1)) return __builtin_ia32_rdtsc() | RS_SPAN_TSC_BIT;
#endif
    if (clock == RS_SPAN_CLOCK_MONOTONIC) return rs_clock_precise_ns();
    return rs_span_clock_start_slow();
}

/**
 * The end of the span begun at `start` (rs_span_clock_start, or a rs_clock_precise_ns reading):
 * its duration, and its end in CLOCK_MONOTONIC ns, read on the clock the start was read on. On the
 * TSC: one TSC read, the latch's current copy, a multiply and a shift for each; only reads.
 */
RS_INLINE rs_span_time rs_span_clock_end(uint64_t start) {
    rs_span_time time;
#if defined(__x86_64__)
    if (__builtin_expect((start & RS_SPAN_TSC_BIT) != 0, 1)) {
        uint64_t now = __builtin_ia32_rdtsc();
        /* Acquire: the copy the count names was whole when the count was stored. */
        uint32_t sequence = rs_load_acquire_u32(&rs_span_clock_shared.sequence);
        const rs_tsc_calibration *c = &rs_span_clock_shared.copy[sequence & 1];
        uint64_t tsc = rs_load_relaxed_u64(&c->tsc), ns = rs_load_relaxed_u64(&c->ns);
        uint64_t mult = rs_load_relaxed_u64(&c->mult), refresh = rs_load_relaxed_u64(&c->refresh);
        rs_fence_acquire(); /* the copy is read before the count is read again */
        uint64_t since = now - tsc; /* past `refresh` also when the anchor is later than `now` */
        if (__builtin_expect(since < refresh && sequence == rs_load_relaxed_u32(&rs_span_clock_shared.sequence), 1)) {
            uint64_t begun = start & ~RS_SPAN_TSC_BIT;
            time.elapsed_ns = now > begun ? rs_tsc_to_ns(now - begun, mult) : 0;
            time.end_ns = ns + rs_tsc_to_ns(since, mult);
            return time;
        }
        return rs_span_clock_end_slow(start, now);
    }
#endif
    time.end_ns = rs_clock_precise_ns();
    time.elapsed_ns = time.end_ns >= start ? time.end_ns - start : 0;
    return time;
}

/**
 * Chooses the process's span clock and calibrates the TSC if it is chosen (see THE SPAN CLOCK):
 * once; later calls return at once. rs_bot_attach calls it, so the first span finds it done. It
 * takes a millisecond (it sleeps between the first two anchors) and registers a fork handler.
 */
void rs_span_clock_init(void);

/** The clock spans start on now: RS_SPAN_CLOCK_TSC or RS_SPAN_CLOCK_MONOTONIC (chosen if it was not). */
uint32_t rs_span_clock(void);

/**
 * Makes spans started from now on read `clock` (spans under way end on the clock they started
 * on): for tests, benchmarks, and a program that wants CLOCK_MONOTONIC whatever the environment
 * says. Returns 0, or -1 when asked for RS_SPAN_CLOCK_TSC on a machine whose TSC is not usable (or
 * for no clock at all), changing nothing.
 */
int rs_span_clock_select(uint32_t clock);

/**
 * Says which clock spans start on and why, for an operator, into `buffer` (NUL-terminated, cut
 * to `size`): "tsc: invariant TSC, clocksource tsc; 2.4454 GHz, 12 anchors, the last within 30 ns",
 * or "monotonic: the clocksource is kvm-clock, not tsc". Returns the length it wanted, as snprintf.
 */
int rs_span_clock_describe(char *buffer, size_t size);

/** A consistent copy of the calibration spans on the TSC end with (zeros before the first). */
void rs_span_clock_calibration(rs_tsc_calibration *out);

/* MARK: - The producer's hot path */

/**
 * One lane's adaptive sampling (see SAMPLING), in the writer's own memory: the thread that holds
 * the lane is its only user. ringside_producer.c makes it when the lane is first handed over and
 * keeps it with the lane, from holder to holder. What it gathers lives in the lane's gather cells.
 */
typedef struct {
    uint32_t *calls;         /* per metric: calls since its last record on this lane (0: none) */
    const rs_header *header; /* the file's header: the consumer's word and drain interval */
    uint64_t above;          /* `sample_above`: the lane is never sampled below it */
    uint64_t reserve;        /* R: sampling starts at capacity - R records */
    uint64_t look_fill;      /* the fill when the current drain interval began (see SAMPLING) */
    uint64_t look_ns;        /* CLOCK_MONOTONIC then; 0: none since the lane was below `above` */
    uint64_t interval_gain;  /* what the lane gained over the last whole drain interval */
    uint32_t step_log2;      /* one level more for each 2^step_log2 records past capacity - R */
    uint32_t level;          /* L: a call is written once its metric's calls reach 2^L (a power of two) */
    uint32_t open;           /* metrics with calls since their last record */
    uint32_t open_below;     /* every such metric is below this */
    uint32_t weighs;         /* the consumer read gather cells when the lane was last looked at */
    uint32_t reserved;
} rs_sampling;

/**
 * One writer's view of one lane (in the writer's own memory, not in the file). The thread that
 * holds the lane is its only user. `records == NULL` means nothing can be written: telemetry is
 * disabled (`cells` and `shared` NULL too), or the thread found no free lane (`shared` set:
 * what it cannot write is counted there), or the process is a forked child (all NULL).
 */
typedef struct {
    rs_record *records;          /* the lane's record slots, or NULL (see above) */
    uint64_t *write_cursor;      /* &lane->write_cursor */
    const uint64_t *read_cursor; /* &lane->read_cursor */
    uint64_t *dropped_total;     /* &lane->dropped_total */
    uint64_t *heartbeat_ns;      /* &lane->heartbeat_ns */
    uint32_t *cell_writes;       /* &lane->cell_writes */
    uint64_t *cells;             /* the lane's cells, one per metric */
    rs_gather_cell *gather;      /* the lane's gather cells, one per metric */
    rs_metric_cell *shared;      /* the bot's metric cells */
    uint64_t mask;               /* capacity - 1 */
    uint64_t next;               /* the next cursor to publish (== *write_cursor) */
    uint64_t cached_read;        /* the consumer's cursor as last seen, re-read only when the lane
                                    looks full by it; set back while the lane may sample, so that
                                    the same test sends the writer to the slow path at its next
                                    look (every call while it samples) */
    uint32_t *sample_countdown;  /* per metric: calls left before the next written one */
    const uint32_t *sample_every;/* per metric: the registry's sample_every */
    rs_sampling *sampling;       /* the lane's adaptive sampling, or NULL: a full lane drops */
    uint32_t *doorbell;          /* &header->doorbell, or a word no one sets when the process does
                                    not ring (see DOORBELL) */
} rs_producer;

/**
 * THE one place a writer's view is wired to a lane (ringside.c): `lane` is the mapped lane
 * (`lane_gather_offset`, `lane_records_offset` and `capacity_log2` from the header), `shared` the
 * bot's metric cells, `sample_countdown` the writer's own row and `sample_every` the registry's,
 * `sampling` the lane's adaptive sampling (NULL: none), `doorbell` the file's (NULL: the process
 * does not ring: see DOORBELL). The view continues from the cursors the
 * lane holds. Every producer (the Swift `Bot`, C bots, the Python extension, the benchmark's
 * floor) gets its view from ringside_producer.c, which calls this.
 */
void rs_producer_init(rs_producer *p, rs_lane_header *lane, uint32_t lane_gather_offset, uint32_t lane_records_offset,
                      uint32_t capacity_log2, rs_metric_cell *shared, uint32_t *sample_countdown,
                      const uint32_t *sample_every, rs_sampling *sampling, uint32_t *doorbell);

/** Wakes the sleeping consumer (see DOORBELL): cold, once a sleep. */
void rs_producer_ring(rs_producer *p);

/** After a record is published or a counter moved: rings the doorbell if the consumer sleeps. */
RS_INLINE void rs_producer_check_doorbell(rs_producer *p) {
    /* Relaxed, and no fence: the consumer's membarrier orders it after the store before it. */
    if (__builtin_expect(rs_load_relaxed_u32(p->doorbell) != 0, 0)) rs_producer_ring(p);
}

/** Counts a record of `metric` that could not be kept for want of a lane (cold), with its value's
    sum and largest for a histogram (see SAMPLING: DROPPED VALUES). */
static __attribute__((noinline, cold, unused)) int rs_producer_lose(rs_producer *p, uint32_t metric, uint8_t kind,
                                                                    uint64_t value) {
    if (p->shared != NULL) {
        /* Atomic adds: threads without a lane share these. */
        rs_add_relaxed_u64(&p->shared[metric].unlaned, 1);
        if (kind == RS_KIND_HISTOGRAM) {
            rs_add_relaxed_u64(&p->shared[metric].unlaned_sum, value);
            rs_raise_relaxed_u64(&p->shared[metric].unlaned_max, value);
        }
    }
    return 0;
}

/** A timestamp the slow path reads itself, only if it writes a record (a gathered call needs none). */
#define RS_TIMESTAMP_NOW 0u

/**
 * The write past the fast path's check (ringside.c), for a lane that looks full by `cached_read`
 * (or is due a look while it may sample): reads the consumer's cursor again, applies SAMPLING to
 * a histogram's call (which may be gathered: 0, no record written), then writes the record, and
 * its exemplar's records when `exemplar` is not NULL, or counts it dropped. Returns 1 if written.
 * A `timestamp_ns` of RS_TIMESTAMP_NOW has it read the coarse clock, only for a record it writes.
 */
/**
 * Writes a histogram's call under the operator's sampling at `level` (see CONTROL): 1 call in
 * 2^level of `metric` on this lane is written (with its weight), the others gathered, while the
 * lane's consumer reads gather cells; otherwise, and at level 0, as rs_producer_write_at (with
 * RS_TIMESTAMP_NOW for now). Returns 1 if written. Only the lane's holder may call it.
 */
int rs_producer_write_sampled_at(rs_producer *p, uint32_t metric, uint8_t flags, uint64_t value, uint64_t timestamp_ns,
                                 uint32_t level);

int rs_producer_write_slow(rs_producer *p, uint32_t metric, uint8_t kind, uint8_t flags, uint64_t value,
                           uint64_t timestamp_ns, const char *exemplar, uint32_t length);

/**
 * Ends the lane's sampling for a holder about to let go of it (ringside_producer.c calls it at a
 * release, at thread exit and at detach): its gathered calls are already counted in its gather
 * cells, so nothing is written; the next holder starts at level 0.
 */
void rs_producer_end_sampling(rs_producer *p);

/** Writes a record's fields into slot `r`, at `cursor` (its sequence); not yet published. */
RS_INLINE void rs_producer_fill(rs_record *r, uint64_t cursor, uint32_t metric, uint8_t kind, uint8_t flags,
                                uint64_t value, uint64_t timestamp_ns, uint16_t exemplar_length) {
    r->timestamp_ns = timestamp_ns;
    r->value = value;
    r->sequence = cursor;
    r->metric = metric;
    r->kind = kind;
    r->flags = flags;
    r->exemplar_length = exemplar_length;
}

/** Exemplar records an exemplar of `length` bytes takes (see EXEMPLARS). */
RS_INLINE uint64_t rs_exemplar_records(uint32_t length) {
    return (length + RS_EXEMPLAR_BYTES_PER_RECORD - 1) / RS_EXEMPLAR_BYTES_PER_RECORD;
}

/** Writes an exemplar's `length` bytes into the exemplar records after the value's at `cursor`. */
RS_INLINE void rs_producer_fill_exemplar(rs_producer *p, uint64_t cursor, uint32_t metric, const char *exemplar,
                                         uint32_t length) {
    uint64_t extra = rs_exemplar_records(length);
    for (uint64_t k = 1; k <= extra; k++) {
        uint64_t bytes[2] = {0, 0};
        uint32_t offset = (uint32_t)(k - 1) * RS_EXEMPLAR_BYTES_PER_RECORD;
        uint32_t part = length - offset < RS_EXEMPLAR_BYTES_PER_RECORD ? length - offset : RS_EXEMPLAR_BYTES_PER_RECORD;
        __builtin_memcpy(bytes, exemplar + offset, part);
        rs_producer_fill(&p->records[(cursor + k) & p->mask], cursor + k, metric, RS_KIND_EXEMPLAR, 0, bytes[1], bytes[0], 0);
    }
}

/** Writes one record at `cursor` (== p->next, with room for it) and publishes it. */
RS_INLINE int rs_producer_publish(rs_producer *p, uint64_t cursor, uint32_t metric, uint8_t kind, uint8_t flags,
                                  uint64_t value, uint64_t timestamp_ns) {
    rs_producer_fill(&p->records[cursor & p->mask], cursor, metric, kind, flags, value, timestamp_ns, 0);
    p->next = cursor + 1;
    /* Release: the record's bytes are visible before the cursor that publishes them. */
    rs_store_release_u64(p->write_cursor, cursor + 1);
    rs_store_relaxed_u64(p->heartbeat_ns, timestamp_ns);
    rs_producer_check_doorbell(p);
    return 1;
}

/**
 * Writes one record stamped `timestamp_ns` (CLOCK_MONOTONIC nanoseconds), or counts a drop when
 * the lane is full; a histogram's call in a filling lane may be gathered (see SAMPLING). Never
 * blocks or allocates, and makes no system call but the doorbell's (see DOORBELL: once a consumer's
 * sleep). Returns 1 if written. Only the lane's holder may call
 * it. A span passes the end its span clock read, saving a clock read.
 */
RS_INLINE int rs_producer_write_at(rs_producer *p, uint32_t metric, uint8_t kind, uint8_t flags,
                                   uint64_t value, uint64_t timestamp_ns) {
    if (__builtin_expect(p->records == NULL, 0)) return rs_producer_lose(p, metric, kind, value);
    uint64_t cursor = p->next;
    /* The one test a record pays: the copy's setback makes it the next look's as well. */
    if (__builtin_expect(cursor - p->cached_read > p->mask, 0)) {
        return rs_producer_write_slow(p, metric, kind, flags, value, timestamp_ns, NULL, 0);
    }
    return rs_producer_publish(p, cursor, metric, kind, flags, value, timestamp_ns);
}

/** `rs_producer_write_at` stamped with the coarse clock: the usual way to write a record. The
    clock is read past the room test, so a call the slow path gathers (see SAMPLING) never reads it. */
RS_INLINE int rs_producer_write(rs_producer *p, uint32_t metric, uint8_t kind, uint8_t flags,
                                uint64_t value) {
    if (__builtin_expect(p->records == NULL, 0)) return rs_producer_lose(p, metric, kind, value); /* no clock read */
    uint64_t cursor = p->next;
    if (__builtin_expect(cursor - p->cached_read > p->mask, 0)) {
        return rs_producer_write_slow(p, metric, kind, flags, value, RS_TIMESTAMP_NOW, NULL, 0);
    }
    return rs_producer_publish(p, cursor, metric, kind, flags, value, rs_clock_coarse_ns());
}

/**
 * Writes a histogram's record with an exemplar (see EXEMPLARS): the value's record, then the
 * exemplar's `length` bytes (1 to RS_EXEMPLAR_MAX, not checked here: the callers check them) in
 * exemplar records, published together; or one counted drop when the lane has no room for all. In
 * a filling lane the call is sampled as a unit (see SAMPLING). Returns 1 if written. Only the
 * lane's holder may call it.
 */
RS_INLINE int rs_producer_write_exemplar(rs_producer *p, uint32_t metric, uint8_t flags, uint64_t value,
                                         uint64_t timestamp_ns, const char *exemplar, uint32_t length) {
    if (__builtin_expect(p->records == NULL, 0)) return rs_producer_lose(p, metric, RS_KIND_HISTOGRAM, value);
    uint64_t extra = rs_exemplar_records(length);
    uint64_t cursor = p->next;
    if (__builtin_expect(cursor + extra - p->cached_read > p->mask, 0)) {
        return rs_producer_write_slow(p, metric, RS_KIND_HISTOGRAM, flags, value, timestamp_ns, exemplar, length);
    }
    rs_producer_fill(&p->records[cursor & p->mask], cursor, metric, RS_KIND_HISTOGRAM, (uint8_t)(flags | RS_FLAG_EXEMPLAR),
                     value, timestamp_ns, (uint16_t)length);
    rs_producer_fill_exemplar(p, cursor, metric, exemplar, length);
    p->next = cursor + 1 + extra;
    /* Release: the records' bytes are visible before the cursor that publishes them. */
    rs_store_release_u64(p->write_cursor, cursor + 1 + extra);
    rs_store_relaxed_u64(p->heartbeat_ns, timestamp_ns);
    rs_producer_check_doorbell(p);
    return 1;
}

/**
 * Applies a metric's "1 in N" sampling: returns 1 when this call is the one of N to write.
 * Metrics registered with N == 1 always return 1.
 */
RS_INLINE int rs_producer_sample(rs_producer *p, uint32_t metric) {
    uint32_t left = p->sample_countdown[metric];
    if (__builtin_expect(left <= 1, 1)) {
        p->sample_countdown[metric] = p->sample_every[metric];
        return 1;
    }
    p->sample_countdown[metric] = left - 1;
    return 0;
}

/**
 * Records the span from `start` (rs_span_clock_start, or a rs_clock_precise_ns reading) to now,
 * in the histogram's unit (`ns_per_unit` nanoseconds: a span into a microsecond histogram is
 * recorded in microseconds), flagged as a span and stamped with its end (see CLOCKS). Every
 * producer's span call.
 */
RS_INLINE int rs_producer_record_span(rs_producer *p, uint32_t metric, int sampled, uint64_t ns_per_unit,
                                      uint64_t start) {
    rs_span_time time = rs_span_clock_end(start);
    uint64_t value = ns_per_unit > 1 ? time.elapsed_ns / ns_per_unit : time.elapsed_ns;
    if (sampled && !rs_producer_sample(p, metric)) return 0;
    return rs_producer_write_at(p, metric, RS_KIND_HISTOGRAM, RS_FLAG_SPAN, value, time.end_ns);
}

/** Adds `increment` to a counter: the lane's cell, or the shared `unlaned` for a thread without one. */
RS_INLINE void rs_producer_count(rs_producer *p, uint32_t metric, uint64_t increment) {
    uint64_t *cells = p->cells;
    if (__builtin_expect(cells != NULL, 1)) {
        /* Only this lane's owner writes its cells: a relaxed load and store is exact. */
        rs_store_relaxed_u64(&cells[metric], rs_load_relaxed_u64(&cells[metric]) + increment);
        /* Release: a reader that sees it move (acquire) sees the cell's new value (see CELLS). */
        rs_store_release_u32(p->cell_writes, rs_load_relaxed_u32(p->cell_writes) + 1);
        rs_producer_check_doorbell(p);
    } else if (p->shared != NULL) {
        rs_add_relaxed_u64(&p->shared[metric].unlaned, increment);
    }
}

/** Sets a gauge: the shared last value (exact whatever the lane holds), then a record for windows. */
RS_INLINE int rs_producer_set(rs_producer *p, uint32_t metric, double value) {
    uint64_t bits;
    __builtin_memcpy(&bits, &value, sizeof bits);
    rs_metric_cell *cell = p->shared;
    if (__builtin_expect(cell == NULL, 0)) return 0; /* disabled, or a forked child */
    rs_store_relaxed_u64(&cell[metric].gauge_bits, bits);
    /* Release: a reader that sees gauge_set sees a value stored before it. */
    rs_store_release_u64(&cell[metric].gauge_set, 1);
    return rs_producer_write(p, metric, RS_KIND_GAUGE, 0, bits);
}

/* MARK: - A producer's figures (its lane's owner only) */

/** Records published into the lane since its file was created (0 without a lane). */
RS_INLINE uint64_t rs_producer_written(const rs_producer *p) {
    /* Acquire: a figure read after the records it counts. */
    return p->write_cursor != NULL ? rs_load_acquire_u64(p->write_cursor) : 0;
}

/** Records the lane dropped because it was full, since its file was created (0 without a lane). */
RS_INLINE uint64_t rs_producer_dropped(const rs_producer *p) {
    /* Relaxed: only the lane's owner, the caller, writes it. */
    return p->dropped_total != NULL ? rs_load_relaxed_u64(p->dropped_total) : 0;
}

/**
 * Slots the consumer has freed and this producer may fill without dropping (UINT64_MAX without
 * a lane: nothing is ever written, so nothing drops). Only this producer fills them, so the
 * figure can only grow until its next write.
 */
RS_INLINE uint64_t rs_producer_free_slots(const rs_producer *p) {
    if (p->read_cursor == NULL) return UINT64_MAX;
    /* Acquire: the consumer is done with the slots below its cursor. */
    uint64_t read = rs_load_acquire_u64(p->read_cursor);
    uint64_t capacity = p->mask + 1;
    return read <= p->next && p->next - read <= capacity ? capacity - (p->next - read) : 0;
}

/* MARK: - Locks (ringside.c) */

/**
 * Takes the open-file-description write lock on one byte without waiting.
 * Returns 0 on success, or an errno value (EAGAIN/EACCES: another holder).
 */
int rs_lock_byte(int fd, int byte);

/**
 * Reports whether some open file description holds a lock on the byte: 1 held, 0 free,
 * or -errno on failure. A process's own lock conflicts too (OFD locks are per description).
 */
int rs_lock_byte_is_held(int fd, int byte);

/* MARK: - The SIGBUS guard (ringside.c) */

/*
 * A mapped ring file that another process truncates (or that shrinks under us) turns every
 * access to the pages past its new end into SIGBUS, which would kill a collector, a tool or a
 * bot. The guard prevents that. Each mapping registers its range in a lock-free table of
 * RS_GUARD_SLOTS {base, size} slots, kept in chunks of RS_GUARD_CHUNK_SLOTS that are mapped as
 * the table grows (the first chunk at the first registration), so a process pays for the slots
 * it uses. The first registration installs, once per process, a SIGBUS handler (sigaction,
 * SA_SIGINFO). On a fault whose si_addr lies in a registered range, the handler maps a private
 * anonymous zero page over the faulting page (mmap MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS,
 * read-write), marks the slot truncated and returns: the access is retried and reads zeros (a
 * producer's stores land in the private page, harmlessly). The owner of the mapping then sees
 * rs_guard_was_truncated() and reports the ring as truncated; unmapping the range removes the
 * zero pages with it. Any other SIGBUS (outside every range, or sent with kill) restores the
 * handler that was there before ours and is delivered again, so a real fault still crashes as
 * it would have. C bots may use the same calls.
 *
 * The bound: RS_GUARD_SLOTS ranges at once, sixteen times Linux's default limit on a process's
 * mappings (vm.max_map_count, 65,530), so the kernel refuses a mapping (ENOMEM) before the guard
 * can. A reader never reads a mapping the guard did not take: past the bound, rs_guard_register
 * returns -1 and the reader unmaps the range and refuses the ring ("the SIGBUS guard holds ...").
 */
#define RS_GUARD_CHUNK_SLOTS 4096
#define RS_GUARD_CHUNKS 256
#define RS_GUARD_SLOTS (RS_GUARD_CHUNK_SLOTS * RS_GUARD_CHUNKS)

/**
 * Registers a mapped range with the guard, installing the handler on first use.
 * Returns the slot (>= 0) to pass to the calls below, or -1 when the table is full (every one
 * of RS_GUARD_SLOTS taken), a chunk of it could not be mapped, or the handler could not be
 * installed: the range is then unguarded, and must not be read if the file may shrink.
 * Thread-safe; async-signal-safe it is not (it may map a chunk).
 */
int rs_guard_register(const void *base, size_t size);

/** Removes a range registered with rs_guard_register; call it before munmap. Thread-safe. */
void rs_guard_unregister(int slot);

/** 1 if the guard absorbed a fault in the slot's range since it was registered, else 0. */
int rs_guard_was_truncated(int slot);

/** Faults the guard has absorbed in this process, in every range: for tests and diagnostics. */
uint64_t rs_guard_faults_absorbed(void);

#ifdef __cplusplus
}
#endif

#endif /* RINGSIDE_H */
