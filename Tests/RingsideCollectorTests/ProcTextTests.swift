@testable import RingsideCollector
import Testing

private func bytes(_ text: String) -> ArraySlice<UInt8> { Array(text.utf8)[...] }

/// A `stat` line: pid, `(name)`, then fields 3 to 52 as given (the rest 0).
private func statLine(pid: Int = 4242, name: String, _ fields: [Int: String]) -> String {
    "\(pid) (\(name)) " + (3...52).map { fields[$0] ?? "0" }.joined(separator: " ") + "\n"
}

@Suite("The text of /proc files: stat, schedstat and status, parsed without a process")
struct ProcTextTests {
    @Test("schedstat: run ns, wait ns, timeslices; anything else is nil")
    func schedstat() {
        #expect(SchedStat(bytes("111847329 217272530 313\n")) == SchedStat(runNanos: 111_847_329, waitNanos: 217_272_530, timeslices: 313))
        #expect(SchedStat(bytes("0 0 0")) == SchedStat(runNanos: 0, waitNanos: 0, timeslices: 0))
        #expect(SchedStat(bytes("18446744073709551615 1 2\n"))?.runNanos == .max)
        for garbage in [
            "", "\n", "1 2\n", "1 2 3 4\n", "1  2 3\n", "1 2 x\n", "-1 2 3\n", "18446744073709551616 1 2\n", "1 2 3\n\n",
            "1\t2\t3\n", " 1 2 3\n", "\u{0}\u{0}\u{0}",
        ] {
            #expect(SchedStat(bytes(garbage)) == nil, "\(garbage.debugDescription)")
        }
    }

