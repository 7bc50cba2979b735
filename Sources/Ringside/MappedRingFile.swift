import CRingside
#if canImport(Glibc)
import Glibc
#endif

/// The memory side of reading a bot file: its mappings, and the one type that does offset
/// arithmetic on them and calls the format's atomics, each with the ordering it needs and the
/// line that says why. Everyone else sees typed cursors, records, cells, metrics and errors.
/// `RingFileHandle` is the other side: open, checks, locks and `mmap`. (Producers write through
/// `ringside_producer.c`.)
///
/// The file, drawn (see `ringside.h` for every field):
///
///     0        4096              cellsOffset              lanesOffset    + laneSize  ...
///     | header | registry (512 x n) | metric cells (64 x n) | lane 0        | lane 1 | ...
///       producer line (lanes_allocated, metric_count, pid ...)
///       consumer line                each lane: header (256) | cells (8 x n) | gather cells (64 x n) | records (32 x capacity)
///
/// The part before the lanes is mapped at open; each lane is mapped on its own when a reader
/// first sees it allocated. Geometry comes from a validated `RingLayout` copied at open; dynamic
/// fields (cursors, cells, counts) are re-read with atomics and checked by the caller.
final class MappedRingFile {
    typealias Role = RingFileHandle.Role

    let layout: RingLayout
    private let handle: RingFileHandle
    private let header: RingFileHandle.Mapping
    private var lanes: [RingFileHandle.Mapping] = []

    var name: String { handle.name }
    var path: String { handle.path }
    var role: Role { handle.role }
    /// Which file this is: a bot file replaced under the same name has another identity.
    var identity: RingFileIdentity { handle.identity }
    /// The user that owns the file (nil: not known).
    var owner: UInt32? { handle.owner }

    private init(handle: RingFileHandle, header: RingFileHandle.Mapping, layout: RingLayout) {
        self.handle = handle
        self.header = header
        self.layout = layout
    }

    deinit {
        for lane in lanes { lane.unmap() }
        header.unmap()
        // then `handle` closes the descriptor, releasing its lock
    }

    /// Opens an existing bot file to read it, as its consumer (locked) or as an inspector, and
    /// maps the part before its lanes.
    /// - Parameters:
    ///   - readsWeights: a consumer that reads gather cells and weighted records says so in the
    ///     consumer line, and the producer may then sample a filling lane (SAMPLING in `ringside.h`).
    ///   - drainIntervalNanos: the longest such a consumer expects to leave a filling lane
    ///     undrained, published beside it; 0 leaves the producers' default.
    static func open(
        name: String, directory: RingDirectory, role: Role,
        allowedOwners: Set<UInt32> = [], readsWeights: Bool = false, drainIntervalNanos: UInt64 = 0
    ) throws(RingError) -> MappedRingFile {
        let (handle, layout) = try RingFileHandle.open(name: name, directory: directory, role: role, allowedOwners: allowedOwners)
        let file = MappedRingFile(handle: handle, header: try handle.map(size: layout.lanesOffset, offset: 0), layout: layout)
        if role == .consumer {
            // Relaxed: figures for people; the consumer lock is the truth about who consumes. The
            // producer samples only while both pids are ours: a mismatch means "not (yet)".
            let pid = getpid()
            rs_store_relaxed_u64(file.field(Offset.drainInterval, as: UInt64.self), drainIntervalNanos)
            rs_store_relaxed_i32(file.field(Offset.consumerPID, as: Int32.self), pid)
            rs_store_relaxed_i32(file.field(Offset.weightsReaderPID, as: Int32.self), readsWeights ? pid : 0)
            rs_store_relaxed_u64(file.field(Offset.consumerHeartbeat, as: UInt64.self), rs_clock_coarse_ns())
        }
        return file
    }

    // MARK: - The header

