// The watched consumers' doorbells (DOORBELL in ringside.h), kept by address beside their lanes'
// cursors: the drain sets and clears them here, and its looks pass over the lanes of a doorbell
// that still holds the 1 a settled sleep left in it.
//
// Why a doorbell may stay set across the drain's wakes: the drain sets it, puts the barrier on the
// producers, then looks at its lanes; if none moved, every producer that writes from then on
// finds the 1, takes it and rings. So while the word still holds the 1, nothing was written to
// those lanes since that look (or a producer is about to take it, and will ring): the drain need
// not set it again, nor look at the lanes. An idle collector of 2,000 bots that cleared and set
// every doorbell and looked at every lane at each wake spent most of its idle drain on it.

extension LaneWatch {
    /// Each watched consumer's doorbell, whether the drain set it, and whether it is settled.
    typealias DoorbellStates = (doorbells: [MappedRingFile.WatchedDoorbell], armed: [Bool], settled: [Bool])

    /// Sets the doorbells of the consumers at `indices` (places in the order given to `watch`,
    /// ascending), and clears those the drain set at any other place. Returns how many it set
    /// anew: a settled one whose word still holds the 1 is left as it is. Those set anew want the
    /// barrier and a look (`anyMoved`) before the drain may sleep; `settleDoorbells` after it.
    package func armDoorbells(_ indices: [Int]) -> Int {
        unsettleRung()
        var setAnew = 0
        var wanted = indices.makeIterator()
        var next = wanted.next()
        for place in doorbells.indices {
            let isWanted = next == place
            if isWanted { next = wanted.next() }
            switch (isWanted, armed[place]) {
            case (true, true) where settled[place]:
                continue
            case (true, _):
                doorbells[place].arm()
                (armed[place], settled[place]) = (true, false)
                setAnew += 1
            case (false, true):
                disarmDoorbell(at: place)
            case (false, false):
                continue
            }
        }
        return setAnew
    }

    /// The doorbells set are settled: the look after their announcement found nothing moved.
    package func settleDoorbells() {
        for place in armed.indices where armed[place] { settled[place] = true }
    }

    /// Every doorbell set is set anew at the next `armDoorbells`, and its lanes looked at.
    package func unsettleDoorbells() {
        for place in settled.indices { settled[place] = false }
    }

    /// Clears the doorbells set anew and not settled (the look found records: the drain drains
    /// them rather than sleep), or every doorbell the drain set (`all`).
    package func disarmDoorbells(all: Bool = false) {
        for place in armed.indices where armed[place] && (all || !settled[place]) { disarmDoorbell(at: place) }
    }

    /// Whether the producer of the consumer at `place` says it rings (`rings_doorbell`; relaxed:
    /// a hint), read by address rather than through the consumer's objects.
    package func ringsDoorbell(at place: Int) -> Bool { ringsDoorbellWords[place].hint != 0 }

    /// The futex addresses of the doorbells set, in the watch's order.
    package var armedDoorbellAddresses: [UInt64] {
        doorbells.indices.compactMap { armed[$0] ? doorbells[$0].futexAddress : nil }
    }

    /// Unsettles each settled doorbell whose word no longer holds the 1: a producer took it (and
    /// rang), or another writer of the file cleared it. Its lanes are looked at again. A load
    /// from each settled file's header page, instead of one from each of its lanes.
    func unsettleRung() {
        for place in settled.indices where settled[place] && !doorbells[place].isSet {
            (armed[place], settled[place]) = (false, false)
        }
    }

    /// The doorbells of `consumers` (the watch's next list) as the drain left them: a consumer
    /// watched before keeps its own; one watched before and not in the list has its doorbell
    /// cleared, while its file is still held.
    func keepDoorbells(of consumers: [RingConsumer]) -> DoorbellStates {
        var kept: [ObjectIdentifier: (armed: Bool, settled: Bool)] = [:]
        for (place, consumer) in watchedConsumers.enumerated() where armed[place] {
            kept[ObjectIdentifier(consumer)] = (true, settled[place])
        }
        let next = Set(consumers.map(ObjectIdentifier.init))
        for (place, consumer) in watchedConsumers.enumerated() where armed[place] && !next.contains(ObjectIdentifier(consumer)) {
            disarmDoorbell(at: place)
        }
        let states = consumers.map { kept[ObjectIdentifier($0)] ?? (false, false) }
        return (consumers.map { $0.mappedFile.watchedDoorbell() }, states.map(\.armed), states.map(\.settled))
    }

    private func disarmDoorbell(at place: Int) {
        doorbells[place].disarm()
        (armed[place], settled[place]) = (false, false)
    }
}
