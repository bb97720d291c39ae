import Foundation

/// Ids the service makes up: for a message sent without one.
enum GeneratedID {
    /// A random (version 4) UUID in lowercase, e.g. `0b5c6e1e-3f0a-4c8e-9a57-1d2e3f405162`,
    /// from the system's random number generator (`getrandom(2)`).
    ///
    /// Not Foundation's `UUID()`: on Linux it opens, reads and closes `/dev/urandom` each time,
    /// 4.6 % of the service's CPU while it takes sends without ids (measured with `perf`).
    static func message() -> String {
        var random = SystemRandomNumberGenerator()
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { buffer in
            buffer.storeBytes(of: random.next() as UInt64, toByteOffset: 0, as: UInt64.self)
            buffer.storeBytes(of: random.next() as UInt64, toByteOffset: 8, as: UInt64.self)
            buffer[6] = buffer[6] & 0x0F | 0x40  // version 4: random
            buffer[8] = buffer[8] & 0x3F | 0x80  // the RFC 9562 variant
        }
        return UUID(uuid: bytes).uuidString.lowercased()
    }
}
