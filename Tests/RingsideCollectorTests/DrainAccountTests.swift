@testable import RingsideCollector
import Testing

/// What the drain loop serves rings by: cost, proof, suspicion and quarantine, judged over time.
@Suite("DrainAccount: a ring's drain cost and invalid records over time")
struct DrainAccountTests {
    private let second: UInt64 = 1_000_000_000

    @Test("a ring is proven by 4,096 valid records; invalid ones never count towards it")
    func proof() {
        var account = DrainAccount()
        #expect(!account.isProven)
        _ = account.charge(costNanos: 1_000, records: 4_095, invalid: 0, nowNanos: second)
        #expect(!account.isProven)
        _ = account.charge(costNanos: 1_000, records: 99, invalid: 99, nowNanos: 2 * second)
        #expect(!account.isProven, "those 99 were all invalid")
        _ = account.charge(costNanos: 1_000, records: 1, invalid: 0, nowNanos: 3 * second)
        #expect(account.isProven)
    }

    @Test("the recent cost halves each second; an invalid record makes the ring suspect for 10 s")
    func costAndSuspicion() {
        var account = DrainAccount()
        _ = account.charge(costNanos: 8_000, records: 10, invalid: 1, nowNanos: second)
        #expect(account.recentCost(nowNanos: second) == 8_000)
        #expect(abs(account.recentCost(nowNanos: 2 * second) - 4_000) < 1)
        #expect(abs(account.recentCost(nowNanos: 4 * second) - 1_000) < 1)
        #expect(account.isSuspect(nowNanos: 10 * second))
        #expect(!account.isSuspect(nowNanos: 11 * second))
    }

    @Test("invalid records are judged over a second: 128 and 10 % quarantine, however they are sliced")
    func judgedOverASecond() {
        var account = DrainAccount()
        // 127 invalid in a second of many valid ones: not enough invalid records.
        var verdict = account.charge(costNanos: 1, records: 1_000, invalid: 127, nowNanos: second)
        #expect(verdict == nil)
        // 128 invalid, but under 10 % of the second's records.
        verdict = account.charge(costNanos: 1, records: 1_000, invalid: 1, nowNanos: second + 1)
        #expect(verdict == nil)
        // A new second: one valid record in eight, 16 records at a time, is caught within the second.
        var caught: (nanos: UInt64, reason: String)?
        for slice in 0..<100 where caught == nil {
            caught = account.charge(costNanos: 1, records: 16, invalid: 14, nowNanos: 3 * second + UInt64(slice))
        }
        #expect(caught?.nanos == 5 * second)
        #expect(caught?.reason.contains("quarantined for 5 s") == true && caught?.reason.contains("were invalid") == true)
    }

    @Test("quarantines double up to 60 s while the ring goes on; a clean second forgives")
    func doublingAndForgiveness() {
        var account = DrainAccount()
        var lengths: [UInt64] = []
        for round in 0..<6 {
            let now = UInt64(round) * 100 * second
            lengths.append(account.charge(costNanos: 1, records: 200, invalid: 200, nowNanos: now)?.nanos ?? 0)
        }
        #expect(lengths == [5, 10, 20, 40, 60, 60].map { $0 * second })
        // A clean second (records, none invalid), then garbage again: 5 s once more.
        _ = account.charge(costNanos: 1, records: 10, invalid: 0, nowNanos: 1_000 * second)
        let after = account.charge(costNanos: 1, records: 200, invalid: 200, nowNanos: 1_002 * second)
        #expect(after?.nanos == 5 * second)
    }
}
