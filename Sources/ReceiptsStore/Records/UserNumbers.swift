#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Users numbered by their place in a list (a roster's `numberedUsers`), looked up by the
/// UTF-8 bytes of an id: an open-addressing table over one buffer of the ids' bytes, so that
/// a lookup hashes and compares bytes and makes no `String`.
///
/// A page of a 1,000-member group holds some 100,000 ids as the database sent them; making a
/// `String` of each to look it up was a third of the page's time.
///
/// The ids are a chat's members, chosen by the tenant who reads the page; ids made to
/// collide would slow only that tenant's own pages of that chat.
struct UserNumbers: Sendable {
    /// The ids' bytes, one after another, in number order.
    private let bytes: [UInt8]
    /// By number: where the id's bytes start in `bytes`; one more entry for the end.
    private let starts: [Int]
    /// By hash (modulo the size, a power of two): a user's number, or -1 for none.
    private let slots: [Int32]

    init(_ users: [String]) {
        var bytes: [UInt8] = []
        var starts: [Int] = [0]
        for user in users {
            bytes.append(contentsOf: user.utf8)
            starts.append(bytes.count)
        }
        var size = 16
        while size < users.count * 2 { size *= 2 }
        var slots = [Int32](repeating: -1, count: size)
        bytes.withUnsafeBytes { buffer in
            for number in users.indices {
                let id = UnsafeRawBufferPointer(rebasing: buffer[starts[number]..<starts[number + 1]])
                var slot = Int(truncatingIfNeeded: Self.hash(id)) & (size - 1)
                while slots[slot] >= 0 { slot = (slot + 1) & (size - 1) }
                slots[slot] = Int32(number)
            }
        }
        self.bytes = bytes
        self.starts = starts
        self.slots = slots
    }

    /// The number of the user with the id `id` (UTF-8), nil for one not in the list.
    func number(of id: UnsafeRawBufferPointer) -> Int? {
        let mask = self.slots.count - 1
        var slot = Int(truncatingIfNeeded: Self.hash(id)) & mask
        return self.bytes.withUnsafeBytes { buffer in
            while true {
                let number = Int(self.slots[slot])
                if number < 0 { return nil }
                let start = self.starts[number], end = self.starts[number + 1]
                if end - start == id.count, id.count == 0 || memcmp(buffer.baseAddress! + start, id.baseAddress!, id.count) == 0 {
                    return number
                }
                slot = (slot + 1) & mask
            }
        }
    }

    /// The number of the user `id`, nil for one not in the list.
    func number(of id: String) -> Int? {
        var id = id
        return id.withUTF8 { self.number(of: UnsafeRawBufferPointer($0)) }
    }

    /// A hash of `bytes`, eight at a time (ids are short: one to three words).
    private static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var hash: UInt64 = 0x243F_6A88_85A3_08D3 ^ UInt64(bytes.count)
        var offset = 0
        while offset < bytes.count {
            var word: UInt64 = 0
            if bytes.count - offset >= 8 {
                word = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            } else {
                for index in offset..<bytes.count { word = word << 8 | UInt64(bytes[index]) }
            }
            hash = (hash ^ word) &* 0x9E37_79B9_7F4A_7C15
            hash ^= hash >> 29
            offset += 8
        }
        return hash ^ (hash >> 32)
    }
}