    /// Where each field the readers touch lies (`offsetof`), worked out once: an idle collector
    /// reads some of them for every lane of thousands of bots many times a second.
    private enum Offset {
        static let lanesAllocated = MemoryLayout<rs_header>.offset(of: \.lanes_allocated)!
        static let metricCount = MemoryLayout<rs_header>.offset(of: \.metric_count)!
        static let heartbeat = MemoryLayout<rs_header>.offset(of: \.heartbeat_ns)!
        static let producerStart = MemoryLayout<rs_header>.offset(of: \.producer_start_ns)!
        static let producerPID = MemoryLayout<rs_header>.offset(of: \.producer_pid)!
        static let producerAttaches = MemoryLayout<rs_header>.offset(of: \.producer_attaches)!
        static let lanesExhausted = MemoryLayout<rs_header>.offset(of: \.lanes_exhausted)!
        static let workersRefused = MemoryLayout<rs_header>.offset(of: \.workers_refused)!
        static let botControl = MemoryLayout<rs_header>.offset(of: \.bot_control)!
        static let consumerPID = MemoryLayout<rs_header>.offset(of: \.consumer_pid)!
        static let weightsReaderPID = MemoryLayout<rs_header>.offset(of: \.weights_reader_pid)!
        static let sampleAbove = MemoryLayout<rs_header>.offset(of: \.sample_above)!
        static let consumerHeartbeat = MemoryLayout<rs_header>.offset(of: \.consumer_heartbeat_ns)!
        static let drainInterval = MemoryLayout<rs_header>.offset(of: \.drain_interval_ns)!
        static let gaugeBits = MemoryLayout<rs_metric_cell>.offset(of: \.gauge_bits)!
        static let gaugeSet = MemoryLayout<rs_metric_cell>.offset(of: \.gauge_set)!
        static let unlaned = MemoryLayout<rs_metric_cell>.offset(of: \.unlaned)!
        static let unlanedSum = MemoryLayout<rs_metric_cell>.offset(of: \.unlaned_sum)!
        static let unlanedMax = MemoryLayout<rs_metric_cell>.offset(of: \.unlaned_max)!
        static let clamped = MemoryLayout<rs_metric_cell>.offset(of: \.clamped)!
        static let exemplarsRefused = MemoryLayout<rs_metric_cell>.offset(of: \.exemplars_refused)!
        static let control = MemoryLayout<rs_metric_cell>.offset(of: \.control)!
        static let gathered = MemoryLayout<rs_lane_header>.offset(of: \.gathered)!
        static let gatherCalls = MemoryLayout<rs_gather_cell>.offset(of: \.calls)!
        static let gatherSum = MemoryLayout<rs_gather_cell>.offset(of: \.sum)!
        static let gatherLatest = MemoryLayout<rs_gather_cell>.offset(of: \.latest)!
        static let gatherMax = MemoryLayout<rs_gather_cell>.offset(of: \.max)!
        static let gatherDroppedSum = MemoryLayout<rs_gather_cell>.offset(of: \.dropped_sum)!
        static let gatherDroppedMax = MemoryLayout<rs_gather_cell>.offset(of: \.dropped_max)!
        static let writeCursor = MemoryLayout<rs_lane_header>.offset(of: \.write_cursor)!
        static let droppedTotal = MemoryLayout<rs_lane_header>.offset(of: \.dropped_total)!
        static let laneHeartbeat = MemoryLayout<rs_lane_header>.offset(of: \.heartbeat_ns)!
        static let state = MemoryLayout<rs_lane_header>.offset(of: \.state)!
        static let ownerTID = MemoryLayout<rs_lane_header>.offset(of: \.owner_tid)!
        static let claims = MemoryLayout<rs_lane_header>.offset(of: \.claims)!
        static let cellWrites = MemoryLayout<rs_lane_header>.offset(of: \.cell_writes)!
        static let threadName = MemoryLayout<rs_lane_header>.offset(of: \.thread_name)!
        static let readCursor = MemoryLayout<rs_lane_header>.offset(of: \.read_cursor)!
    }

