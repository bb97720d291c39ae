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
        return utf8.allSatisfy(isAllowed)
    }

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
