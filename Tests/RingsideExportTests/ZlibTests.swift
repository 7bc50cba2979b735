import RingsideExport
import Testing

@Suite("deflate with the system's zlib, in the gzip and zlib containers")
struct ZlibTests {
    @Test("what is compressed comes back byte for byte, as one gzip member much smaller than a page of text")
    func roundTrip() throws {
        let line = Array("order_fill_latency_seconds_bucket{ring=\"demo-bot\",symbol=\"AAPL\",le=\"0.0001\"} 12345\n".utf8)
        let page = (0..<2000).flatMap { index in line + Array(String(index).utf8) }
        let compressed = Zlib.compress(page, .gzip)
        #expect(compressed.prefix(3) == [0x1F, 0x8B, 0x08], "a gzip header, deflate")
        #expect(compressed.count * 5 < page.count)
        #expect(Zlib.decompress(compressed, .gzip) == page)
        #expect(Zlib.decompress(Zlib.compress([], .gzip), .gzip) == [])
    }

    @Test("pieces deflated on their own join into one gzip member of all their bytes, in order")
    func piecesMakeOneMember() throws {
        let line = Array("order_fill_latency_seconds_bucket{ring=\"demo-bot\",le=\"0.0001\"} 12345\n".utf8)
        // Larger than deflate's output chunk, empty, and small: the member holds each as it is.
        let large = (0..<20_000).flatMap { index in line + Array(String(index).utf8) }
        let pieces: [[UInt8]] = [large, [], Array("# EOF\n".utf8), large.reversed()]
        let member = Zlib.gzipMember(pieces.indices.map { Zlib.piece(pieces[$0], last: $0 == pieces.count - 1) })
        let joined = Array(member.joined())
        #expect(Zlib.decompress(joined, .gzip) == pieces.flatMap { $0 }, "inflate checks the CRC and the length too")
        #expect(joined.count * 5 < large.count * 2)
        // A single last piece is a member alone; a trailer that lies is refused.
        #expect(Zlib.decompress(Array(Zlib.gzipMember([Zlib.piece(line, last: true)]).joined()), .gzip) == line)
        var wrongCRC = joined
        wrongCRC[wrongCRC.count - 5] ^= 1
        #expect(Zlib.decompress(wrongCRC, .gzip) == nil)
    }

    @Test("bytes deflated in pieces on several threads at once join, with a last piece, into one member of them all")
    func piecesOnThreads() {
        let line = Array("fill_latency_seconds_bucket{ring=\"bot-7\",le=\"0.0001\"} 1\n".utf8)
        let page = (0..<20_000).flatMap { index in line + Array(String(index).utf8) }
        for (pieceBytes, threads) in [(page.count, 1), (100_000, 1), (100_000, 2), (99_999, 3)] {
            let pieces = Zlib.pieces(page, pieceBytes: pieceBytes, threads: threads, level: 1)
            #expect(pieces.count == (page.count + pieceBytes - 1) / pieceBytes)
            let end = Array("# EOF\n".utf8)
            let member = Zlib.gzipMember(pieces + [Zlib.piece(end, last: true)])
            #expect(Zlib.decompress(Array(member.joined()), .gzip) == page + end, "\(pieceBytes) bytes, \(threads) threads")
        }
        #expect(Zlib.pieces([], pieceBytes: 100, threads: 2, level: 1).map(\.count) == [0])
    }

    @Test(
        "input given to zlib a part at a time (its counts are 32 bits: a page of a million series is larger) deflates and inflates to the same bytes"
    )
    func fedInParts() {
        let line = Array("wide_seconds_bucket{series=\"1\",pad=\"xxxxxxxxxxxx\",le=\"0.0001\"} 1\n".utf8)
        let page = (0..<5_000).flatMap { index in line + Array(String(index).utf8) }
        for feedBytes in [1, 7, 4_096, page.count - 1] {
            #expect(Zlib.compress(page, .gzip, feedBytes: feedBytes) == Zlib.compress(page, .gzip), "\(feedBytes)")
            let whole = Zlib.compress(page, .zlib)
            #expect(Zlib.decompress(whole, .zlib, feedBytes: feedBytes) == page, "\(feedBytes)")
            let halves = [Array(page[..<40_000]), Array(page[40_000...])]
            let pieces = halves.indices.map { Zlib.piece(halves[$0], last: $0 == 1, feedBytes: feedBytes) }
            #expect(Zlib.decompress(Array(Zlib.gzipMember(pieces).joined()), .gzip) == page, "\(feedBytes)")
            #expect(pieces.map(\.crc) == halves.map { Zlib.piece($0, last: false).crc })
        }
        // Truncated, read a part at a time: still refused.
        #expect(Zlib.decompress(Array(Zlib.compress(page, .gzip).dropLast(4)), .gzip, feedBytes: 100) == nil)
    }

    @Test("a damaged or truncated stream is refused, not misread")
    func damaged() {
        let compressed = Zlib.compress(Array(repeating: 7, count: 10_000), .gzip)
        #expect(Zlib.decompress(Array(compressed.dropLast(4)), .gzip) == nil)
        var flipped = compressed
        flipped[flipped.count / 2] ^= 0xFF
        #expect(Zlib.decompress(flipped, .gzip) == nil)
        #expect(Zlib.decompress([1, 2, 3], .gzip) == nil)
    }

    @Test("the zlib container (HdrHistogram's) round-trips too, and neither container is read as the other")
    func zlibContainer() {
        let bytes = Array((0..<5000).map { UInt8(truncatingIfNeeded: $0 % 251) })
        let compressed = Zlib.compress(bytes, .zlib, level: 9)
        #expect(compressed.first == 0x78, "a zlib header: deflate with a 32 KB window")
        #expect(Zlib.decompress(compressed, .zlib) == bytes)
        #expect(Zlib.decompress(compressed, .gzip) == nil)
        #expect(Zlib.decompress(Zlib.compress(bytes, .gzip), .zlib) == nil)
    }
}