    /// A field at `offset` in the header page (every offset above lies in it).
    func field<T>(_ offset: Int, as type: T.Type) -> UnsafeMutablePointer<T> {
        (header.base + offset).assumingMemoryBound(to: T.self)
    }

    /// The layout fields the creator wrote once (magic, sizes, creation times).
    var layoutFields: rs_header { header.base.assumingMemoryBound(to: rs_header.self).pointee }

    // Acquire: the registry entries below the published count are fully written.
    var metricCount: UInt32 { rs_load_acquire_u32(field(Offset.metricCount, as: UInt32.self)) }
    // Acquire: the lanes below the published count have their headers written.
    var lanesAllocated: UInt32 { rs_load_acquire_u32(field(Offset.lanesAllocated, as: UInt32.self)) }
    // Relaxed: figures for people; the locks are the truth about who is attached.
    var heartbeatNanos: UInt64 { rs_load_relaxed_u64(field(Offset.heartbeat, as: UInt64.self)) }
    var producerStartNanos: UInt64 { rs_load_relaxed_u64(field(Offset.producerStart, as: UInt64.self)) }
    var producerPID: Int32 { rs_load_relaxed_i32(field(Offset.producerPID, as: Int32.self)) }
    var producerAttaches: UInt32 { rs_load_relaxed_u32(field(Offset.producerAttaches, as: UInt32.self)) }
    var lanesExhausted: UInt64 { rs_load_relaxed_u64(field(Offset.lanesExhausted, as: UInt64.self)) }
    var workersRefused: UInt64 { rs_load_relaxed_u64(field(Offset.workersRefused, as: UInt64.self)) }
    var consumerPID: Int32 { rs_load_relaxed_i32(field(Offset.consumerPID, as: Int32.self)) }
    var weightsReaderPID: Int32 { rs_load_relaxed_i32(field(Offset.weightsReaderPID, as: Int32.self)) }
    var sampleAbove: UInt32 { rs_load_relaxed_u32(field(Offset.sampleAbove, as: UInt32.self)) }
    var consumerHeartbeatNanos: UInt64 { rs_load_relaxed_u64(field(Offset.consumerHeartbeat, as: UInt64.self)) }

    /// Whether the file shrank under a mapping: the SIGBUS guard absorbed a fault in it (the
    /// pages past the file's end now read as zeros; every mapping is guarded, see
    /// `RingFileHandle.map`). Whatever was read from the mapping meanwhile may be zeros and must
    /// be thrown away.
    var wasTruncated: Bool {
        // No array of the mappings: an idle collector asks this of every lane many times a second.
        if header.wasTruncated { return true }
        for lane in lanes where lane.wasTruncated { return true }
        return false
    }

    /// The file's size now, or nil if fstat fails.
    var currentFileSize: Int? { handle.currentFileSize }

    /// The size the mapped part of the file needs.
    var mappedFileSize: Int { layout.fileSize(lanes: lanes.count) }

    /// Throws when the file no longer has every byte its mappings need, or has holes (one
    /// `fstat`): for a reader told the file changed, before it reads a page that is gone.
    func checkIntact() throws(RingError) {
        try handle.checkIntact(neededSize: mappedFileSize)
        try checkNotTruncated()
    }

    /// Throws `.corrupt(.truncated)` when the file shrank under a mapping (see `wasTruncated`).
    func checkNotTruncated() throws(RingError) {
        guard wasTruncated else { return }
        throw .corrupt(
            ring: name, path: path,
            problem: .truncated(fileSize: currentFileSize ?? 0, expected: mappedFileSize))
    }

    /// Whether a live process holds the producer (or consumer) lock.
    func isLocked(byte: Int32) -> Bool { handle.isLocked(byte: byte) }

