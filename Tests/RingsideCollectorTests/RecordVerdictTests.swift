import CRingside
#if canImport(Glibc)
import Glibc
#endif
import Ringside
@testable import RingsideCollector
import RingsideTestSupport
import Testing

/// The drain and `ringside-dump check` read records by one verdict (`RingRecord.fault`): a record
/// no producer writes is invalid to both, and only such records.
@Suite("The drain's verdict on a record is ringside-dump check's")
struct RecordVerdictTests {
    @Test(
        "records with unknown flags, an exemplar length without its flag, or an exemplar of no bytes are invalid to the drain and to RecordCheck alike; their values are not recorded"
    )
    func drainAgreesWithCheck() throws {
        try withBot("verdict", options: .init(laneCapacity: 64)) { directory, bot in
            let latency = try bot.histogram("latency", unit: .nanoseconds)
            for value in 1...6 { latency.record(UInt64(value)) }
            // The producer's six sound records, three of them then spoiled in the lane, as a hostile writer could.
            let spoiled = try spoilRecords(at: directory.path + "/ringside.verdict") { records in
                records[1].flags |= 0x04  // a flag the format has none of
                records[2].exemplar_length = 5  // an exemplar's length, no exemplar flag
                records[3].flags |= UInt8(RS_FLAG_EXEMPLAR)  // an exemplar of 0 bytes
            }
            var check = RecordCheck(metrics: nil)
            let problems = spoiled.enumerated().compactMap { cursor, record in check.problem(with: record, at: UInt64(cursor), lane: 0) }
            #expect(problems.count == 3, "\(problems)")
            #expect(problems.allSatisfy { $0.hasPrefix("record 1:") || $0.hasPrefix("record 2:") || $0.hasPrefix("record 3:") })

            let options = CollectorOptions(directory: directory)
            let collector = try Collector(options: options, log: CapturedLog().log)
            let snapshot = pass(collector)
            let ring = try #require(snapshot.ring("verdict"))
            #expect(ring.rejectedTotal == 3, "the drain rejects what the check finds")
            let series = try #require(snapshot.series("latency", ring: "verdict"))
            #expect(series.cumulativeCount == 3, "the sound records' values alone")
        }
    }

    /// Maps lane 0 of the bot file at `path`, lets `spoil` change its first records (as many as
    /// were written), and returns them as they now are.
    private func spoilRecords(at path: String, _ spoil: (inout [rs_record]) -> Void) throws -> [rs_record] {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw TestSupportError("cannot open \(path)") }
        defer { close(fd) }
        var info = stat()
        fstat(fd, &info)
        guard let base = mmap(nil, Int(info.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), base != MAP_FAILED else {
            throw TestSupportError("mmap \(path): errno \(errno)")
        }
        defer { munmap(base, Int(info.st_size)) }
        let header = base.load(as: rs_header.self)
        let lane = base + Int(header.lanes_offset)
        let written = Int(lane.load(fromByteOffset: laneHeaderOffset(\.write_cursor), as: UInt64.self))
        let slots = (lane + Int(header.lane_records_offset)).assumingMemoryBound(to: rs_record.self)
        var records = (0..<written).map { slots[$0] }
        spoil(&records)
        for index in records.indices { slots[index] = records[index] }
        return records
    }
}
