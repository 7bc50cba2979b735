import CRingside
import Foundation
import Ringside
import RingsideAggregation
import RingsideExport
import RingsideSnapshot
import RingsideTestSupport
import Testing

@testable import RingsideCollector

@Suite("Windows slid between publishes: figures kept where no slice left, made again where one did")
struct WindowSlideTests {
    /// A publish keeps a window's figures when no slice of it left since the last (only a rate
    /// moves: a counter's is taken again, a histogram's read from where its span starts), and
    /// skips a window that was empty and took nothing: every figure it shows must be what the
    /// window holds then, computed from scratch.
    /// With slices aligned to the clock, and phased as a collector phases a bot's (slices that
    /// start 29 ticks earlier: 7.25 s, past the 1 s and 5 s windows' slices).
    @Test(
        "over two minutes of passes, with values now and then, every window shows what it holds at each pass",
        arguments: [0, 7_250_000_000])
    func keptFiguresEqualComputed(phaseNanos: UInt64) throws {
        let layout = WindowLayout.standard.phased(byNanos: phaseNanos)
        try withRingDirectory { directory in
            let bot = try Bot.attach("slide", directory: directory.path)
            let latency = try bot.histogram("latency")
            let slippage = try bot.histogram("slippage", signed: true)
            let fills = try bot.counter("fills")
            let depth = try bot.gauge("depth")
            var passes = try Passes(of: bot, in: directory, layout: layout, quantiles: [0.5, 0.99])
            let quantiles = passes.quantiles
            // Passes on a clock of their own, behind the real one: a record drained at a pass is
            // clamped to its time, so values land where the test puts them.
            let clock = rs_clock_precise_ns()
            try #require(clock > 400_000_000_000, "the monotonic clock is past 400 s")
            let start = clock - 400_000_000_000
            var checkedKept = 0
            // What a pass showed and until when it said that stays (a publish reuses it till then).
            var last: (versions: [UInt64], untilNanos: UInt64)?
            var checkedUnchanged = 0
            for step in 0..<190 {
                let now = start + UInt64(step) * 650_000_000
                // Values at a few passes only, far apart: windows then empty slice by slice.
                let wrote = [0, 3, 20, 21, 70, 140].contains(step)
                if wrote {
                    latency.record(UInt64(100 + step))
                    latency.record(UInt64(5_000 * (step + 1)))
                    slippage.record(-Int64(step + 1))
                    fills.increment(by: UInt64(step + 2))
                    depth.set(Double(step) - 10)
                }
                let shown = try passes.pass(nowNanos: now)
                let aggregator = passes.aggregator
                let byName = Dictionary(uniqueKeysWithValues: shown.map { ($0.metric.name, $0.windows) })
                let versionsShown = shown.map { $0.version ^ $0.wholeVersion << 32 }
                if !wrote, let last, now < last.untilNanos {
                    #expect(versionsShown == last.versions, "pass \(step): a bot said to stay as it was changed")
                    checkedUnchanged += 1
                }
                let until = aggregator.seriesUnchangedUntilNanos
                let holdsValues = shown.contains { !$0.windows.allSatisfy(\.isEmpty) }
                #expect(until > now && (until == .max) == !holdsValues, "pass \(step)")
                last = (versionsShown, until)
                let tables = aggregator.tables
                let tick = layout.tickNanos
                for window in layout.windowNanos.indices {
                    let what = "window \(window) at pass \(step)"
                    // A counter's rate is taken over the span covered when its window last slid or took values.
                    let slice = layout.sliceID(window: window, atNanos: now)
                    let rateTaken = wrote || step == 0 || slice != layout.sliceID(window: window, atNanos: now - 650_000_000)
                    let unsigned = tables.histograms[0].windows
                    let held = unsigned.snapshot(window: window, nowNanos: now)
                    let latencyShown = try #require(byName["latency"]?[window])
                    #expect(latencyShown.count == held.count && latencyShown.sum == held.sum, "\(what)")
                    // An empty window shows no extremes nor quantiles (no data), never 0.
                    #expect(latencyShown.min == (held.isEmpty ? nil : Int128(held.min)), "\(what)")
                    #expect(latencyShown.max == (held.isEmpty ? nil : Int128(held.max)), "\(what)")
                    let heldQuantiles = held.isEmpty ? nil : held.values(atQuantiles: quantiles).map { Int128($0) }
                    #expect(latencyShown.quantileValues == heldQuantiles, "\(what)")
                    // Where its span starts, at every pass; the rate read from it is the window's now.
                    let from = held.isEmpty ? 0 : unsigned.coveredFromNanos(window: window, nowNanos: now)
                    #expect(latencyShown.coveredFromNanos == from, "\(what)")
                    let covered = max(unsigned.coveredNanos(window: window, nowNanos: now), tick)
                    let rate = held.isEmpty ? 0 : Double(held.count) * 1e9 / Double(covered)
                    #expect(latencyShown.valuesPerSecond(atNanos: now, tickNanos: tick) == rate, "\(what)")

                    let signedHeld = tables.signedHistograms[0].windows.snapshot(window: window, nowNanos: now)
                    let slippageShown = try #require(byName["slippage"]?[window])
                    #expect(slippageShown.count == signedHeld.count && slippageShown.sum == signedHeld.sum, "\(what)")
                    let signedQuantiles = signedHeld.isEmpty ? nil : signedHeld.values(atQuantiles: quantiles).map { Int128($0) }
                    #expect(slippageShown.quantileValues == signedQuantiles, "\(what)")
                    let signed = tables.signedHistograms[0].windows
                    let signedFrom = signedHeld.isEmpty ? 0 : signed.coveredFromNanos(window: window, nowNanos: now)
                    #expect(slippageShown.coveredFromNanos == signedFrom, "\(what)")

                    let fillsShown = try #require(byName["fills"]?[window])
                    let counter = tables.counters[0].windows
                    #expect(fillsShown.increase == counter.sum(window: window, nowNanos: now), "\(what)")
                    #expect(!rateTaken || fillsShown.rate == counter.rate(window: window, nowNanos: now), "\(what)")

                    let depthShown = try #require(byName["depth"]?[window])
                    let range = tables.gauges[0].windows.range(window: window, nowNanos: now)
                    #expect(depthShown.gaugeMin == range?.min && depthShown.gaugeMax == range?.max, "\(what)")
                    if !held.isEmpty && !unsigned.windowMayHaveChanged(window, since: now - 650_000_000, to: now) { checkedKept += 1 }
                }
            }
            #expect(checkedKept > 50, "passes where a window kept its figures were checked: \(checkedKept)")
            #expect(checkedUnchanged > 50, "passes a publish would have skipped were checked: \(checkedUnchanged)")
        }
    }