    /// The longest the consumer expects to leave a filling lane undrained (SAMPLING in `ringside.h`):
    /// producers sample a lane only when it would fill before then.
    var drainIntervalNanos: UInt64 { rs_load_relaxed_u64(field(Offset.drainInterval, as: UInt64.self)) }

    /// Publishes `drainIntervalNanos`.
    func publishDrainInterval(nanos: UInt64) {
        precondition(role == .consumer, "only the consumer writes its line")
        // Relaxed: a figure producers read now and then; any recent one serves.
        rs_store_relaxed_u64(field(Offset.drainInterval, as: UInt64.self), nanos)
    }

    /// Says the consumer is still here (for people reading the file).
    func markConsumerHeartbeat() {
        precondition(role == .consumer, "only the consumer writes its line")
        // Relaxed: a figure for people, published by nothing.
        rs_store_relaxed_u64(field(Offset.consumerHeartbeat, as: UInt64.self), rs_clock_coarse_ns())
    }

    // MARK: - The registry and the metric cells

    /// A copy of registry entry `index` (below the registry's capacity), for validation.
    func registryEntry(_ index: Int) -> rs_registry_entry { registrySlot(index).pointee }

    /// The kind byte of registry entry `index`, without copying the entry (unchecked).
    func registryKind(_ index: Int) -> UInt8 {
        UnsafeRawPointer(registrySlot(index)).load(fromByteOffset: Self.kindOffset, as: UInt8.self)
    }
    private static let kindOffset = MemoryLayout<rs_registry_entry>.offset(of: \.kind)!

    /// Whether registry entry `index`'s `retired` word is odd (RETIRING A SERIES in ringside.h).
    func isRetired(_ index: Int) -> Bool {
        // Acquire pairs with the producer's release store: its gauge_set store before it is seen.
        let word = UnsafeRawPointer(registrySlot(index)).advanced(by: Self.retiredOffset).assumingMemoryBound(to: UInt32.self)
        return rs_load_acquire_u32(word) & 1 != 0
    }
    private static let retiredOffset = MemoryLayout<rs_registry_entry>.offset(of: \.retired)!

    private func registrySlot(_ index: Int) -> UnsafeMutablePointer<rs_registry_entry> {
        precondition(index >= 0 && index < Int(layout.registryCapacity), "registry index out of range")
        // registryOffset + index * 512 stays below cellsOffset for index < registryCapacity.
        return (header.base + layout.registryOffset + index * Int(RS_REGISTRY_ENTRY_SIZE)).assumingMemoryBound(to: rs_registry_entry.self)
    }

    /// A field of metric `metric`'s shared cell.
    private func metricCell(_ metric: Int, _ offset: Int) -> UnsafeMutablePointer<UInt64> {
        precondition(metric >= 0 && metric < Int(layout.registryCapacity), "metric index out of range")
        // cellsOffset + metric * 32 + offset stays below lanesOffset for metric < registryCapacity.
        return (header.base + layout.cellsOffset + metric * Int(RS_METRIC_CELL_SIZE) + offset).assumingMemoryBound(to: UInt64.self)
    }

    /// A gauge's last value, or nil if none was set.
    func gaugeValue(metric: Int) -> Double? {
        // Acquire pairs with the setter's release store of gauge_set: the bits stored before it are visible.
        guard rs_load_acquire_u64(metricCell(metric, Offset.gaugeSet)) != 0 else { return nil }
        return Double(bitPattern: rs_load_relaxed_u64(metricCell(metric, Offset.gaugeBits)))
    }

    /// What threads without a lane added to a counter, or the records of other metrics they lost.
    func unlaned(metric: Int) -> UInt64 {
        // Relaxed: a running total read as a figure; nothing else is published through it.
        rs_load_relaxed_u64(metricCell(metric, Offset.unlaned))
    }

