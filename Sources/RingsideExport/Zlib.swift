import CZlib

/// Deflate with the system's zlib, in its two containers: gzip (RFC 1952) for responses to
/// `Accept-Encoding: gzip`, zlib (RFC 1950) for HdrHistogram's compressed histograms.
public enum Zlib {
    public enum Container {
        case gzip, zlib

        /// zlib's windowBits: 15 (a 32 KB window) in the zlib container; 16 more asks for gzip's.
        var windowBits: Int32 { self == .gzip ? 15 + 16 : 15 }
    }

    /// `bytes` compressed into one stream of `container`. Level 1 to 9; the default, 6, is zlib's.
    public static func compress(_ bytes: [UInt8], _ container: Container, level: Int32 = 6) -> [UInt8] {
        var stream = z_stream()
        let started = deflateInit2_(
            &stream, level, Z_DEFLATED, container.windowBits, 8, Z_DEFAULT_STRATEGY,
            ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        precondition(started == Z_OK, "zlib's deflateInit2 failed: \(started)")  // only on no memory
        defer { deflateEnd(&stream) }
        // Out through a chunk, not into a buffer of deflateBound's size: that one, as large as
        // the input (1.4 GB for some pages), would be zeroed and kept as the result's capacity.
        let result = run(over: bytes, stream: &stream, chunkBytes: 256 * 1024, step: { deflate(&$0, Z_FINISH) }) { status, _, _ in
            if status == Z_STREAM_END { return true }
            // With room to write, deflate can only progress (Z_OK) or end.
            precondition(status == Z_OK, "zlib's deflate failed: \(status)")
            return nil
        }
        return result ?? []
    }

    /// The bytes of a stream of `container`, or nil when it is not one or is cut short.
    public static func decompress(_ bytes: [UInt8], _ container: Container) -> [UInt8]? {
        var stream = z_stream()
        guard inflateInit2_(&stream, container.windowBits, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            return nil
        }
        defer { inflateEnd(&stream) }
        return run(over: bytes, stream: &stream, chunkBytes: 64 * 1024, step: { inflate(&$0, Z_NO_FLUSH) }) { status, produced, stream in
            if status == Z_STREAM_END { return true }
            if status != Z_OK { return false }
            if stream.avail_in == 0 && produced == 0 { return false }  // truncated
            return nil
        }
    }

    /// Feeds `bytes` to `step` (deflate or inflate) and collects what it writes, a chunk at a
    /// time, until `verdict` says the stream ended (true: the bytes written), failed (false: nil)
    /// or goes on (nil).
    private static func run(
        over bytes: [UInt8], stream: inout z_stream, chunkBytes: Int, step: (inout z_stream) -> Int32,
        verdict: (_ status: Int32, _ produced: Int, _ stream: z_stream) -> Bool?
    ) -> [UInt8]? {
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: chunkBytes)
        return bytes.withUnsafeBufferPointer { input -> [UInt8]? in
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
            stream.avail_in = uInt(input.count)
            while true {
                let (status, produced) = chunk.withUnsafeMutableBufferPointer { out -> (Int32, Int) in
                    stream.next_out = out.baseAddress
                    stream.avail_out = uInt(out.count)
                    let status = step(&stream)
                    return (status, out.count - Int(stream.avail_out))
                }
                result += chunk[..<produced]
                if let ended = verdict(status, produced, stream) { return ended ? result : nil }
            }
        }
    }
}