    /// A series younger than a window keeps every value it recorded there, and its span there
    /// starts at its first record: nothing it shows moves but a histogram's rate, which is read,
    /// so it is made again only when its values leave a window (not at every slice).
    @Test("a histogram and a gauge that recorded once are made again only as their values leave each window")
    func youngSeriesMadeAgainOnlyAsValuesLeave() throws {
        let layout = WindowLayout.standard
        try withRingDirectory { directory in
            let bot = try Bot.attach("young", directory: directory.path)
            let latency = try bot.histogram("latency")
            let depth = try bot.gauge("depth")
            var passes = try Passes(of: bot, in: directory, layout: layout, quantiles: [0.5])
            let clock = rs_clock_precise_ns()
            try #require(clock > 200_000_000_000, "the monotonic clock is past 200 s")
            let start = clock - 200_000_000_000
            latency.record(250)
            depth.set(7)
            var shown: [String: [UInt64]] = [:]
            var untils: [UInt64] = []
            var checkedShared = 0
            // Passes every 100 ms for 80 s: past the minute window and its last slice.
            for step in 0..<800 {
                let now = start + UInt64(step) * 100_000_000
                for series in try passes.pass(nowNanos: now) {
                    if shown[series.metric.name]?.last != series.version { shown[series.metric.name, default: []].append(series.version) }
                    guard series.metric.kind == .histogram else { continue }
                    // Windows that hold its one tick show the same figures, made once: one
                    // quantile list between them, not one each.
                    let lists = series.windows.map { $0.quantileValues?.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } }
                    for window in 1..<lists.count where series.windows[window - 1].count == 1 && series.windows[window].count == 1 {
                        #expect(lists[window] == lists[window - 1], "pass \(step), window \(window)")
                        checkedShared += 1
                    }
                }
                let until = passes.aggregator.seriesUnchangedUntilNanos
                if untils.last != until { untils.append(until) }
            }
            // Its first figures, then the value leaving the 1 s, 5 s and 1 m windows.
            #expect(shown["latency"]?.count == 4, "\(shown)")
            #expect(shown["depth"]?.count == 4, "\(shown)")
            // Until each window lets the value go: the slice after the window's length and a slice.
            let origin = start - start % layout.tickNanos
            let leaving = layout.windowNanos.indices.map { window in
                layout.sliceStartNanos(
                    window: window, sliceID: layout.sliceID(window: window, atNanos: origin) + UInt64(layout.slicesPerWindow) + 1)
            }
            #expect(untils == leaving + [.max], "\(untils) \(leaving)")
            #expect(checkedShared > 50, "passes whose windows shared their figures were checked: \(checkedShared)")
        }
    }

    /// A collector phases each bot's windows by its name, so that the minute windows of many bots'
    /// series do not all move a slice in one snapshot.
    @Test("bots' windows slide at phases their names spread over the longest slice, the same in every run")
    func botsSlideAtPhasesOfTheirOwn() {
        let standard = WindowLayout.standard
        let phases = (0..<240).map { BotAggregator.layout(standard, forBot: "bot-\($0)").slicePhaseNanos }
        #expect(BotAggregator.layout(standard, forBot: "bot-7") == BotAggregator.layout(standard, forBot: "bot-7"))
        let longest = phases.map { $0[2] }
        #expect(longest.allSatisfy { $0 < standard.sliceNanos[2] && $0 % standard.tickNanos == 0 })
        // 60 phases of a tick in the 15 s slice: 240 bots fill most, none holds many.
        let bots = Dictionary(grouping: longest, by: { $0 }).mapValues(\.count)
        #expect(bots.count >= 50, "\(bots.count) phases of 60")
        #expect(bots.values.max()! <= 12, "\(bots.values.max()!) bots share a phase")
        // The shorter windows' slices are phased by the same time.
        #expect(phases.allSatisfy { $0[0] == $0[2] % standard.sliceNanos[0] && $0[1] == $0[2] % standard.sliceNanos[1] })
    }
}