    /// Values clamped, rounded or not recorded (VALUES), exemplars refused (EXEMPLARS): counts added atomically, read relaxed.
    func refusals(metric: Int) -> (clamped: UInt64, exemplars: UInt64) {
        (rs_load_relaxed_u64(metricCell(metric, Offset.clamped)), rs_load_relaxed_u64(metricCell(metric, Offset.exemplarsRefused)))
    }

    /// The header's `bot_control` and a metric's control word, for the operator's tool's atomic
    /// updates (`RingControl`; CONTROL in ringside.h).
    var botControlWord: UnsafeMutablePointer<UInt32> { field(Offset.botControl, as: UInt32.self) }
    func controlWord(metric: Int) -> UnsafeMutablePointer<UInt32> {
        UnsafeMutableRawPointer(metricCell(metric, Offset.control)).assumingMemoryBound(to: UInt32.self)
    }

    /// The operator's switches of one metric (CONTROL in ringside.h).
    func control(metric: Int) -> UInt32 {
        let word = UnsafeMutableRawPointer(metricCell(metric, Offset.control)).assumingMemoryBound(to: UInt32.self)
        return rs_load_relaxed_u32(word)  // relaxed: the tool's word, read as it stands
    }

    /// A histogram's values lost by threads without a lane: their sum (modulo 2^64) and largest.
    func unlanedValues(metric: Int) -> (sum: UInt64, max: UInt64) {
        // Relaxed: running figures, added and raised atomically by their writers.
        (rs_load_relaxed_u64(metricCell(metric, Offset.unlanedSum)), rs_load_relaxed_u64(metricCell(metric, Offset.unlanedMax)))
    }

    // MARK: - Lanes

    /// Lanes mapped so far; `mapNewLanes` maps those allocated since.
    var laneCount: Int { lanes.count }

    /// Maps the lanes the producer allocated since the last call; returns how many are new.
    /// - Throws: `.corrupt` when the count exceeds `max_lanes` or the file is too short for it.
    @discardableResult
    func mapNewLanes() throws(RingError) -> Int {
        let allocated = Int(lanesAllocated)
        guard allocated > lanes.count else { return 0 }
        guard allocated <= Int(layout.maxLanes) else {
            throw .corrupt(
                ring: name, path: path,
                problem: .badLayout(
                    field: "lanes_allocated", value: UInt64(allocated),
                    expected: "at most max_lanes \(layout.maxLanes)"))
        }
        let needed = layout.fileSize(lanes: allocated)
        guard let size = currentFileSize, size >= needed else {
            throw .corrupt(ring: name, path: path, problem: .truncated(fileSize: currentFileSize ?? 0, expected: needed))
        }
        try handle.checkAllocated()  // the new lanes' pages too
        let before = lanes.count
        for index in before..<allocated {
            lanes.append(try handle.map(size: layout.laneSize, offset: layout.fileSize(lanes: index)))
        }
        return allocated - before
    }

    /// Lane `lane`'s read cursor, or its write cursor, read from the file with `pread` rather than
    /// through a mapping: for a look at lanes the reader would not map (past max_lanes, or past
    /// the file's end), where a short file must not fault. nil where the file does not hold it.
    func readCursorOnFile(lane: Int) -> UInt64? { handle.read(UInt64.self, at: layout.fileSize(lanes: lane) + Offset.readCursor) }
    func writeCursorOnFile(lane: Int) -> UInt64? { handle.read(UInt64.self, at: layout.fileSize(lanes: lane) + Offset.writeCursor) }

    /// A field at `offset` in lane `lane`'s 256-byte header.
    private func laneField<T>(_ lane: Int, _ offset: Int, as type: T.Type) -> UnsafeMutablePointer<T> {
        (lanes[lane].base + offset).assumingMemoryBound(to: T.self)
    }

