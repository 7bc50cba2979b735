import Ringside
import RingsideSnapshot
import Testing

@Suite("A snapshot's series in parts: read by position as one list, each part shared with its bot")
struct SeriesListTests {
    static func series(_ id: UInt64) -> SeriesSnapshot {
        let metric = MetricDescriptor(
            index: UInt32(id), name: "m\(id)", kind: .gauge, unit: .none, encodedLabels: "", help: "", sampleEvery: 1)
        return SeriesSnapshot(ring: "bot", metric: metric, id: id, windows: [WindowStats()])
    }

    /// Parts of 3, 0, 1 and 4 series (the empty one adds nothing).
    static let parts: [[SeriesSnapshot]] = [[1, 2, 3], [], [4], [5, 6, 7, 8]].map { $0.map(series) }

    @Test("Positions, iteration, enumeration and slices read the parts in order, as one flat array would")
    func readsAsOneList() {
        var list = SeriesList()
        for part in Self.parts { list.append(part: part) }
        let flat = Self.parts.flatMap { $0 }
        #expect(list.count == 8)
        #expect(list.map(\.id) == flat.map(\.id))
        #expect(list.indices.map { list[$0].id } == flat.map(\.id))
        #expect(list.enumerated().map { [$0.offset, Int($0.element.id)] } == flat.enumerated().map { [$0.offset, Int($0.element.id)] })
        #expect(list.indices.map { position in list.withSeries(at: position) { $0.pointee.id } } == flat.map(\.id))
        var inPlace: [[UInt64]] = []
        list.forEachInPlace { position, series in inPlace.append([UInt64(position), series.pointee.id]) }
        #expect(inPlace == flat.enumerated().map { [UInt64($0.offset), $0.element.id] })
        #expect(list[2..<5].map(\.id) == [3, 4, 5])
        #expect(list.reversed().map(\.id) == flat.reversed().map(\.id))
        #expect(SeriesList().isEmpty && SeriesList().first == nil)
        let literal: SeriesList = [Self.series(9), Self.series(10)]
        #expect(literal.map(\.id) == [9, 10])
    }

    @Test("A part is the array appended, not a copy; writing a series through the list copies its part and leaves the bot's as it was")
    func partsAreSharedAndCopiedOnWrite() {
        let kept = Self.parts[3]
        var list = SeriesList(Self.parts[0])
        list.append(part: kept)
        let keptAddress = kept.withUnsafeBufferPointer { $0.baseAddress! }
        #expect(list.withSeries(at: 3) { $0 } == keptAddress)
        #expect(list.withSeries(at: 5) { $0 } == keptAddress + 2)

        list[4].lastValue = 42
        #expect(list[4].lastValue == 42)
        #expect(kept[1].lastValue == nil)
        #expect(list.withSeries(at: 3) { $0 } != keptAddress)
        #expect(list.map(\.id) == [1, 2, 3, 5, 6, 7, 8])
    }
}
