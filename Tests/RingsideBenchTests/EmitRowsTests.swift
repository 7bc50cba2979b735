import CRingside
import CRingsideBench
import Foundation
import Testing
@testable import RingsideBench
#if canImport(Glibc)
import Glibc
#endif

/// The emit rows that measure a record in a worker, and a span on each clock, run for a few
/// milliseconds: they run, and leave no process, file or clock switched behind. No timing is checked.
@Suite("Emit rows in a worker, and spans on each clock", .serialized)
struct EmitRowsTests {
    @Test("ringside.record.worker and c.floor.forked run in rounds beside the rows they are compared with")
    func workerRows() throws {
        let names = ["ringside.record", "ringside.record.worker", "c.floor", "c.floor.forked"]
        #expect(names.allSatisfy(EmitBenchmark.rowNames.contains))
        #expect(try BenchCommand.parse(["emit", "--row", "c.floor.forked"])?.rows == ["c.floor.forked"])
        let settings = BenchSettings(seconds: 0.05, rounds: 2, ringCapacity: 1 << 12)
        let report = try EmitBenchmark.run(settings, only: Set(names))
        #expect(report.rows.map(\.name) == names)
        for row in report.rows {
            #expect(row.samples > 0 && row.callsPerSecond > 0, "\(row.name)")
            #expect(row.roundP50s.count == 2 && row.floorRatio != nil, "\(row.name)")
        }
        #expect(report.method.contains("ringside.record.worker") && report.method.contains("c.floor.forked"))
    }

    @Test("the span rows run on the span clock and on CLOCK_MONOTONIC, and leave the process's span clock as they found it")
    func spanRows() throws {
        let names = ["ringside.span", "ringside.span.monotonic", "c.floor", "c.span", "c.span.monotonic", "clock.precise", "clock.tsc"]
        #expect(names.allSatisfy(EmitBenchmark.rowNames.contains))
        let clock = rs_span_clock()
        let settings = BenchSettings(seconds: 0.05, rounds: 2, ringCapacity: 1 << 12)
        let report = try EmitBenchmark.run(settings, only: Set(names))
        #expect(report.rows.map(\.name) == names)
        for row in report.rows {
            #expect(row.samples > 0 && row.callsPerSecond > 0, "\(row.name)")
        }
        #expect(rs_span_clock() == clock)
        #expect(report.machine.spanClock.hasPrefix(clock == RS_SPAN_CLOCK_TSC ? "tsc: " : "monotonic: "), "\(report.machine.spanClock)")
    }

    @Test("c.floor.before, the write before adaptive sampling, runs only when asked, in rounds beside c.floor")
    func beforeRow() throws {
        #expect(!EmitBenchmark.rowNames.contains("c.floor.before") && EmitBenchmark.allRowNames.contains("c.floor.before"))
        #expect(try BenchCommand.parse(["emit", "--row", "c.floor.before"])?.rows == ["c.floor.before"])
        let settings = BenchSettings(seconds: 0.05, rounds: 2, ringCapacity: 1 << 12)
        let report = try EmitBenchmark.run(settings, only: ["c.floor", "c.floor.before"])
        #expect(report.rows.map(\.name) == ["c.floor", "c.floor.before"])
        for row in report.rows {
            #expect(row.samples > 0 && row.callsPerSecond > 0 && row.roundP50s.count == 2, "\(row.name)")
        }
    }

    @Test("the forked floor's child writes its worker file, and is reaped with the file removed, also when it died")
    func forkedChild() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        var floor = rsb_floor()
        try #require(rsb_floor_open(&floor, scratch.path, "floor", 1 << 12) == 0, "\(String(cString: rsb_floor_error(&floor)))")
        defer { rsb_floor_close(&floor) }
        let values = LatencyValues()
        let out = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: 1024)
        defer { out.deallocate() }
        var timing = rsb_round_timing(warm_ns: 1_000_000, sample_ns: 1_000_000, run_ns: 1_000_000, batch: 4, reserved: 0)
        var forked = rsb_forked()
        defer { rsb_forked_stop(&forked) }
        func start() throws -> (pid: pid_t, path: String) {
            let started = rsb_forked_start(&forked, &floor, values.pointer, UInt64(LatencyValues.count - 1), out.count)
            try #require(started == 0, "\(String(cString: rsb_forked_error(&forked)))")
            return (forked.pid, String(cString: rsb_forked_worker_path(&forked)))
        }
        func reaped(_ pid: pid_t) -> Bool { waitpid(pid, nil, WNOHANG) == -1 && errno == ECHILD }

        // A child that answers: its first record made floor@<pid>; a round's batches come back.
        let child = try start()
        #expect(child.path == "\(scratch.path)/ringside.floor@\(child.pid)")
        #expect(FileManager.default.fileExists(atPath: child.path))
        var result = rsb_round()
        #expect(rsb_forked_round(&forked, &timing, out.baseAddress, out.count, &result) == 0)
        #expect(result.batches > 0 && result.batches <= UInt64(out.count) && result.calls > 0)
        rsb_forked_stop(&forked)
        #expect(forked.pid == 0 && reaped(child.pid))
        #expect(!FileManager.default.fileExists(atPath: child.path))

        // A child that died: the round fails at once, saying so, and nothing is left.
        let dead = try start()
        kill(dead.pid, SIGKILL)
        #expect(rsb_forked_round(&forked, &timing, out.baseAddress, out.count, &result) != 0)
        #expect(String(cString: rsb_forked_error(&forked)).contains("did not answer"))
        #expect(forked.pid == 0 && reaped(dead.pid))
        #expect(!FileManager.default.fileExists(atPath: dead.path))
    }
}