    /// Lane `lane`'s write cursor, to be looked at in a tight loop (`LaneWatch`): valid while
    /// this file is open, which its holder guarantees.
    func watchedWriteCursor(lane: Int) -> WatchedCursor {
        WatchedCursor(
            address: UnsafePointer(laneField(lane, Offset.writeCursor, as: UInt64.self)),
            gathered: UnsafePointer(laneField(lane, Offset.gathered, as: UInt64.self)),
            cellWrites: UnsafePointer(laneField(lane, Offset.cellWrites, as: UInt32.self)))
    }

    /// The header's lane count, to be looked at in a tight loop beside the lanes' cursors
    /// (`LaneWatch`): valid while this file is open, which its holder guarantees.
    func watchedLaneCount() -> WatchedHeaderWord {
        WatchedHeaderWord(address: UnsafePointer(field(Offset.lanesAllocated, as: UInt32.self)))
    }

    /// A word of the header (`lanes_allocated`, `rings_doorbell`), kept by address (see `WatchedCursor`).
    struct WatchedHeaderWord {
        private let address: UnsafePointer<UInt32>

        init(address: UnsafePointer<UInt32>) { self.address = address }

        /// Relaxed: only a hint (that lanes were added: mapping them loads it again with acquire).
        var hint: UInt32 { rs_load_relaxed_u32(address) }
    }

    /// A lane's write cursor, gathered calls and counter-increment count (`cell_writes`, all on the
    /// lane's producer line) kept by address, so that many are loaded without a chain of loads.
    struct WatchedCursor {
        private let address: UnsafePointer<UInt64>
        private let gatheredAddress: UnsafePointer<UInt64>
        private let cellWritesAddress: UnsafePointer<UInt32>

        fileprivate init(address: UnsafePointer<UInt64>, gathered: UnsafePointer<UInt64>, cellWrites: UnsafePointer<UInt32>) {
            self.address = address
            self.gatheredAddress = gathered
            self.cellWritesAddress = cellWrites
        }

        /// The write cursor plus the calls gathered: it moves with a record and with a gathered
        /// call (SAMPLING in ringside.h), so an idle thread's last gathered calls are seen too.
        /// Relaxed: only a hint that the consumer has work; its drain loads both again with
        /// acquire before it reads a record or a cell.
        var hint: UInt64 { rs_load_relaxed_u64(address) &+ rs_load_relaxed_u64(gatheredAddress) }
        /// Acquire: a counter's cell written before the producer moved it is seen by the cells'
        /// read that follows (see CELLS in ringside.h).
        var cellWrites: UInt32 { rs_load_acquire_u32(cellWritesAddress) }
    }

    // Acquire: the records below the write cursor are fully written.
    func writeCursor(lane: Int) -> UInt64 { rs_load_acquire_u64(laneField(lane, Offset.writeCursor, as: UInt64.self)) }
    // Acquire: whatever the consumer read below it is done with.
    func readCursor(lane: Int) -> UInt64 { rs_load_acquire_u64(laneField(lane, Offset.readCursor, as: UInt64.self)) }
    // Relaxed: figures for people and the drop accounting, written by one thread each.
    func droppedTotal(lane: Int) -> UInt64 { rs_load_relaxed_u64(laneField(lane, Offset.droppedTotal, as: UInt64.self)) }
    func heartbeatNanos(lane: Int) -> UInt64 { rs_load_relaxed_u64(laneField(lane, Offset.laneHeartbeat, as: UInt64.self)) }
    // Acquire: a lane seen active has its owner and claim count stored before the state.
    func state(lane: Int) -> UInt32 { rs_load_acquire_u32(laneField(lane, Offset.state, as: UInt32.self)) }
    // Relaxed: published by the state's release, loaded after it.
    func ownerTID(lane: Int) -> Int32 { rs_load_relaxed_i32(laneField(lane, Offset.ownerTID, as: Int32.self)) }
    func claims(lane: Int) -> UInt32 { rs_load_relaxed_u32(laneField(lane, Offset.claims, as: UInt32.self)) }

