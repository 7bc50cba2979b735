import CRingside
import Foundation
import Ringside
import RingsideTestSupport
import Testing

/// The README's "Your first bot" in each language: the block a newcomer copies is the code a
/// program here runs (its lines, in order, in that program), and what it writes is what the
/// README says.
@Suite("the README's first bots run as written")
struct FirstBotTests {
    /// The fenced blocks of `language` in the README's "Your first bot" section.
    static func readmeBlocks(_ language: String) throws -> [[String]] {
        let readme = try String(contentsOfFile: kitFile("README.md"), encoding: .utf8)
        let section =
            try #require(readme.components(separatedBy: "\n## Your first bot\n").dropFirst().first)
            .components(separatedBy: "\n## ").first ?? ""
        return section.components(separatedBy: "```\(language)\n").dropFirst().map { rest in
            rest.components(separatedBy: "\n```")[0].components(separatedBy: "\n")
        }
    }

    /// Checks that every line of `block` (trimmed; blank lines and imports aside) stands in
    /// `file`, in the same order.
    static func expectProgram(_ file: String, runs block: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
        // Compared with runs of spaces made one: the README aligns its comments, swift-format does not.
        func normalized(_ line: String) -> String { line.split(whereSeparator: \.isWhitespace).joined(separator: " ") }
        let program = try String(contentsOfFile: kitFile(file), encoding: .utf8).components(separatedBy: "\n").map(normalized)
        var next = program.startIndex
        for line in block.map(normalized)
        where !line.isEmpty && !line.hasPrefix("import Ringside") {
            guard let found = program[next...].firstIndex(of: line) else {
                Issue.record("\(file) does not run the README's line `\(line)` (or not in its order)", sourceLocation: sourceLocation)
                return
            }
            next = found + 1
        }
    }

    /// The one histogram series' values and the counter's total of a bot the program wrote.
    static func written(_ name: String, in directory: RingDirectory) throws -> (fills: [UInt64], spans: Int, orders: UInt64) {
        let (fills, spans, orders, slippage) = try writtenWithSlippage(name, in: directory)
        #expect(slippage == [-350], "the signed histogram of basis points to 0.01: -3.5 as -350 hundredths")
        return (fills, spans, orders)
    }

    /// `written`, and the signed values of `slippage_bps`, in hundredths of a basis point.
    static func writtenWithSlippage(
        _ name: String, in directory: RingDirectory
    ) throws -> (fills: [UInt64], spans: Int, orders: UInt64, slippage: [Int64]) {
        let (metrics, lanes, cells) = try drainDecoded(name, directory: directory)
        let fill = try #require(metrics.first { $0.name == "order_fill_latency" })
        #expect(fill.labels.map { "\($0.key)=\($0.value)" } == ["symbol=AAPL"])
        let records = lanes.values.joined().filter { $0.metric == fill.index }
        let spans = records.filter { $0.flags & UInt8(RS_FLAG_SPAN) != 0 }.count
        let slippage = try #require(metrics.first { $0.name == "slippage_bps" })
        #expect(slippage.isSigned && slippage.scale == -2)
        let slips = lanes.values.joined().filter { $0.metric == slippage.index }.map { OffsetBinary.value($0.value) }
        return (records.filter { $0.flags & UInt8(RS_FLAG_SPAN) == 0 }.map(\.value), spans, cells["orders"]?.total ?? 0, slips)
    }

    @Test("Swift: the block is ringside-test-producer's first-bot, which writes its record, span, count and gauge")
    func swift() throws {
        let block = try #require(Self.readmeBlocks("swift").dropFirst().first, "the README's second swift block is the bot")
        try Self.expectProgram("Tests/ringside-test-producer/FirstBot.swift", runs: block)
        try withRingDirectory { directory in
            let ran = try runProcess(
                try builtExecutable("ringside-test-producer"), ["first-bot"],
                environment: ["RINGSIDE_DIR": directory.path], mergingErrors: true)
            try #require(ran.status == 0, "first-bot failed:\n\(ran.output)")
            let (fills, spans, orders) = try Self.written("bot-a", in: directory)
            #expect(fills == [1234] && spans == 1 && orders == 1)
            let consumer = try RingConsumer("bot-a", directory: directory)
            let exposure = try #require(consumer.metrics.first { $0.name == "gross_exposure" })
            #expect(consumer.cells(of: exposure).lastValue == 1.25e6)
        }
    }

