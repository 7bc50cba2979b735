import CRingside
import Ringside
import RingsideCommandLine
import RingsideSystem
#if canImport(Glibc)
import Glibc
#endif

/// `ringside-emit`: writes values into a ring from a script, a cron job or a pipe, without
/// writing Swift. It attaches as the ring's producer (creating the ring if needed), registers
/// the metric, writes the values, and says how many it wrote.
package enum EmitTool {
    /// The help text; the default capacity is the library's, read, not copied.
    package static let usage = """
        usage: ringside-emit --ring NAME METRIC [options] [VALUE...]

        Attaches to the ring NAME as its producer (creating it if needed), registers METRIC, then
        writes the VALUEs given or, with none, one value per line of standard input as the lines
        arrive, until end of file (so `tail -f log | ringside-emit ...` works). Says how many it wrote.

        options:
          --ring NAME          the ring (1 to 200 of A-Z a-z 0-9 . _ -); created if it does not exist
          --kind KIND          histogram (default), counter or gauge
          --unit UNIT          ns, us, ms, s, bytes or none (default); counters have no unit
          --resolution R       histograms and counters: values are whole numbers of R, a power of
                               ten (0.01: basis points to a hundredth; default 1, whole units)
          --signed             histograms: values may be negative (slippage, PnL)
          --label KEY=VALUE    a label of the metric (repeatable)
          --exemplar KEY=VALUE a label of the exemplar every value carries, an order id or a
                               trace id (histograms; repeatable, kept in order; 64 bytes in all)
          --drop               when the ring is full, drop (and count) records instead of waiting
          --capacity N         records a lane holds, in a ring this creates (a power of two;
                               default: an existing ring's, else \(Bot.Options().laneCapacity))
          --dir PATH           ring directory (default: $RINGSIDE_DIR, else /dev/shm)
          --help               this text
          --version            print the version and the git revision, and exit

        Values: histograms and counters take whole numbers from 0 in the metric's unit (a counter's
        value is an increment), or with --resolution decimals to that resolution (-3.25 with
        --resolution 0.01 --signed), read exactly: a value finer than the resolution is bad, never
        rounded; gauges take decimal numbers (-1.5, 2, 3e6). A bad line is reported with its line
        number and skipped, never read as 0; blank lines are skipped.
        Histogram values and gauge values are records: by default a full ring waits for a collector
        to make room, so every value gets in. A counter's increments go to the ring's cells, not its
        records: they are never dropped and never wait (a gauge's last value is kept there too).
        A ring has one producer: a ring a running bot writes is refused; emit into a ring of its own.

        exit status: 0 every value written; 1 a ring error, or some lines were bad (the others were
        written); 2 a usage error (nothing written)
        """

    /// What to write, from the command line.
    struct Options {
        var ring = ""
        var metric = ""
        var kind = MetricKind.histogram
        var unit = MetricUnit.none
        /// Histograms and counters: the step's power of ten (`--resolution`), and signed values.
        var scale: Int8 = 0
        var signed = false
        var labels: [String: String] = [:]
        /// The exemplar each histogram value is recorded with, if any.
        var exemplar: Bot.Exemplar?
        var drop = false
        var capacity: Int?
        var directory: String?
        /// The values given on the command line, already parsed (gauges as double bits; with a
        /// resolution or signed, whole steps, a signed one's as an `Int64`'s bits).
        var values: [UInt64] = []
    }

    /// How long to sleep between looks at a full ring.
    static let pollNanoseconds: UInt64 = 1_000_000

    /// Runs `ringside-emit` with the process's arguments and standard input, and exits.
    package static func main() -> Never {
        let console = Console.standard()
        let status = run(Array(CommandLine.arguments.dropFirst()), console: console, input: .standardInput)
        console.flush()
        exit(status)
    }

    /// Runs `ringside-emit` with `arguments` (without the program name), reading values from
    /// `input` when none are given; returns the exit status.
    package static func run(_ arguments: [String], console: Console, input: LineInput) -> Int32 {
        let options: Options
        do {
            switch try parse(arguments) {
            case .help:
                console.print(usage)
                return ExitStatus.success
            case .version:
                console.print(versionLine)
                return ExitStatus.success
            case let .run(parsed):
                options = parsed
            }
        } catch {
            console.printError("\(error)")
            return ExitStatus.usage
        }
        do {
            return try emit(options, console: console, input: input)
        } catch {
            console.printError("ringside-emit: \(message(for: error))")
            return ExitStatus.failure
        }
    }

    /// The error as an emit user can act on it: the library's advice names API options that
    /// emit has no flag for.
    static func message(for error: RingError) -> String {
        let makeItAnew =
            "let ringside-dump clean remove this one once it is drained and no process holds it, so that the "
            + "next emit makes it anew"
        switch error {
        case let .registryFull(ring, capacity):
            return "ring \(ring): the metric registry is full (\(capacity) metrics, each name and label set "
                + "one); emit into another ring (--ring), or " + makeItAnew
        case let .incompatibleLayout(ring, reason):
            // The facts, without the library's advice (an option of the API, not a flag of emit).
            let facts = reason.split(separator: " (", maxSplits: 1).first.map(String.init) ?? reason
            return "ring \(ring): the existing ring is incompatible: \(facts); leave out --capacity to emit into it as it is, "
                + "emit into another ring (--ring), or " + makeItAnew
        default:
            return "\(error)"
        }
    }

    /// What `--version` prints: `ringside-emit 0.4.0 (revision abc1234)`.
    package static var versionLine: String { RingsideVersion.line(program: "ringside-emit") }

    /// Parses the command line: what to write, or `--help`, or `--version`.
    static func parse(_ arguments: [String]) throws(UsageError) -> Invocation<Options> {
        let spec = OptionSpec(
            flags: ["--help", "--version", "--drop", "--signed"],
            valued: ["--ring", "--kind", "--unit", "--resolution", "--label", "--exemplar", "--capacity", "--dir"],
            repeatable: ["--label", "--exemplar"])
        let parsed = try ParsedArguments(arguments, spec: spec, context: context)
        if parsed.has("--help") { return .help }
        if parsed.has("--version") { return .version }
        var options = Options()
        try readMetric(parsed, into: &options)
        try readValueShape(parsed, into: &options)
        try readLabels(parsed, into: &options)
        try readExemplar(parsed, into: &options)
        try readRing(parsed, into: &options)
        for (offset, text) in parsed.positionals.dropFirst().enumerated() {
            switch parse(text, options) {
            case let .success(bits): options.values.append(bits)
            case let .failure(problem):
                throw UsageError("\(context): value \(offset + 1) \"\(text)\": \(problem.reason); nothing was written")
            }
        }
        return .run(options)
    }

    /// The start of every usage error's message.
    private static let context = "ringside-emit"

    /// `--ring` and the metric's name (the first argument).
    private static func readMetric(_ parsed: ParsedArguments, into options: inout Options) throws(UsageError) {
        guard let ring = parsed.value("--ring") else { throw UsageError("\(context): --ring NAME is required") }
        do { try RingDirectory.validate(name: ring) } catch { throw UsageError("\(context): --ring: \(error)") }
        options.ring = ring
        guard let metric = parsed.positionals.first else {
            throw UsageError("\(context): which metric? give its name after the options, e.g. ringside-emit --ring \(ring) job_seconds 42")
        }
        if let problem = MetricDescriptor.problem(withName: metric) {
            throw UsageError("\(context): metric \"\(metric)\": \(problem)")
        }
        options.metric = metric
    }

    /// `--kind`, `--unit`, `--resolution` and `--signed`: what the values are, checked together.
    private static func readValueShape(_ parsed: ParsedArguments, into options: inout Options) throws(UsageError) {
        if let kind = parsed.value("--kind") {
            guard let found = MetricKind.allCases.first(where: { $0.description == kind }) else {
                throw UsageError("\(context): --kind \(kind): use histogram, counter or gauge")
            }
            options.kind = found
        }
        if let unit = parsed.value("--unit") {
            guard let found = MetricUnit(symbol: unit) else {
                throw UsageError("\(context): --unit \(unit): use ns, us, ms, s, bytes or none")
            }
            options.unit = found
        }
        if options.kind == .counter && options.unit != .none {
            throw UsageError("\(context): --unit \(options.unit): counters have no unit (use a histogram or a gauge)")
        }
        if let resolution = parsed.value("--resolution") {
            guard options.kind != .gauge else { throw UsageError("\(context): --resolution: gauges take any number already") }
            guard let value = Double(resolution), let scale = MetricDescriptor.scale(ofResolution: value) else {
                throw UsageError("\(context): --resolution \(resolution): a power of ten from 1e-18 to 1e18 (0.01, 1e-6, 100)")
            }
            options.scale = scale
        }
        if parsed.has("--signed") {
            guard options.kind == .histogram else { throw UsageError("\(context): --signed: only histograms take signed values") }
            options.signed = true
        }
        if options.signed, !parsed.all("--exemplar").isEmpty {
            throw UsageError("\(context): --exemplar: a signed histogram's values carry no exemplars")
        }
    }

    /// `--label KEY=VALUE`, each key once, encodable.
    private static func readLabels(_ parsed: ParsedArguments, into options: inout Options) throws(UsageError) {
        for label in parsed.all("--label") {
            guard let equals = label.firstIndex(of: "="), equals != label.startIndex else {
                throw UsageError("\(context): --label \(label): expected KEY=VALUE")
            }
            let key = String(label[..<equals])
            guard options.labels[key] == nil else { throw UsageError("\(context): --label \(key) is given twice") }
            options.labels[key] = String(label[label.index(after: equals)...])
        }
        if case let .failure(problem) = MetricDescriptor.encode(labels: options.labels) {
            throw UsageError("\(context): --label: \(problem.reason)")
        }
    }

    /// `--exemplar KEY=VALUE`: a histogram's values' exemplar.
    private static func readExemplar(_ parsed: ParsedArguments, into options: inout Options) throws(UsageError) {
        let exemplarLabels = parsed.all("--exemplar")
        guard !exemplarLabels.isEmpty else { return }
        guard options.kind == .histogram else {
            throw UsageError("\(context): --exemplar: only histogram values carry exemplars, not \(options.kind)s")
        }
        do {
            options.exemplar = try Bot.Exemplar(encoded: exemplarLabels.joined(separator: "\n"))
        } catch {
            throw UsageError("\(context): --exemplar \(exemplarLabels.joined(separator: " ")): \(error)")
        }
    }

    /// `--drop`, `--capacity` and `--dir`: how the ring is made and written.
    private static func readRing(_ parsed: ParsedArguments, into options: inout Options) throws(UsageError) {
        options.drop = parsed.has("--drop")
        if let capacity = parsed.value("--capacity") {
            guard let value = Int(capacity), value >= 16, value <= 1 << 28, value & (value - 1) == 0 else {
                throw UsageError("\(context): --capacity \(capacity): a power of two from 16 to 268435456 records")
            }
            options.capacity = value
        }
        if let dir = parsed.value("--dir") {
            guard !dir.isEmpty else { throw UsageError("\(context): --dir is empty") }
            options.directory = dir
        }
    }

    /// Attaches, registers and writes; returns the exit status.
    private static func emit(_ options: Options, console: Console, input: LineInput) throws(RingError) -> Int32 {
        let directory = RingDirectory(options.directory)
        let bot = try Bot.attach(options.ring, directory: directory.path, options: ringOptions(options, directory: directory))
        // The lane now: a full directory is an error, never a wait for room that cannot come.
        let lane = try bot.claimCurrentThreadLane()
        let write = try registerMetric(options, on: bot)
        let droppedBefore = lane.recordsDropped
        var written = 0
        var saidWaiting = false
        // Counters write no records (their increments go to a cell), so only the others need room:
        // a slot, and one more per 16 bytes of an exemplar (a value without room for them is dropped).
        let needsRoom = options.kind != .counter && !options.drop
        let exemplarBytes = UInt64(options.exemplar?.encoded.utf8.count ?? 0)
        let slotsPerValue = 1 + (exemplarBytes + UInt64(RS_EXEMPLAR_BYTES_PER_RECORD) - 1) / UInt64(RS_EXEMPLAR_BYTES_PER_RECORD)
        func emitOne(_ bits: UInt64) {
            if needsRoom {
                while lane.freeSlots < slotsPerValue {
                    if !saidWaiting {
                        console.printError(
                            "ringside-emit: ring \(options.ring) is full; waiting for a collector to make room "
                                + "(--drop drops instead)")
                        saidWaiting = true
                    }
                    System.nanosleep(pollNanoseconds)
                }
            }
            write(bits)
            written += 1
        }

        let badLines = emitValues(options, console: console, input: input, emitOne)
        let dropped = lane.recordsDropped &- droppedBefore
        console.print(summary(options, enabled: bot.isEnabled, written: written, dropped: dropped, badLines: badLines))
        return badLines > 0 ? ExitStatus.failure : ExitStatus.success
    }

    /// The ring's options: never sampled, as every value given is written (it waits for room
    /// rather than drop); `--capacity`'s size, else an existing ring's as it is, else the default.
    private static func ringOptions(_ options: Options, directory: RingDirectory) -> Bot.Options {
        var ringOptions = Bot.Options(sampleAbovePercent: 100)
        if let capacity = options.capacity {
            ringOptions.laneCapacity = capacity
        } else if let existing = try? RingInspector(options.ring, directory: directory).status() {
            // Attach to an existing ring as it is, whatever its size.
            ringOptions.laneCapacity = Int(existing.capacity)
            ringOptions.maxMetrics = existing.maxMetrics
            ringOptions.maxLanes = existing.maxLanes
        }
        return ringOptions
    }

    /// Registers the metric on `bot`; returns how a value (the bits `parse` read) is written to it:
    /// a histogram's in steps or whole, with its exemplar; a counter's as an increment; a gauge's set.
    private static func registerMetric(_ options: Options, on bot: Bot) throws(RingError) -> (UInt64) -> Void {
        let resolution = Double("1e\(options.scale)") ?? 1
        switch options.kind {
        case .histogram:
            let histogram = try bot.histogram(
                options.metric, unit: options.unit, labels: options.labels, resolution: resolution, signed: options.signed)
            if options.scale != 0 || options.signed {
                return { histogram.record(steps: $0, signed: options.signed) }
            } else if let exemplar = options.exemplar {
                return { histogram.record($0, exemplar: exemplar) }
            } else {
                return { histogram.record($0) }
            }
        case .counter:
            let counter = try bot.counter(options.metric, labels: options.labels, resolution: resolution)
            return { counter.increment(steps: $0) }
        case .gauge:
            let gauge = try bot.gauge(options.metric, unit: options.unit, labels: options.labels)
            return { gauge.set(Double(bitPattern: $0)) }
        }
    }

    /// Hands `emitOne` the values given or, with none, each line of `input` as it arrives until
    /// end of file, blank lines passed over; a line that is no value is said and skipped. Returns
    /// the lines skipped.
    private static func emitValues(
        _ options: Options, console: Console, input: LineInput, _ emitOne: (UInt64) -> Void
    ) -> Int {
        guard options.values.isEmpty else {
            options.values.forEach(emitOne)
            return 0
        }
        var badLines = 0
        var lineNumber = 0
        while let line = input.readLine() {
            lineNumber += 1
            let text = line.trimmingWhitespace()
            if text.isEmpty { continue }
            switch parse(text, options) {
            case let .success(bits): emitOne(bits)
            case let .failure(problem):
                badLines += 1
                console.printError("ringside-emit: line \(lineNumber): \"\(text.prefix(80))\": \(problem.reason); skipped")
            }
        }
        return badLines
    }

    /// The line said at the end: the values written (those dropped for a full ring left out, and
    /// counted after), or why none was, and the bad lines skipped.
    private static func summary(_ options: Options, enabled: Bool, written: Int, dropped: UInt64, badLines: Int) -> String {
        let target = options.ring + "/" + options.metric
        var summary =
            enabled
            ? "wrote \(written - Int(dropped)) value\(written - Int(dropped) == 1 ? "" : "s") to \(target)"
            : "wrote nothing to \(target): \(Bot.disableEnvironmentVariable) is set"
        if dropped > 0 { summary += ", dropped \(dropped) (the ring was full)" }
        if badLines > 0 { summary += ", skipped \(badLines) bad line\(badLines == 1 ? "" : "s")" }
        return summary
    }

    /// Why a value cannot be written.
    package struct ValueProblem: Error, Equatable {
        package let reason: String
    }

    /// Reads a value as `options` say: in steps of a resolution (`parseSteps`), or as `parseValue`.
    static func parse(_ text: String, _ options: Options) -> Result<UInt64, ValueProblem> {
        guard options.scale != 0 || options.signed else { return parseValue(text, kind: options.kind, unit: options.unit) }
        return parseSteps(text, scale: options.scale, signed: options.signed).map {
            options.signed ? UInt64(bitPattern: Int64($0)) : UInt64($0)
        }
    }

    /// Reads a decimal (`-3.25`, `12`, `0.000001`) as whole steps of 10^`scale`, exactly: a value
    /// finer than the step, or beyond what the metric holds (0 to 2^64 - 1 steps; signed,
    /// -(2^63 - 1) to 2^63 - 1), is a problem, never rounded or clamped.
    package static func parseSteps(_ text: String, scale: Int8, signed: Bool) -> Result<Int128, ValueProblem> {
        let step = "steps of 1e\(scale)"
        let what = signed ? "signed values in \(step)" : "values from 0 in \(step)"
        var digits = Substring(text)
        let negative = digits.first == "-"
        if negative || digits.first == "+" { digits = digits.dropFirst() }
        let parts = digits.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let whole = parts[0], fraction = parts.count > 1 ? parts[1] : ""
        guard !(whole.isEmpty && fraction.isEmpty), (whole + fraction).allSatisfy({ $0.isASCII && $0.isNumber }) else {
            return .failure(ValueProblem(reason: "not a decimal number: this metric takes \(what)"))
        }
        // value = integer * 10^-places; steps = integer * 10^(-places - scale), which must be whole.
        let significant = (whole + fraction).drop { $0 == "0" }
        guard significant.count <= 39, var integer = Int128(significant.isEmpty ? "0" : String(significant)) else {
            return .failure(ValueProblem(reason: "out of range: this metric takes \(what)"))
        }
        var exponent = -fraction.count - Int(scale)
        while exponent < 0 {
            guard integer % 10 == 0 else { return .failure(ValueProblem(reason: "finer than the resolution: this metric takes \(what)")) }
            integer /= 10
            exponent += 1
        }
        for _ in 0..<exponent {
            let (product, overflow) = integer.multipliedReportingOverflow(by: 10)
            guard !overflow else { return .failure(ValueProblem(reason: "out of range: this metric takes \(what)")) }
            integer = product
        }
        let steps = negative ? -integer : integer
        let range: ClosedRange<Int128> = signed ? Int128(-Int64.max)...Int128(Int64.max) : 0...Int128(UInt64.max)
        guard range.contains(steps) else {
            return .failure(ValueProblem(reason: (steps < 0 && !signed ? "negative" : "out of range") + ": this metric takes \(what)"))
        }
        return .success(steps)
    }

    /// Reads a value for a metric of `kind`: whole numbers from 0 for histograms and counters,
    /// finite decimals for gauges (returned as the double's bits, as the ring stores them).
    package static func parseValue(_ text: String, kind: MetricKind, unit: MetricUnit) -> Result<UInt64, ValueProblem> {
        if kind == .gauge {
            guard let value = Double(text), !text.hasPrefix("0x"), !text.hasPrefix("-0x") else {
                return .failure(ValueProblem(reason: "not a number"))
            }
            guard value.isFinite else { return .failure(ValueProblem(reason: "not a finite number")) }
            return .success(value.bitPattern)
        }
        if let value = UInt64(text) { return .success(value) }
        let what = "\(kind)s take whole numbers from 0 to \(UInt64.max)" + (unit == .none ? "" : " (in \(unit))")
        guard let number = Double(text), number.isFinite else { return .failure(ValueProblem(reason: "not a number: \(what)")) }
        if number < 0 { return .failure(ValueProblem(reason: "negative: \(what)")) }
        if number != number.rounded() { return .failure(ValueProblem(reason: "not a whole number: \(what)")) }
        return .failure(ValueProblem(reason: "out of range: \(what)"))
    }
}

extension String {
    /// The string without leading and trailing spaces, tabs and carriage returns.
    func trimmingWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard let start = firstIndex(where: { !isSpace($0) }), let end = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[start...end])
    }
}