    /// The name the lane's holder gave its thread (THREAD NAMES in ringside.h): up to 32 bytes
    /// before the first NUL, read as UTF-8 with anything invalid replaced; "" when none.
    func threadName(lane: Int) -> String {
        let bytes = UnsafeRawBufferPointer(start: lanes[lane].base + Offset.threadName, count: Int(RS_THREAD_NAME_MAX))
        return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// A lane's cell of `metric`: a counter's increments made on the lane, or the records of
    /// another kind the lane dropped.
    func laneCell(lane: Int, metric: Int) -> UInt64 {
        precondition(metric >= 0 && metric < Int(layout.registryCapacity), "metric index out of range")
        // The cells follow the lane header: metric * 8 stays below laneRecordsOffset.
        let offset = Int(RS_LANE_HEADER_SIZE) + metric * MemoryLayout<UInt64>.stride
        let cell = (lanes[lane].base + offset).assumingMemoryBound(to: UInt64.self)
        // Relaxed: a running total its one writer stores whole.
        return rs_load_relaxed_u64(cell)
    }

    /// A field of lane `lane`'s gather cell of `metric` (SAMPLING in `ringside.h`).
    private func gatherField(lane: Int, metric: Int, _ offset: Int) -> UnsafeMutablePointer<UInt64> {
        precondition(metric >= 0 && metric < Int(layout.registryCapacity), "metric index out of range")
        // laneGatherOffset + metric * 64 + offset stays below laneRecordsOffset for metric < registryCapacity.
        let at = layout.laneGatherOffset + metric * Int(RS_GATHER_CELL_SIZE) + offset
        return (lanes[lane].base + at).assumingMemoryBound(to: UInt64.self)
    }

    /// Calls gathered on lane `lane`, every histogram's: a consumer reads the lane's gather cells
    /// only when it moved.
    // Acquire: the cells' fields stored before it are seen by the reads that follow.
    func gathered(lane: Int) -> UInt64 { rs_load_acquire_u64(laneField(lane, Offset.gathered, as: UInt64.self)) }

    /// Lane `lane`'s gather cell of `metric`, as the holder left it (but `max`: see `takeGatheredMax`).
    func gatherCell(lane: Int, metric: Int) -> GatherCell {
        // Acquire: the sum and latest value stored before the count are seen with it.
        let calls = rs_load_acquire_u64(gatherField(lane: lane, metric: metric, Offset.gatherCalls))
        // Relaxed: running figures of the lane's one holder.
        return GatherCell(
            calls: calls, sum: rs_load_relaxed_u64(gatherField(lane: lane, metric: metric, Offset.gatherSum)),
            latest: rs_load_relaxed_u64(gatherField(lane: lane, metric: metric, Offset.gatherLatest)),
            droppedSum: rs_load_relaxed_u64(gatherField(lane: lane, metric: metric, Offset.gatherDroppedSum)),
            droppedMax: rs_load_relaxed_u64(gatherField(lane: lane, metric: metric, Offset.gatherDroppedMax)))
    }

    /// Lane `lane`'s record of `metric`'s values it dropped: their sum (modulo 2^64) and largest.
    func gatherDropped(lane: Int, metric: Int) -> (sum: UInt64, max: UInt64) {
        // Relaxed: running figures of the lane's one holder, read as they stand (as the lane cell
        // counting them is), without the calls' acquire `gatherCell` makes.
        (
            rs_load_relaxed_u64(gatherField(lane: lane, metric: metric, Offset.gatherDroppedSum)),
            rs_load_relaxed_u64(gatherField(lane: lane, metric: metric, Offset.gatherDroppedMax))
        )
    }

    /// Takes the largest value gathered on lane `lane` for `metric` since the last take, leaving 0:
    /// the consumer's one write to a producer's cell (an exchange; the holder raises it by CAS).
    func takeGatheredMax(lane: Int, metric: Int) -> UInt64 {
        precondition(role == .consumer, "only the consumer takes a gathered maximum")
        return rs_take_relaxed_u64(gatherField(lane: lane, metric: metric, Offset.gatherMax))
    }

    /// The consumer publishes a lane's cursor: the slots below it are free for the producer.
    func publishReadCursor(_ cursor: UInt64, lane: Int) {
        precondition(role == .consumer, "only the consumer moves the read cursor")
        // Release: our reads of the slots below `cursor` finish before the producer may reuse them.
        rs_store_release_u64(laneField(lane, Offset.readCursor, as: UInt64.self), cursor)
    }

    // MARK: - Records

    /// A lane's record slots. Slot `cursor & (capacity - 1)` holds the record at `cursor`.
    private func recordSlots(lane: Int) -> UnsafePointer<rs_record> {
        // laneRecordsOffset + capacity * 32 fits in laneSize, by the validated layout.
        UnsafePointer((lanes[lane].base + layout.laneRecordsOffset).assumingMemoryBound(to: rs_record.self))
    }

    /// Hands the `count` records of lane `lane` from `cursor` on (published: below the write
    /// cursor) to `body` in runs of contiguous slots, with each run's first cursor: a lane wraps.
    /// The buffers are valid only during `body`; their contents are untrusted.
    func forEachRun(
        lane: Int, from cursor: UInt64, count: Int,
        _ body: (_ records: UnsafeBufferPointer<rs_record>, _ firstCursor: UInt64) -> Void
    ) {
        let slots = recordSlots(lane: lane)
        let capacity = Int(layout.capacity)
        var at = cursor
        var remaining = count
        while remaining > 0 {
            let slot = Int(at & (layout.capacity - 1))
            let run = min(remaining, capacity - slot)
            body(UnsafeBufferPointer(start: slots + slot, count: run), at)
            at += UInt64(run)
            remaining -= run
        }
    }

    /// Copies lane `lane`'s records at cursors `first..<end` (published), leaving out any the
    /// producer may have rewritten during the copy: never a torn record, never a cursor moved.
    /// A record the consumer has passed (`consumed`) is kept while its slot still holds it.
    func copyRecords(lane: Int, from first: UInt64, to end: UInt64) -> [(cursor: UInt64, record: rs_record, consumed: Bool)] {
        let slots = recordSlots(lane: lane)
        let capacity = layout.capacity
        var copies: [(cursor: UInt64, record: rs_record)] = []
        copies.reserveCapacity(Int(end - first))
        for cursor in first..<end { copies.append((cursor, slots[Int(cursor & (capacity - 1))])) }
        // Acquire fence: the copies above complete before the cursors are read again (a seqlock reader's).
        rs_fence_acquire()
        // The producer rewrites slot c only after the consumer passes c, so the records at or
        // past the consumer's cursor now were not rewritten while we copied them ...
        let stillUnread = readCursor(lane: lane)
        // ... and a consumed one only when it writes cursor c + capacity, which it starts once it
        // has published c + capacity (x86-64 keeps stores in order, so a copy that saw the new
        // bytes sees that cursor too). The slot's sequence must name the record as well: a reused
        // slot is never shown as the record it replaced, whatever a producer wrote.
        let written = writeCursor(lane: lane)
        return copies.compactMap { copy in
            if copy.cursor >= stillUnread { return (copy.cursor, copy.record, false) }
            // (Wrapping: cursors near 2^64, or a write cursor moved back, must not trap; the latter fails.)
            guard written &- copy.cursor < capacity, copy.record.sequence == copy.cursor else { return nil }
            return (copy.cursor, copy.record, true)
        }
    }
}

/// One histogram's gathered calls on one lane (`rs_gather_cell`), all cumulative, and the values
/// of its records the lane dropped.
struct GatherCell: Equatable {
    var calls: UInt64
    /// Modulo 2^64: a reader takes differences.
    var sum: UInt64
    var latest: UInt64
    var droppedSum, droppedMax: UInt64
}
