/// Ids of tenants, chats, users and messages: 1–128 characters of `[A-Za-z0-9._:@-]`
/// (the OpenAPI document, `Id`).
public enum Identifier {
    /// The longest id accepted.
    public static let maximumLength = 128

    /// Whether `text` is a valid id.
    @inlinable
    public static func isValid(_ text: some StringProtocol) -> Bool {
        self.isValid(utf8: text.utf8)
    }

    /// Whether `utf8` is a valid id's UTF-8 bytes (a user id of a stored list, say, read
    /// without making a `String` of it). Inlinable, so that a caller's kind of bytes is
    /// specialized in its own module: a page of a large group checks some 100,000 ids this way.
    @inlinable
    public static func isValid(utf8: some Collection<UInt8>) -> Bool {
        guard !utf8.isEmpty, utf8.count <= maximumLength else { return false }
        // The allowed bytes as bits, without a branch per byte.
        var allowed = true
        for byte in utf8 {
            let word = byte < 64 ? allowedBelow64 : (byte < 128 ? allowedFrom64 : 0)
            allowed = allowed && (word >> UInt64(byte & 63)) & 1 == 1
        }
        return allowed
    }

    /// Bit `b` set for each allowed byte `b` below 64: `-`, `.`, `0`-`9`, `:`.
    @usableFromInline
    static let allowedBelow64: UInt64 = (0x3FF << 48) | (1 << 45) | (1 << 46) | (1 << 58)
    /// Bit `b - 64` set for each allowed byte `b` from 64 to 127: `@`, `A`-`Z`, `_`, `a`-`z`.
    @usableFromInline
    static let allowedFrom64: UInt64 = 1 | (0x3FF_FFFF << 1) | (1 << 31) | (0x3FF_FFFF << 33)
}
