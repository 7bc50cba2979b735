// `span-clock`: the span clock a process chooses at its first attach (THE SPAN CLOCK in
// ringside.h), which only a process of its own can show: the choice is made once a process, from
// its environment.
import CRingside
import Foundation
import Ringside

/// `span-clock`: attaches `ring`, prints "clock C start S" (Bot.spanClock, and the clock a span's
/// start read: tsc when it carries RS_SPAN_TSC_BIT) and "described TEXT"
/// (Bot.spanClockDescription), and times a 20 ms sleep with `measure` into histogram "clock_span"
/// (ns). With `select` (tsc or monotonic), starts a second 20 ms span, switches the clock with
/// rs_span_clock_select before stopping it (it ends on the clock it started on), prints "selected
/// C start S" and "described TEXT", and times a third 20 ms span on the new clock. Exits.
func spanClock(ring: String, directory: String?, select: String?) throws -> Never {
    let bot = try Bot.attach(ring, directory: directory, options: .init(laneCapacity: 1024))
    let span = try bot.histogram("clock_span", unit: .nanoseconds)
    func report(_ label: String) {
        let start = rs_span_clock_start() & RS_SPAN_TSC_BIT != 0 ? "tsc" : "monotonic"
        print("\(label) \(Bot.spanClock == .tsc ? "tsc" : "monotonic") start \(start)")
        print("described \(Bot.spanClockDescription)")
    }
    report("clock")
    span.measure { _ = usleep(20_000) }
    if let select {
        let timing = span.startTiming()
        usleep(20_000)
        guard rs_span_clock_select(select == "tsc" ? RS_SPAN_CLOCK_TSC : RS_SPAN_CLOCK_MONOTONIC) == 0 else {
            fail("rs_span_clock_select(\(select)) refused")
        }
        timing.stop()
        report("selected")
        span.measure { _ = usleep(20_000) }
    }
    exit(0)
}
