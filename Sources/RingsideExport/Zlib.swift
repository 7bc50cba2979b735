import RingsideSystem
import CZlib
import Synchronization

/// Deflate with the system's zlib, in its two containers: gzip (RFC 1952) for responses to
/// `Accept-Encoding: gzip`, zlib (RFC 1950) for HdrHistogram's compressed histograms.
package enum Zlib {
    package enum Container {
        case gzip, zlib

        /// zlib's windowBits: 15 (a 32 KB window) in the zlib container; 16 more asks for gzip's.
        var windowBits: Int32 { self == .gzip ? 15 + 16 : 15 }
    }

    /// `bytes` compressed into one stream of `container`. Level 1 to 9; the default, 6, is zlib's.
    package static func compress(_ bytes: [UInt8], _ container: Container, level: Int32 = 6, feedBytes: Int = maxFeedBytes) -> [UInt8] {
        var stream = z_stream()
        let started = deflateInit2_(
            &stream, level, Z_DEFLATED, container.windowBits, 8, Z_DEFAULT_STRATEGY,
            ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        precondition(started == Z_OK, "zlib's deflateInit2 failed: \(started)")  // only on no memory
        defer { deflateEnd(&stream) }
        // Out through a chunk, not into a buffer of deflateBound's size: that one, as large as
        // the input (1.4 GB for some pages), would be zeroed and kept as the result's capacity.
        let result = run(
            over: bytes, stream: &stream, chunkBytes: 256 * 1024, feedBytes: feedBytes, step: { deflate(&$0, $1 ? Z_NO_FLUSH : Z_FINISH) }
        ) {
            status, _, _ in
            if status == Z_STREAM_END { return true }
            // With room to write, deflate can only progress (Z_OK) or end.
            precondition(status == Z_OK, "zlib's deflate failed: \(status)")
            return nil
        }
        return result ?? []
    }

    /// A run of bytes deflated on its own (raw deflate, no container), to be joined with others
    /// into one gzip member by `gzipMember`: a page kept in pieces is compressed a piece at a time,
    /// and a piece that did not change is not compressed again (as pigz joins its blocks).
    package struct Piece: Sendable, Equatable {
        /// The deflated bytes: ending on a byte boundary with an empty stored block, or, for the
        /// last piece, with the final block.
        package let deflated: [UInt8]
        /// The CRC-32 and the length of the bytes before deflating, for the member's trailer.
        package let crc: UInt32
        package let count: Int
    }

    /// `bytes` deflated as a piece of a gzip member; `last` ends the stream (the member's last piece).
    package static func piece(_ bytes: [UInt8], last: Bool, level: Int32 = 6, feedBytes: Int = maxFeedBytes) -> Piece {
        bytes.withUnsafeBufferPointer { piece($0, last: last, level: level, feedBytes: feedBytes) }
    }

    /// `bytes` deflated in pieces of about `pieceBytes` each (none of them the last), `threads` at a
    /// time, as pigz does: a page of a million series (4 GB of text) takes seconds a core at level 1.
    package static func pieces(_ bytes: [UInt8], pieceBytes: Int, threads: Int, level: Int32) -> [Piece] {
        let count = max(1, (bytes.count + pieceBytes - 1) / max(1, pieceBytes))
        let size = (bytes.count + count - 1) / count
        let pieces = Locked([Piece?](repeating: nil, count: count))
        bytes.withUnsafeBufferPointer { all in
            let shared = SharedBytes(bytes: all)
            Turns.run(count, threads: threads) { index in
                let range = min(index * size, shared.bytes.count)..<min((index + 1) * size, shared.bytes.count)
                let deflated = piece(UnsafeBufferPointer(rebasing: shared.bytes[range]), last: false, level: level)
                pieces.withLock { $0[index] = deflated }
            }
        }
        return pieces.withLock { $0.map { $0! } }
    }

    /// Each of `parts` deflated as a piece (none of them the last), `threads` at a time.
    package static func pieces(parts: [[UInt8]], threads: Int, level: Int32) -> [Piece] {
        let pieces = Locked([Piece?](repeating: nil, count: parts.count))
        Turns.run(parts.count, threads: threads) { index in
            let deflated = piece(parts[index], last: false, level: level)
            pieces.withLock { $0[index] = deflated }
        }
        return pieces.withLock { $0.map { $0! } }
    }

    /// Bytes that threads read at once, none writing them.
    private struct SharedBytes: @unchecked Sendable {
        let bytes: UnsafeBufferPointer<UInt8>
    }

    /// `bytes` deflated as a piece of a gzip member, read where they are.
    package static func piece(
        _ bytes: UnsafeBufferPointer<UInt8>, last: Bool, level: Int32 = 6, feedBytes: Int = maxFeedBytes
    ) -> Piece {
        var stream = z_stream()
        // Negative windowBits: raw deflate, no header or trailer of its own.
        let started = deflateInit2_(
            &stream, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        precondition(started == Z_OK, "zlib's deflateInit2 failed: \(started)")  // only on no memory
        defer { deflateEnd(&stream) }
        // A sync flush ends on a byte boundary and does not mark the block final, so the next
        // piece's blocks may follow it in the same stream.
        let flush = last ? Z_FINISH : Z_SYNC_FLUSH
        let deflated = run(
            over: bytes, stream: &stream, chunkBytes: 256 * 1024, feedBytes: feedBytes, step: { deflate(&$0, $1 ? Z_NO_FLUSH : flush) }
        ) {
            status, _, stream in
            if status == Z_STREAM_END { return true }
            precondition(status == Z_OK || status == Z_BUF_ERROR, "zlib's deflate failed: \(status)")
            // A sync flush is done once deflate leaves room in the chunk with nothing left to read.
            if !last, stream.avail_in == 0, stream.avail_out > 0 { return true }
            return nil
        }
        let crc = UInt32(crc32_z(0, bytes.baseAddress, z_size_t(bytes.count)))
        return Piece(deflated: deflated ?? [], crc: crc, count: bytes.count)
    }

    /// One gzip member (RFC 1952) made of `pieces`, in order, the last one made with `last`: its
    /// header, each piece's deflated bytes as they are (not copied), and its trailer (the CRC-32 of
    /// all the bytes, combined from the pieces', and their length modulo 2^32).
    package static func gzipMember(_ pieces: [Piece]) -> [[UInt8]] {
        precondition(!pieces.isEmpty, "a gzip member needs at least its last piece")
        // Magic, deflate, no flags, no time, no extra flags, OS unknown (255), as zlib writes it.
        let header: [UInt8] = [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 255]
        var crc = pieces[0].crc
        var total = UInt32(truncatingIfNeeded: pieces[0].count)
        for piece in pieces.dropFirst() {
            crc = UInt32(crc32_combine(uLong(crc), uLong(piece.crc), off_t(piece.count)))
            total &+= UInt32(truncatingIfNeeded: piece.count)
        }
        var trailer: [UInt8] = []
        for value in [crc, total] { trailer += (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
        return [header] + pieces.map(\.deflated) + [trailer]
    }

    /// The bytes of a stream of `container`, or nil when it is not one or is cut short.
    package static func decompress(_ bytes: [UInt8], _ container: Container, feedBytes: Int = maxFeedBytes) -> [UInt8]? {
        var stream = z_stream()
        guard inflateInit2_(&stream, container.windowBits, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            return nil
        }
        defer { inflateEnd(&stream) }
        return run(
            over: bytes, stream: &stream, chunkBytes: 64 * 1024, feedBytes: feedBytes, step: { stream, _ in inflate(&stream, Z_NO_FLUSH) }
        ) {
            status, produced, stream in
            if status == Z_STREAM_END { return true }
            if status != Z_OK { return false }
            if stream.avail_in == 0 && produced == 0 { return false }  // truncated
            return nil
        }
    }

    /// The most zlib is given at once: its counts of bytes to read are 32 bits (a page of a
    /// million series is larger: 4.9 GB of text).
    package static let maxFeedBytes = Int(UInt32.max)

    /// Feeds `bytes` to `step` (deflate or inflate), `feedBytes` at most at a time, and collects
    /// what it writes, a chunk at a time, until `verdict` says the stream ended (true: the bytes
    /// written), failed (false: nil) or goes on (nil). `step` is told whether more input follows
    /// what zlib holds (deflate flushes only with the last of it); `verdict` sees the stream
    /// after zlib was given more, so `avail_in` is 0 only once every byte was read.
    private static func run(
        over bytes: [UInt8], stream: inout z_stream, chunkBytes: Int, feedBytes: Int, step: (inout z_stream, _ more: Bool) -> Int32,
        verdict: (_ status: Int32, _ produced: Int, _ stream: z_stream) -> Bool?
    ) -> [UInt8]? {
        bytes.withUnsafeBufferPointer { input in
            run(over: input, stream: &stream, chunkBytes: chunkBytes, feedBytes: feedBytes, step: step, verdict: verdict)
        }
    }

    private static func run(
        over input: UnsafeBufferPointer<UInt8>, stream: inout z_stream, chunkBytes: Int, feedBytes: Int,
        step: (inout z_stream, _ more: Bool) -> Int32, verdict: (_ status: Int32, _ produced: Int, _ stream: z_stream) -> Bool?
    ) -> [UInt8]? {
        precondition(feedBytes > 0 && feedBytes <= maxFeedBytes, "zlib reads 1 to 2^32 - 1 bytes at a time")
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: chunkBytes)
        do {
            var fed = 0
            func feed() {
                guard stream.avail_in == 0, fed < input.count, let base = input.baseAddress else { return }
                let count = min(input.count - fed, feedBytes)
                stream.next_in = UnsafeMutablePointer(mutating: base + fed)
                stream.avail_in = uInt(count)
                fed += count
            }
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
            stream.avail_in = 0
            feed()
            while true {
                let more = fed < input.count
                let (status, produced) = chunk.withUnsafeMutableBufferPointer { out -> (Int32, Int) in
                    stream.next_out = out.baseAddress
                    stream.avail_out = uInt(out.count)
                    let status = step(&stream, more)
                    return (status, out.count - Int(stream.avail_out))
                }
                result += chunk[..<produced]
                feed()
                if let ended = verdict(status, produced, stream) { return ended ? result : nil }
            }
        }
    }
}
