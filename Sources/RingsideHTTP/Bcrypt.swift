import CCrypt

/// bcrypt through the system's libxcrypt (`crypt_rn`, `crypt_gensalt_rn`): the hashes of
/// `basic_auth_users`, written by `htpasswd -B`, Python's `bcrypt` or Go's `x/crypto/bcrypt`
/// (`$2a$`, `$2b$`, `$2y$`). Never hand-written.
///
/// A check costs what the hash's cost says (tens of milliseconds at cost 10): callers cache the
/// passwords that verified (`VerifiedPasswords`). Safe from any thread (`crypt_rn` keeps its state
/// in the buffer each call allocates).
enum Bcrypt {
    /// Whether `hash` has the form of a bcrypt hash: `$2a$`, `$2b$` or `$2y$`, a two-digit cost
    /// from 04 to 31, `$`, then 53 characters of bcrypt's base-64 alphabet.
    static func isHash(_ hash: String) -> Bool {
        let bytes = Array(hash.utf8)
        guard bytes.count == 60, bytes[0] == UInt8(ascii: "$"), bytes[1] == UInt8(ascii: "2"),
            [UInt8(ascii: "a"), UInt8(ascii: "b"), UInt8(ascii: "y")].contains(bytes[2]), bytes[3] == UInt8(ascii: "$"),
            bytes[6] == UInt8(ascii: "$"), let cost = cost(of: hash), (4...31).contains(cost)
        else { return false }
        return bytes[7...].allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "/")
        }
    }

    /// The cost written in a hash (`$2b$10$...` is 10), or nil.
    static func cost(of hash: String) -> Int? {
        let bytes = Array(hash.utf8)
        guard bytes.count >= 7 else { return nil }
        let digits = bytes[4...5]
        guard digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
    }

    /// Whether `password` hashes to `hash`. The comparison of the two hashes takes the same time
    /// wherever they differ. A password with a NUL byte never matches (crypt reads C strings).
    static func verify(password: [UInt8], hash: String) -> Bool {
        guard !password.contains(0), let computed = crypt(password, setting: hash) else { return false }
        return OpenSSL.constantTimeEqual(Array(computed.utf8), Array(hash.utf8))
    }

    /// A setting (`$2b$CC$` and a random salt) of `cost`, to hash against when the user is
    /// unknown, so that an unknown user costs what a known one does; nil if libxcrypt cannot make one.
    static func randomSetting(cost: Int) -> String? {
        var output = [CChar](repeating: 0, count: Int(CRYPT_GENSALT_OUTPUT_SIZE))
        // nil random bytes: libxcrypt takes them from the system's generator.
        guard crypt_gensalt_rn("$2b$", UInt(cost), nil, 0, &output, Int32(output.count)) != nil else { return nil }
        return String(decoding: output.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `crypt_rn(password, setting)`: the hash, or nil when libxcrypt refuses the setting.
    static func crypt(_ password: [UInt8], setting: String) -> String? {
        let data = UnsafeMutablePointer<crypt_data>.allocate(capacity: 1)  // 32 KiB: too large for a thread's stack
        defer {
            // The buffer held the password: clear it before it goes back to the allocator.
            UnsafeMutableRawPointer(data).initializeMemory(as: UInt8.self, repeating: 0, count: MemoryLayout<crypt_data>.size)
            data.deallocate()
        }
        UnsafeMutableRawPointer(data).initializeMemory(as: UInt8.self, repeating: 0, count: MemoryLayout<crypt_data>.size)
        let phrase = password.map { CChar(bitPattern: $0) } + [0]
        guard let result = crypt_rn(phrase, setting, data, Int32(MemoryLayout<crypt_data>.size)) else { return nil }
        return String(cString: result)
    }
}
