import RingsideExport
import Testing

@Suite("gzip with the system's zlib")
struct GzipTests {
    @Test("what is compressed comes back byte for byte, as one gzip member much smaller than a page of text")
    func roundTrip() throws {
        let line = Array("order_fill_latency_seconds_bucket{ring=\"demo-bot\",symbol=\"AAPL\",le=\"0.0001\"} 12345\n".utf8)
        let page = (0..<2000).flatMap { index in line + Array(String(index).utf8) }
        let compressed = Gzip.compress(page)
        #expect(compressed.prefix(3) == [0x1F, 0x8B, 0x08], "a gzip header, deflate")
        #expect(compressed.count * 5 < page.count)
        #expect(Gzip.decompress(compressed) == page)
        #expect(Gzip.decompress(Gzip.compress([])) == [])
    }

    @Test("a damaged or truncated stream is refused, not misread")
    func damaged() {
        let compressed = Gzip.compress(Array(repeating: 7, count: 10_000))
        #expect(Gzip.decompress(Array(compressed.dropLast(4))) == nil)
        var flipped = compressed
        flipped[flipped.count / 2] ^= 0xFF
        #expect(Gzip.decompress(flipped) == nil)
        #expect(Gzip.decompress([1, 2, 3]) == nil)
    }
}