/// A bot's series kept by an aggregator as a collector keeps them, and the collector's pass over
/// them at a time the test gives: its registry, its records (each at that time), its cells, and
/// the snapshots.
private struct Passes {
    let consumer: RingConsumer
    var aggregator: BotAggregator
    let source: Int
    let quantiles: [Double]
    var versions = VersionCounter()
    let room: (BotAggregator.Usage) -> BotAggregator.Usage = { _ in BotAggregator.Usage(series: 100, bytes: .max) }

    init(of bot: Bot, in directory: RingDirectory, layout: WindowLayout, quantiles: [Double]) throws {
        consumer = try RingConsumer(bot.name, directory: directory)
        aggregator = BotAggregator(ring: bot.name, layout: layout, quantiles: quantiles.count, pageBytes: PrometheusExporter.pageBytes)
        source = aggregator.addSource(pid: 101)
        self.quantiles = quantiles
    }

    mutating func pass(nowNanos now: UInt64) throws -> [SeriesSnapshot] {
        aggregator.addMetrics(of: consumer, source: source, admitting: room)
        _ = try aggregator.drain(consumer, source: source, limitPerLane: .max, nowNanos: now, admitting: room, counted: { _, _ in })
        aggregator.sampleCells(of: consumer, source: source, nowNanos: now)
        return aggregator.snapshots(nowNanos: now, quantiles: quantiles, versions: &versions)
    }
}