    @Test("status: the voluntary and involuntary context switch lines, wherever they are, once each")
    func contextSwitches() {
        let status = """
            Name:\tfill-router
            State:\tS (sleeping)
            Tgid:\t4242
            voluntary_ctxt_switches:\t220
            nonvoluntary_ctxt_switches:\t93

            """
        #expect(ContextSwitches(status: bytes(status)) == ContextSwitches(voluntary: 220, involuntary: 93))
        // The order of the lines does not matter; spaces or a tab after the colon.
        #expect(
            ContextSwitches(status: bytes("nonvoluntary_ctxt_switches: 5\nvoluntary_ctxt_switches: 7"))
                == ContextSwitches(voluntary: 7, involuntary: 5))
        for broken in [
            "", "voluntary_ctxt_switches:\t220\n",  // cut short: the second line is missing
            "voluntary_ctxt_switches:\t220\nnonvoluntary_ctxt_switches:\tmany\n",
            "voluntary_ctxt_switches:\t220\nnonvoluntary_ctxt_switches:\t\n",
            "voluntary_ctxt_switches:\t1\nvoluntary_ctxt_switches:\t2\nnonvoluntary_ctxt_switches:\t3\n",  // twice
            "Xvoluntary_ctxt_switches:\t1\nnonvoluntary_ctxt_switches:\t3\n",
            String(repeating: "\u{FF}", count: 300),
        ] {
            #expect(ContextSwitches(status: bytes(broken)) == nil, "\(broken.debugDescription)")
        }
    }

    @Test("status: the thread group and the four uids and gids; one user only when each four are one")
    func taskIdentity() {
        let status = """
            Name:\tUid: 0 0 0 0
            Umask:\t0022
            State:\tS (sleeping)
            Tgid:\t4242
            Ngid:\t0
            Pid:\t4243
            PPid:\t1
            Uid:\t65534\t65534\t65534\t65534
            Gid:\t65534\t65534\t65534\t65534
            Groups:\t

            """
        let nobody = Credentials(uids: [65_534, 65_534, 65_534, 65_534], gids: [65_534, 65_534, 65_534, 65_534])
        #expect(TaskIdentity(status: bytes(status)) == TaskIdentity(threadGroup: 4_242, credentials: nobody))
        #expect(nobody.soleUser == 65_534)
        // A set-user-ID program its user started: real uid theirs, effective and saved root's.
        #expect(Credentials(uids: [65_534, 0, 0, 0], gids: [65_534, 65_534, 65_534, 65_534]).soleUser == nil)
        // A set-group-ID one; and root acting as nobody for a moment (seteuid).
        #expect(Credentials(uids: [1_000, 1_000, 1_000, 1_000], gids: [1_000, 42, 42, 42]).soleUser == nil)
        #expect(Credentials(uids: [0, 65_534, 0, 65_534], gids: [0, 0, 0, 0]).soleUser == nil)
        for broken in [
            "", "Tgid:\t1\nUid:\t0\t0\t0\t0\n",  // no Gid
            "Tgid:\t1\nUid:\t0\t0\t0\nGid:\t0\t0\t0\t0\n",  // three uids
            "Tgid:\t1\nUid:\t0\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n",  // five
            "Tgid:\t1\nUid:\t0\t0\t0\t4294967296\nGid:\t0\t0\t0\t0\n",  // past 2^32 - 1
            "Tgid:\t-1\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n",
            "Tgid:\t2147483648\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n",
            "Tgid:\t1\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nUid:\t0\t0\t0\t0\n",  // twice
            "Tgid:\t1\nTgid:\t2\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n",
            String(repeating: "\u{FF}", count: 300),
        ] {
            #expect(TaskIdentity(status: bytes(broken)) == nil, "\(broken.debugDescription)")
        }
    }

    @Test("a thread's stat: the last CPU (field 39), the start (22) and the name, past a name of spaces and parentheses")
    func threadStat() {
        let line = statLine(name: "md (feed) ) x", [3: "R", 22: "123456", 39: "1", 40: "0"])
        #expect(ThreadStat(bytes(line)) == ThreadStat(processor: 1, startTicks: 123_456, name: "md (feed) ) x"))
        #expect(ThreadStat(bytes(statLine(name: "", [39: "7"])))?.name == "")
        // Too few fields, no parentheses, a negative or huge CPU, letters: nil.
        #expect(ThreadStat(bytes("4242 (short) S 1 2 3\n")) == nil)
        #expect(ThreadStat(bytes("4242 no parentheses S 1 2 3")) == nil)
        #expect(ThreadStat(bytes(") 4242 ( x")) == nil)
        #expect(ThreadStat(bytes(statLine(name: "t", [39: "-1"]))) == nil)
        #expect(ThreadStat(bytes(statLine(name: "t", [39: "4294967296"]))) == nil)
        #expect(ThreadStat(bytes(statLine(name: "t", [22: "12a"]))) == nil)
        #expect(ThreadStat(bytes("")) == nil)
    }

    @Test("a process's stat: major faults, CPU ticks, threads, start and resident pages")
    func processStat() {
        let line = statLine(name: "bot", [12: "3", 14: "250", 15: "50", 20: "12", 22: "9876", 24: "4321"])
        #expect(
            ProcessStat(bytes(line))
                == ProcessStat(majorFaults: 3, cpuTicks: 300, threads: 12, startTicks: 9876, residentPages: 4321))
        #expect(ProcessStat(bytes(statLine(name: "bot", [24: "-2"])))?.residentPages == 0, "a moment's negative rss is none")
        #expect(ProcessStat(bytes(statLine(name: "bot", [14: "18446744073709551615", 15: "1"]))) == nil, "a sum past 2^64")
        #expect(ProcessStat(bytes(statLine(name: "bot", [20: "-1"]))) == nil)
        #expect(ProcessStat(bytes("4242 (bot) S 1 2 3 4 5 6 7 8 9 10")) == nil)
    }

    @Test("the unsigned number parser takes digits only, up to 2^64 - 1")
    func unsigned() {
        #expect(parseUnsigned(bytes("0")) == 0 && parseUnsigned(bytes("0042")) == 42)
        #expect(parseUnsigned(bytes("18446744073709551615")) == .max)
        for bad in ["", "-1", "+1", "1 ", "18446744073709551616", "99999999999999999999", "000000000000000000001", "1e3"] {
            #expect(parseUnsigned(bytes(bad)) == nil, "\(bad)")
        }
    }
}
