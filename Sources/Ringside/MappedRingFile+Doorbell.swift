// The consumer's side of the doorbell (DOORBELL in ringside.h): the word it sets before it sleeps,
// which the file's producers clear when they write, waking it.

import CRingside

extension MappedRingFile {
    private static let doorbellOffset = MemoryLayout<rs_header>.offset(of: \.doorbell)!
    private static let ringsDoorbellOffset = MemoryLayout<rs_header>.offset(of: \.rings_doorbell)!

    /// Whether the attached process says it rings the doorbell (relaxed: a hint; a producer that
    /// does not ring is drained at the poll all the same).
    var ringsDoorbell: Bool { watchedRingsDoorbell().hint != 0 }

    /// The doorbell's address, for a futex wait on it (the kernel reads it, never Swift).
    var doorbellAddress: UInt64 { watchedDoorbell().futexAddress }

    /// Sets the doorbell: the consumer is about to sleep (the announcement's barrier comes after).
    func armDoorbell() { watchedDoorbell().arm() }

    /// Clears the doorbell if it is still set (the consumer no longer waits on it). Only loads
    /// while it is clear: no line written.
    func disarmDoorbell() { watchedDoorbell().disarm() }

    /// Whether the doorbell is set (tests, and the dump).
    var doorbellIsSet: Bool { watchedDoorbell().isSet }

    /// `rings_doorbell`, to be read in a tight loop (`LaneWatch`): valid while this file is open.
    func watchedRingsDoorbell() -> WatchedHeaderWord {
        WatchedHeaderWord(address: UnsafePointer(field(Self.ringsDoorbellOffset, as: UInt32.self)))
    }

    /// The doorbell, to be set, cleared and looked at in tight loops beside the lanes' cursors
    /// (`LaneWatch`): valid while this file is open, which its holder guarantees.
    func watchedDoorbell() -> WatchedDoorbell { WatchedDoorbell(address: field(Self.doorbellOffset, as: UInt32.self)) }

    /// The header's `doorbell`, kept by address (see `WatchedCursor`).
    struct WatchedDoorbell {
        private let address: UnsafeMutablePointer<UInt32>

        fileprivate init(address: UnsafeMutablePointer<UInt32>) { self.address = address }

        /// Relaxed: the announcement's barrier orders them (DOORBELL in ringside.h).
        var isSet: Bool { rs_load_relaxed_u32(address) != 0 }
        func arm() { rs_store_relaxed_u32(address, 1) }
        func disarm() { if isSet { rs_store_relaxed_u32(address, 0) } }
        /// For a futex wait on it (the kernel reads it, never Swift).
        var futexAddress: UInt64 { UInt64(UInt(bitPattern: address)) }
    }
}

extension RingConsumer {
    /// Whether the bot's attached process rings the doorbell (see `MappedRingFile.ringsDoorbell`).
    package var ringsDoorbell: Bool { mappedFile.ringsDoorbell }
    /// The doorbell's address, for a futex wait on it.
    package var doorbellAddress: UInt64 { mappedFile.doorbellAddress }
    /// Sets the doorbell before the consumer sleeps.
    package func armDoorbell() { mappedFile.armDoorbell() }
    /// Clears the doorbell once the consumer is awake.
    package func disarmDoorbell() { mappedFile.disarmDoorbell() }
    /// Whether the doorbell is set.
    package var doorbellIsSet: Bool { mappedFile.doorbellIsSet }
}

extension Bot {
    /// Whether the consumer sleeps under this bot's doorbell now (the word is set: it announced its
    /// sleep): for the benchmark, which writes once it does. False for a disabled bot.
    package var doorbellIsSet: Bool {
        headerWord(\.doorbell).map { rs_load_relaxed_u32($0) != 0 } ?? false
    }

    /// Says in the file's `rings_doorbell` that this process does not ring (0), as one that could
    /// not register for the consumer's barrier does: the consumer sets no doorbell for the bot from
    /// its next sleep on, so its records are drained at the poll (the benchmark's producer of an
    /// older revision). Its lanes never find the word set, so they never ring.
    package func sayDoesNotRing() {
        if let word = headerWord(\.rings_doorbell) { rs_store_relaxed_u32(word, 0) }
    }

    /// A word of the mapped header (nil for a disabled bot, which maps none).
    private func headerWord(_ field: KeyPath<rs_header, UInt32>) -> UnsafeMutablePointer<UInt32>? {
        guard let header = bot.pointee.header, let offset = MemoryLayout<rs_header>.offset(of: field) else { return nil }
        return (UnsafeMutableRawPointer(header) + offset).assumingMemoryBound(to: UInt32.self)
    }
}
