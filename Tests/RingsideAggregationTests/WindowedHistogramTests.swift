import Testing
@testable import RingsideAggregation

@Suite("WindowedHistogram")
struct WindowedHistogramTests {
    static let second: UInt64 = 1_000_000_000
    static let oneSecond = 0, fiveSeconds = 1, oneMinute = 2

    @Test("the standard layout slides 1 s, 5 s and 1 min windows in quarters of 250 ms, 1.25 s and 15 s")
    func standardLayoutGranularity() {
        let layout = WindowLayout.standard
        #expect(layout.windowNanos == [Self.second, 5 * Self.second, 60 * Self.second])
        #expect(layout.sliceNanos == [Self.second / 4, 5 * Self.second / 4, 15 * Self.second])
        #expect(layout.tickNanos == Self.second / 4)
        #expect(layout.index(ofWindowNanos: 5 * Self.second) == 1)
        #expect(
            WindowLayout(windowNanos: [3 * Self.second, 7 * Self.second], slicesPerWindow: 5).tickNanos
                == Self.second / 5)
    }

    @Test(
        "a value is in the 1 s window 0.5 s later, gone 1.5 s later, and kept by the 1 min window",
        arguments: [0, 1_000_000_000_000, 1_000_123_456_789, 60_000_000_000 - 1])
    func valueLeavesOneSecondWindowButStaysInOneMinute(t: UInt64) {
        var series = WindowedHistogram()
        series.record(4242, atNanos: t)
        let at = { (delay: Double) in t + UInt64(delay * Double(Self.second)) }
        #expect(series.snapshot(window: Self.oneSecond, nowNanos: at(0.5)).count == 1)
        #expect(series.snapshot(window: Self.oneSecond, nowNanos: at(0.99)).count == 1)
        #expect(series.snapshot(window: Self.oneSecond, nowNanos: at(1.5)).isEmpty)
        #expect(series.snapshot(window: Self.fiveSeconds, nowNanos: at(4.9)).count == 1)
        #expect(series.snapshot(window: Self.fiveSeconds, nowNanos: at(6.5)).isEmpty)
        #expect(series.snapshot(window: Self.oneMinute, nowNanos: at(1.5)).max == 4242)
        #expect(series.snapshot(window: Self.oneMinute, nowNanos: at(59.9)).count == 1)
        #expect(series.snapshot(window: Self.oneMinute, nowNanos: at(76)).isEmpty)
        #expect(series.cumulative.count == 1)
        // The same holds once later records have rotated the value out of the current tick.
        series.record(1, atNanos: at(1.5))
        #expect(series.snapshot(window: Self.oneSecond, nowNanos: at(1.5)).max == 1)
        #expect(series.snapshot(window: Self.oneMinute, nowNanos: at(1.5)).max == 4242)
        #expect(series.cumulative.count == 2)
    }

    @Test("a late record inside a window lands in it; one older than a window only in the longer ones and all time")
    func lateRecordsLandInTheWindowsThatStillHoldThem() {
        let now = 1_000 * Self.second
        var series = WindowedHistogram()
        series.record(10, atNanos: now)
        series.record(20, atNanos: now - Self.second / 10)  // late, still in the 1 s window
        series.record(30, atNanos: now - 3 * Self.second)  // older than 1 s, inside 5 s
        series.record(40, atNanos: now - 30 * Self.second)  // inside 1 min only
        series.record(50, atNanos: 10 * Self.second)  // older than every window
        #expect(series.snapshot(window: Self.oneSecond, nowNanos: now).buckets.map(\.lowerBound) == [10, 20])
        #expect(series.snapshot(window: Self.fiveSeconds, nowNanos: now).buckets.map(\.lowerBound) == [10, 20, 30])
        #expect(series.snapshot(window: Self.oneMinute, nowNanos: now).buckets.map(\.lowerBound) == [10, 20, 30, 40])
        #expect(series.cumulative.buckets.map(\.lowerBound) == [10, 20, 30, 40, 50])
    }

    @Test(
        "windowed snapshots equal a brute-force filter of the records, late ones included",
        arguments: [21, 22, 23])
    func snapshotsMatchBruteForce(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let layout = WindowLayout.standard
        var series = WindowedHistogram(layout: layout)
        var records: [(value: UInt64, t: UInt64)] = []
        var clock: UInt64 = 5 * Self.second
        var newest: UInt64 = 0
        for index in 0..<20_000 {
            clock += UInt64.random(in: 0...20_000_000, using: &random)  // up to 20 ms apart
            var t = clock
            switch UInt64.random(in: 0..<100, using: &random) {
            case 0..<10: t -= UInt64.random(in: 0...300_000_000, using: &random)  // slightly late
            case 10: t -= min(t, UInt64.random(in: 0...90 * Self.second, using: &random))  // very late
            default: break
            }
            let value = random.lognormal(mu: 10, sigma: 2)
            series.record(value, atNanos: t)
            records.append((value, t))
            newest = max(newest, t)
            if index % 997 == 0 || index == 19_999 {
                for now in [newest, newest + Self.second / 3, newest + 7 * Self.second] {
                    expectSnapshotsMatch(series, records, layout: layout, now: now)
                }
            }
            if index % 5000 == 0 { series.advance(toNanos: newest) }
        }
        var all = Histogram()
        records.forEach { all.record($0.value) }
        #expect(series.cumulative == all)
    }

    /// Checks every window against the definition: a record is in window `w` at `now` when its
    /// slice is one of the `slicesPerWindow + 1` newest as of `now`.
    func expectSnapshotsMatch(
        _ series: WindowedHistogram, _ records: [(value: UInt64, t: UInt64)],
        layout: WindowLayout, now: UInt64
    ) {
        for window in layout.windowNanos.indices {
            let slice = layout.sliceNanos[window]
            let firstSlice = max(Int64(now / slice) - Int64(layout.slicesPerWindow), 0)
            var expected = Histogram()
            for record in records where Int64(record.t / slice) >= firstSlice {
                expected.record(record.value)
            }
            #expect(series.snapshot(window: window, nowNanos: now) == expected, "window \(window) at \(now)")
        }
    }

    @Test(
        "an idle series lets its slices go once no window holds them, and reads as it did: bursts apart by idle spells",
        arguments: [31, 32])
    func idleSeriesLetsItsSlicesGo(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let layout = WindowLayout.standard
        var series = WindowedHistogram(layout: layout)
        var records: [(value: UInt64, t: UInt64)] = []
        var clock = 10 * Self.second
        for _ in 0..<6 {
            // A burst of a few seconds, some records late, then a spell of 60 to 100 s without any.
            for _ in 0..<2_000 {
                clock += UInt64.random(in: 0...2_000_000, using: &random)
                let late = UInt64.random(in: 0..<10, using: &random) == 0 ? UInt64.random(in: 0...500_000_000, using: &random) : 0
                let value = random.lognormal(mu: 10, sigma: 1)
                series.record(value, atNanos: clock - late)
                records.append((value, clock - late))
            }
            let last = clock
            clock += UInt64.random(in: 60...100, using: &random) * Self.second
            var now = last
            while now < clock {
                now += Self.second / 2
                let letGo = series.advance(toNanos: now)
                // The 1 min window holds a slice 60 to 75 s: its last one goes by 76 s after the last record.
                if letGo { #expect(now > last + 60 * Self.second && now <= last + 76 * Self.second) }
                if now % (5 * Self.second) == 0 { expectSnapshotsMatch(series, records, layout: layout, now: now) }
            }
            if clock > last + 76 * Self.second {
                // Idle: the all-time histogram alone holds memory.
                #expect(series.windows.slots.isEmpty && series.windows.head.allocatedBytes == 0)
                #expect(series.allocatedBytes == series.cumulative.allocatedBytes)
            }
            expectSnapshotsMatch(series, records, layout: layout, now: clock)
        }
        var all = Histogram()
        records.forEach { all.record($0.value) }
        #expect(series.cumulative == all)
        #expect(series.coveredNanos(window: Self.oneMinute, nowNanos: clock) == 60 * Self.second + clock % (15 * Self.second))
    }

    @Test(
        "a layout of more places than the index holds (4 windows of 5 places) reads as the definition says, late records and idle spells too"
    )
    func manyPlacesMatchBruteForce() {
        var random = SeededRandom(seed: 33)
        let layout = WindowLayout(windowNanos: [Self.second, 5 * Self.second, 20 * Self.second, 60 * Self.second])
        var series = WindowedHistogram(layout: layout)
        var records: [(value: UInt64, t: UInt64)] = []
        var clock = 10 * Self.second
        for index in 0..<5_000 {
            clock += UInt64.random(in: 0...40_000_000, using: &random)
            if index % 1_000 == 999 { clock += 90 * Self.second }  // idle: every slice let go
            let t = clock - (UInt64.random(in: 0..<8, using: &random) == 0 ? UInt64.random(in: 0...2 * Self.second, using: &random) : 0)
            let value = random.lognormal(mu: 9, sigma: 1)
            series.record(value, atNanos: t)
            records.append((value, t))
            if index % 97 == 0 {
                series.advance(toNanos: clock)
                expectSnapshotsMatch(series, records, layout: layout, now: clock)
            }
        }
        #expect(series.windows.slots.count <= 20)
    }

    @Test("advancing the clock changes no snapshot")
    func advanceIsInvisibleToReads() {
        var random = SeededRandom(seed: 24)
        var series = WindowedHistogram()
        var t = 100 * Self.second
        for _ in 0..<1000 {
            t += UInt64.random(in: 0...5_000_000, using: &random)
            series.record(random.lognormal(mu: 8, sigma: 1), atNanos: t)
        }
        let now = t + Self.second / 2
        let before = (0..<3).map { series.snapshot(window: $0, nowNanos: now) }
        let cumulative = series.cumulative
        series.advance(toNanos: now)
        #expect((0..<3).map { series.snapshot(window: $0, nowNanos: now) } == before)
        #expect(series.cumulative == cumulative)
    }

    @Test("a window of one slice (the head, or one folded slot) is that slice: a merge's figures, kept when the series is written after")
    func soleSliceIsShared() {
        let tick = WindowLayout.standard.tickNanos
        let t = 100 * Self.second
        let quantiles = [0.01, 0.5, 0.99]
        var series = WindowedHistogram()
        for value: UInt64 in [5, 70, 900, 900, 12_345] { series.record(value, atNanos: t) }
        func expectMergedFigures(at now: UInt64) {
            for window in 0..<3 {
                var merged = Histogram()
                series.windows.merge(window: window, nowNanos: now, into: &merged)
                let snapshot = series.snapshot(window: window, nowNanos: now)
                #expect(snapshot == merged && snapshot.values(atQuantiles: quantiles) == merged.values(atQuantiles: quantiles))
                #expect(snapshot.sum == merged.sum && snapshot.min == merged.min && snapshot.max == merged.max)
            }
        }
        expectMergedFigures(at: t + 1)  // every window: the head alone
        let head = series.snapshot(window: Self.oneMinute, nowNanos: t + 1)
        series.record(7, atNanos: t + 2)  // the same tick: into the head
        #expect(head.count == 5 && head.min == 5 && head.max == 12_345)
        #expect(series.snapshot(window: Self.oneMinute, nowNanos: t + 2).count == 6)

        series.advance(toNanos: t + tick)  // the head holds every record: it stays, no slot is made
        #expect(!series.windows.headIsEmpty && series.windows.slots.isEmpty)
        expectMergedFigures(at: t + tick)  // every window: the head alone
        let kept = series.snapshot(window: Self.oneSecond, nowNanos: t + tick)
        series.record(1, atNanos: t + tick)  // the next tick: the head folds into the windows' slots
        series.advance(toNanos: t + 2 * tick)  // and folds again
        #expect(kept.count == 6 && kept.min == 5)
        expectMergedFigures(at: t + 2 * tick)  // the 1 s window two slots, the others one
        let slot = series.snapshot(window: Self.oneSecond, nowNanos: t + 2 * tick)
        series.record(2, atNanos: t + 2 * tick)
        series.record(3, atNanos: t + 3 * tick)  // the next tick: the head folds again
        #expect(slot.count == 7 && slot.min == 1)
        #expect(series.snapshot(window: Self.oneSecond, nowNanos: t + 3 * tick).count == 9)
        expectMergedFigures(at: t + 3 * tick)  // slots and the head, merged

        // 2 s on: the 1 s window holds the newest slot alone, the 1 min window one slot of all
        // (one 15 s slice), the 5 s window two.
        series.record(4, atNanos: t + 2 * Self.second)
        series.advance(toNanos: t + 2 * Self.second + tick)
        expectMergedFigures(at: t + 2 * Self.second + tick)
        #expect(series.snapshot(window: Self.oneSecond, nowNanos: t + 2 * Self.second + tick).count == 1)
        #expect(series.snapshot(window: Self.oneMinute, nowNanos: t + 2 * Self.second + tick).count == 10)
    }

    @Test(
        "a series whose records are all in one tick keeps them in its head: every window and all time read it, no slice is made, and it goes to all time once no window holds it"
    )
    func headHoldingEveryRecordStays() {
        let tick = WindowLayout.standard.tickNanos
        let t = 100 * Self.second + tick / 3
        var series = WindowedHistogram()
        var all = Histogram()
        for value: UInt64 in [3, 40, 40, 700] {
            series.record(value, atNanos: t + value)
            all.record(value)
        }
        func expectWindows(at now: UInt64, holding held: [Bool]) {
            for window in 0..<3 { #expect(series.snapshot(window: window, nowNanos: now) == (held[window] ? all : Histogram())) }
            #expect(series.cumulative == all && series.cumulativeCount == all.count)
        }
        var letGo = series.advance(toNanos: t + tick)
        #expect(!letGo)
        #expect(!series.windows.headIsEmpty && series.windows.slots.isEmpty && series.windows.headEnd == 0)
        expectWindows(at: t + tick, holding: [true, true, true])
        #expect(series.holdsTheSameRecords(window: 1, as: 0, nowNanos: t + tick))
        #expect(series.holdsTheSameRecords(window: 2, as: 1, nowNanos: t + tick))
        #expect(!series.windowMayHaveChanged(0, since: t + tick, to: t + Self.second))

        // 1.5 s on, the 1 s window has let it go (it covers 1 to 1.25 s); the others hold it.
        let later = t + 3 * Self.second / 2
        letGo = series.advance(toNanos: later)
        #expect(!letGo)
        expectWindows(at: later, holding: [false, true, true])
        #expect(series.windowMayHaveChanged(0, since: t + tick, to: later))
        #expect(!series.windowMayHaveChanged(2, since: t + tick, to: later))
        #expect(!series.holdsTheSameRecords(window: 1, as: 0, nowNanos: later))
        #expect(series.holdsTheSameRecords(window: 2, as: 1, nowNanos: later))

        // Past the 1 min window and its last slice: the head is all time's, moved, not merged.
        let gone = t + 76 * Self.second
        letGo = series.advance(toNanos: gone)
        #expect(letGo)
        #expect(series.windows.headIsEmpty && series.windows.slots.isEmpty && series.windows.head.allocatedBytes == 0)
        expectWindows(at: gone, holding: [false, false, false])
        #expect(series.windowMayHaveChanged(2, since: later, to: gone))
        #expect(!series.holdsTheSameRecords(window: 2, as: 1, nowNanos: gone))

        // A later record is a new head, not every record (all time holds the first ones): the
        // windows do not share it; a record of the tick after folds it.
        series.record(9, atNanos: gone)
        all.record(9)
        #expect(series.cumulative == all && !series.holdsTheSameRecords(window: 1, as: 0, nowNanos: gone))
        series.record(10, atNanos: gone + tick)
        all.record(10)
        #expect(!series.windows.slots.isEmpty && series.cumulative == all)
        #expect(series.snapshot(window: Self.oneSecond, nowNanos: gone + tick).buckets.map(\.lowerBound) == [9, 10])
    }

    @Test("a record drained after a snapshot's advance, from the tick before it, takes the head, not the late path")
    func advanceLeavesTheHeadToTheNextRecord() {
        let tick = WindowLayout.standard.tickNanos
        let t = 100 * Self.second + tick / 2
        let now = t + 3 * tick
        var series = WindowedHistogram()
        series.record(0, atNanos: t - tick)
        series.record(1, atNanos: t)
        series.advance(toNanos: now)  // a snapshot's, while a backlog of t's tick waits to be drained
        #expect(series.windows.headIsEmpty)
        series.record(2, atNanos: t + 1)
        #expect(!series.windows.headIsEmpty && series.windows.headStart == t - t % tick)
        series.record(3, atNanos: now)  // the tick after: the head folds and moves on
        #expect(series.windows.headStart == now - now % tick)
        #expect(series.snapshot(window: Self.oneSecond, nowNanos: now).buckets.map(\.lowerBound) == [0, 1, 2, 3])
        #expect(series.snapshot(window: Self.oneSecond, nowNanos: now + Self.second).buckets.map(\.lowerBound) == [3])
        #expect(series.cumulative.count == 4 && series.cumulativeCount == 4)
    }

    @Test("a head that took 512 values of few buckets in a tick is paged for the next; the slices it folds into stay lists")
    func busyHeadIsPagedAndItsSlicesStaySparse() {
        let tick = WindowLayout.standard.tickNanos
        let start = 100 * Self.second
        var series = WindowedHistogram()
        var all = Histogram()
        for index in 0..<600 {  // 64 buckets, 600 values: a list, short of any histogram's paging
            let value = UInt64(1_000 + index % 64)
            series.record(value, atNanos: start + UInt64(index) * 1_000)
            all.record(value)
        }
        #expect(series.windows.head.isSparse)
        series.record(1_000, atNanos: start + tick)  // the next tick: the head folds
        all.record(1_000)
        #expect(!series.windows.head.isSparse && series.windows.head.count == 1)
        #expect(series.windows.allTimeBeforeHead.isSparse && series.windows.allTimeBeforeHead.count == 600)
        #expect(series.windows.slots.allSatisfy { $0.slice.isSparse })
        // Paged, it stays so (its capacity kept), as any histogram does.
        series.record(1_001, atNanos: start + 2 * tick)
        all.record(1_001)
        #expect(!series.windows.head.isSparse)
        #expect(series.cumulative == all)
        #expect(series.snapshot(window: Self.oneSecond, nowNanos: start + 2 * tick) == all)
    }

    @Test("a window covers between its length and one slice more, and never time before the first record")
    func coveredSpanIsTheWindowPlusAtMostOneSlice() {
        var series = WindowedHistogram()
        series.record(1, atNanos: 100 * Self.second)
        #expect(
            series.coveredNanos(window: Self.oneMinute, nowNanos: 100 * Self.second + Self.second / 2)
                == Self.second / 2)
        for offset: UInt64 in [0, 1, Self.second / 8, Self.second / 4 - 1] {
            let now = 1000 * Self.second + offset
            for window in 0..<3 {
                let covered = series.coveredNanos(window: window, nowNanos: now)
                let length = WindowLayout.standard.windowNanos[window]
                #expect(covered >= length && covered < length + WindowLayout.standard.sliceNanos[window])
            }
        }
    }

    @Test("memory stays at its high-water mark as slices rotate")
    func memoryIsBoundedAcrossRotation() {
        var series = WindowedHistogram()
        let pattern: [UInt64] = (0..<64).map { 1000 + $0 * 977 }
        var bytesAfterTwoMinutes = 0
        for step in 0..<18_000 {  // 3 minutes of a record every 10 ms
            let t = UInt64(step) * 10_000_000
            series.record(pattern[step % pattern.count], atNanos: t)
            if step == 12_000 { bytesAfterTwoMinutes = series.allocatedBytes }
        }
        #expect(bytesAfterTwoMinutes > 0)
        #expect(series.allocatedBytes == bytesAfterTwoMinutes)
        // The 16 slices see at most 64 distinct values each: sparse lists of 8 B entries, not pages.
        let slices = series.allocatedBytes - series.windows.allTimeBeforeHead.allocatedBytes
        #expect(slices <= 16 * 64 * 8 * 2)
    }

    /// A phased layout's slices start `phase` earlier: its windows must hold at every time what
    /// the aligned layout's hold with every time `phase` later (checked against brute force
    /// above), and cover as long a span.
    @Test(
        "phased windows hold, cover and change as aligned ones do with every time later by the phase",
        arguments: [Self.second / 4, 7 * Self.second + Self.second / 4, 14 * Self.second + 3 * Self.second / 4])
    func phasedWindowsAreAlignedOnesShifted(phase: UInt64) {
        var random = SeededRandom(seed: phase)
        let phased = WindowLayout.standard.phased(byNanos: phase)
        var series = WindowedHistogram(layout: phased)
        var shifted = WindowedHistogram(layout: .standard)
        // Past the clock's first minutes: a window's first slice is clamped to 0 there (see
        // `firstSliceID`), at other times in the two layouts.
        var clock: UInt64 = 100 * Self.second
        var newest: UInt64 = 0
        var lastNow = clock
        for index in 0..<6_000 {
            clock += UInt64.random(in: 0...40_000_000, using: &random)
            var t = clock
            switch UInt64.random(in: 0..<100, using: &random) {
            case 0..<10: t -= UInt64.random(in: 0...300_000_000, using: &random)
            case 10: t -= min(t, UInt64.random(in: 0...90 * Self.second, using: &random))
            default: break
            }
            let value = random.lognormal(mu: 10, sigma: 2)
            series.record(value, atNanos: t)
            shifted.record(value, atNanos: t + phase)
            newest = max(newest, t)
            guard index % 97 == 0 else { continue }
            // And the moments the newest record's slice leaves each window, and just before.
            let leaving = phased.windowNanos.indices.map { window in
                let slice = phased.sliceID(window: window, atNanos: newest)
                return phased.sliceStartNanos(window: window, sliceID: slice + UInt64(phased.slicesPerWindow) + 1)
            }
            for now in [newest, newest + Self.second / 3, newest + 7 * Self.second] + leaving + leaving.map({ $0 - 1 }) {
                for window in phased.windowNanos.indices {
                    let what = "window \(window) at \(now)"
                    let (later, held) = (now + phase, series.snapshot(window: window, nowNanos: now))
                    #expect(held == shifted.snapshot(window: window, nowNanos: later), "\(what)")
                    let covered = series.coveredNanos(window: window, nowNanos: now)
                    #expect(covered == shifted.coveredNanos(window: window, nowNanos: later), "\(what)")
                    if now >= lastNow {
                        #expect(
                            series.windowMayHaveChanged(window, since: lastNow, to: now)
                                == shifted.windowMayHaveChanged(window, since: lastNow + phase, to: now + phase), "\(what)")
                    }
                }
            }
            lastNow = newest
            series.advance(toNanos: newest)
            shifted.advance(toNanos: newest + phase)
        }
        // Slices start a whole number of ticks earlier: a phase between ticks is rounded down.
        #expect(WindowLayout.standard.phased(byNanos: phase + 1).slicePhaseNanos == phased.slicePhaseNanos)
        #expect(phased.slicePhaseNanos == WindowLayout.standard.sliceNanos.map { phase % $0 })
        #expect(phased != WindowLayout.standard)
    }

    /// What a snapshot skips on: until `holdsTheSameUntil` a window holds the same values and its
    /// covered span starts at the same time (only a rate's end moves), and at that time the start
    /// moves. Records now and then, some late, on a phased layout; looked at from each record's
    /// time through the minute after.
    @Test(
        "a window holds the same values from the same span start until the time it says, and its start moves then",
        arguments: [0, 7 * Self.second + Self.second / 4])
    func holdsTheSameUntilItSays(phase: UInt64) {
        var random = SeededRandom(seed: 41 + phase)
        let layout = WindowLayout.standard.phased(byNanos: phase)
        var series = WindowedHistogram(layout: layout)
        var clock: UInt64 = 100 * Self.second
        var checked = 0
        for _ in 0..<300 {
            clock += UInt64.random(in: 0...3 * Self.second, using: &random)
            let late = UInt64.random(in: 0..<10, using: &random) == 0 ? UInt64.random(in: 0...2 * Self.second, using: &random) : 0
            series.record(random.lognormal(mu: 10, sigma: 2), atNanos: clock - late)
            for now in [clock, clock + Self.second / 3, clock + 4 * Self.second, clock + 40 * Self.second] {
                for window in layout.windowNanos.indices {
                    let until = series.holdsTheSameUntil(window: window, nowNanos: now)
                    #expect(until > now)
                    let held = series.snapshot(window: window, nowNanos: now)
                    let from = series.coveredFromNanos(window: window, nowNanos: now)
                    for later in [now + 1, now + (until - now) / 2, until - 1] {
                        let what = "window \(window) at \(later) of \(now)...\(until)"
                        #expect(series.snapshot(window: window, nowNanos: later) == held, "\(what)")
                        #expect(series.coveredFromNanos(window: window, nowNanos: later) == from, "\(what)")
                    }
                    let moved = series.coveredFromNanos(window: window, nowNanos: until)
                    #expect(moved > from, "window \(window): its start moves at \(until)")
                    checked += 1
                }
            }
        }
        #expect(checked == 300 * 4 * 3)
    }
}