    @Test("Swift: the README's Package.swift lines, with Ringside cloned beside the bot's package, build a bot that writes")
    func swiftPackageByPath() throws {
        let manifest = try #require(Self.readmeBlocks("swift").first, "the README's first swift block is Package.swift's")
        guard let swift = try requiredSystemTool("swift") else { return }
        let scratch = try TemporaryDirectory("ringside-consumer")
        defer { scratch.remove() }
        // The clone the README names (`../ringside` beside the bot's package): this checkout, linked.
        try FileManager.default.createSymbolicLink(atPath: scratch.path + "/ringside", withDestinationPath: packageRoot)
        let bot = scratch.path + "/bot"
        try FileManager.default.createDirectory(atPath: bot + "/Sources/bot", withIntermediateDirectories: true)
        let package =
            ["// swift-tools-version:6.0", "import PackageDescription", "let package = Package(", "    name: \"bot\","]
            + manifest.map { "    " + $0 } + [")", ""]
        try package.joined(separator: "\n").write(toFile: bot + "/Package.swift", atomically: true, encoding: .utf8)
        let main = ["import Ringside", "let bot = try Bot.attach(\"path-bot\")", "try bot.counter(\"orders\").increment()", ""]
        try main.joined(separator: "\n").write(toFile: bot + "/Sources/bot/main.swift", atomically: true, encoding: .utf8)
        let built = try runProcess(swift, ["build", "--package-path", bot], mergingErrors: true, timeoutSeconds: 900)
        try #require(built.status == 0, "swift build of the README's Package.swift failed:\n\(built.output)")
        try withRingDirectory { directory in
            let ran = try runProcess(bot + "/.build/debug/bot", [], environment: ["RINGSIDE_DIR": directory.path], mergingErrors: true)
            try #require(ran.status == 0, "the bot failed:\n\(ran.output)")
            let (_, _, cells) = try drainDecoded("path-bot", directory: directory)
            #expect(cells["orders"]?.total == 1)
        }
    }

    @Test("C: the block is Tests/fixtures/first_bot.c, built the README's way (pkg-config), which records 42 us and counts one order")
    func c() throws {
        let block = try #require(Self.readmeBlocks("c").first)
        try Self.expectProgram("Tests/fixtures/first_bot.c", runs: block)
        let includes = block.filter { $0.hasPrefix("#include") }.map { $0.split(separator: " ")[1] }
        #expect(includes == ["<stdio.h>", "<stdlib.h>", "\"ringside_producer.h\""], "the block shows every include it needs")
        guard let cc = try requiredSystemTool("cc"), let cmake = try requiredSystemTool("cmake"), try requiredSystemTool("make") != nil,
            let pkgConfig = try requiredSystemTool("pkg-config")
        else { return }
        let build = try TemporaryDirectory("ringside-first-bot")
        defer { build.remove() }
        // The README's lines: tools/c built and installed into a prefix, then cc with pkg-config's flags.
        let prefix = try installRingside(cmake, into: build)
        let path = "\(prefix)/lib/pkgconfig:\(prefix)/lib64/pkgconfig"
        let flags = try runProcess(pkgConfig, ["--cflags", "--libs", "ringside"], environment: ["PKG_CONFIG_PATH": path])
        try #require(flags.status == 0, "pkg-config failed:\n\(flags.errors)")
        let executable = build.path + "/first_bot"
        let compiled = try runProcess(
            cc,
            ["-std=gnu11", "-Wall", "-Werror", kitFile("Tests/fixtures/first_bot.c")]
                + flags.output.split(whereSeparator: \.isWhitespace).map(String.init) + ["-o", executable],
            mergingErrors: true)
        try #require(compiled.status == 0, "cc failed:\n\(compiled.output)")
        try withRingDirectory { directory in
            let ran = try runProcess(executable, [], environment: ["RINGSIDE_DIR": directory.path], mergingErrors: true)
            try #require(ran.status == 0, "first_bot failed:\n\(ran.output)")
            let (fills, spans, orders) = try Self.written("bot-c", in: directory)
            #expect(fills == [42] && spans == 0 && orders == 1)
        }
    }

    @Test("Python: the block is Tests/fixtures/first_bot.py, which observes 1,200,000 ns, a span and an order")
    func python() throws {
        let block = try #require(Self.readmeBlocks("python").first)
        try Self.expectProgram("Tests/fixtures/first_bot.py", runs: block)
        guard let python = try requiredSystemTool("python3") else { return }
        try withRingDirectory { directory in
            let ran = try runProcess(
                python, [kitFile("Tests/fixtures/first_bot.py"), kitFile("tools/python")],
                environment: ["RINGSIDE_DIR": directory.path, "PYTHONDONTWRITEBYTECODE": "1"], mergingErrors: true)
            try #require(ran.status == 0, "first_bot.py failed:\n\(ran.output)")
            let (fills, spans, orders) = try Self.written("py-bot", in: directory)
            #expect(fills == [1_200_000] && spans == 1 && orders == 1)
        }
    }

    @Test("Rust: the block is the crate's example first_bot, which records 42 us, a span and an order")
    func rust() throws {
        let block = try #require(Self.readmeBlocks("rust").first)
        try Self.expectProgram("tools/rust/ringside/examples/first_bot.rs", runs: block)
        guard let cargo = try requiredSystemTool("cargo") else { return }
        try withRingDirectory { directory in
            let ran = try runProcess(
                cargo,
                [
                    "run", "--quiet", "--offline", "--example", "first_bot",
                    "--manifest-path", kitFile("tools/rust/ringside/Cargo.toml"),
                ],
                environment: ["RINGSIDE_DIR": directory.path], mergingErrors: true, timeoutSeconds: 300)
            try #require(ran.status == 0, "cargo run --example first_bot failed:\n\(ran.output)")
            let (fills, spans, orders) = try Self.written("rs-bot", in: directory)
            #expect(fills == [42] && spans == 1 && orders == 1)
        }
    }
}
