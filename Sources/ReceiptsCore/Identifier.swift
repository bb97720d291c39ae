/// Ids of tenants, chats, users and messages: 1–128 characters of `[A-Za-z0-9._:@-]`
/// (the OpenAPI document, `Id`).
public enum Identifier {
    /// The longest id accepted.
    public static let maximumLength = 128

    /// Whether `text` is a valid id (a `Substring`, say: see the `String` version).
    public static func isValid(_ text: some StringProtocol) -> Bool {
        self.isValid(String(text))
    }

    /// Whether `text` is a valid id. Not generic: the requests' ids are `String`s, and a
    /// generic check called from another module walked their bytes unspecialized.
    public static func isValid(_ text: String) -> Bool {
        let bytes = text.utf8
        guard !bytes.isEmpty, bytes.count <= maximumLength else { return false }
        return bytes.allSatisfy(isAllowed)
    }

    /// Whether `utf8` is a valid id's bytes (a user id of a stored list, say, read without
    /// making a `String` of it).
    public static func isValid(utf8: UnsafeRawBufferPointer) -> Bool {
        guard !utf8.isEmpty, utf8.count <= maximumLength else { return false }
        // The allowed bytes as bits, without a branch per byte: a page of a large group checks
        // some 100,000 ids this way.
        var allowed = true
        for byte in utf8 {
            let word = byte < 64 ? allowedBelow64 : (byte < 128 ? allowedFrom64 : 0)
            allowed = allowed && (word >> UInt64(byte & 63)) & 1 == 1
        }
        return allowed
    }

    /// Bit `b` set for each allowed byte `b` below 64: `-`, `.`, `0`-`9`, `:`.
    private static let allowedBelow64: UInt64 = (0x3FF << 48) | (1 << 45) | (1 << 46) | (1 << 58)
    /// Bit `b - 64` set for each allowed byte `b` from 64 to 127: `@`, `A`-`Z`, `_`, `a`-`z`.
    private static let allowedFrom64: UInt64 = 1 | (0x3FF_FFFF << 1) | (1 << 31) | (0x3FF_FFFF << 33)

    private static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "-"):
            true
        default:
            false
        }
    }
}
