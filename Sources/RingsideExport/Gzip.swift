import CZlib

/// gzip (RFC 1952) with the system's zlib, for responses to `Accept-Encoding: gzip`.
public enum Gzip {
    /// `bytes` compressed into one gzip member. Level 1 to 9; the default, 6, is zlib's.
    public static func compress(_ bytes: [UInt8], level: Int32 = 6) -> [UInt8] {
        var stream = z_stream()
        // windowBits 15 + 16: a gzip header and trailer around the deflate data.
        let started = deflateInit2_(&stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY,
                                    ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        precondition(started == Z_OK, "zlib's deflateInit2 failed: \(started)") // only on no memory
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(bytes.count))))
        let written: Int = bytes.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in
                stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
                stream.avail_in = uInt(input.count)
                stream.next_out = out.baseAddress
                stream.avail_out = uInt(out.count)
                // deflateBound leaves room for all of it: one call finishes the stream.
                let result = deflate(&stream, Z_FINISH)
                precondition(result == Z_STREAM_END, "zlib's deflate did not finish: \(result)")
                return out.count - Int(stream.avail_out)
            }
        }
        output.removeSubrange(written...)
        return output
    }

    /// The bytes of a gzip stream, or nil when it is not one (for tests and tools).
    public static func decompress(_ bytes: [UInt8]) -> [UInt8]? {
        var stream = z_stream()
        guard inflateInit2_(&stream, 15 + 16, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
        defer { inflateEnd(&stream) }
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        return bytes.withUnsafeBufferPointer { input -> [UInt8]? in
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
            stream.avail_in = uInt(input.count)
            while true {
                let (status, produced) = chunk.withUnsafeMutableBufferPointer { out -> (Int32, Int) in
                    stream.next_out = out.baseAddress
                    stream.avail_out = uInt(out.count)
                    let status = inflate(&stream, Z_NO_FLUSH)
                    return (status, out.count - Int(stream.avail_out))
                }
                result += chunk[..<produced]
                if status == Z_STREAM_END { return result }
                if status != Z_OK { return nil }
                if stream.avail_in == 0 && produced == 0 { return nil } // truncated
            }
        }
    }
}
