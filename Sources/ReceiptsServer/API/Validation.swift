import Foundation
import Hummingbird
import ReceiptsCore

/// Checks of request values, each failing with a 400 in the contract's shape.
enum Validation {
    /// The most ids one marking request may name.
    static let maximumMessageIds = 1000
    /// The longest message text, in UTF-8 bytes.
    static let maximumTextBytes = RequestLimits.maximumTextBytes
    /// The most users a message may name in `mentions`.
    static let maximumMentions = RequestLimits.maximumMentions
    /// The most members a chat may be created with.
    static let maximumMembers = RequestLimits.maximumMembers

    /// `value` if it is a valid id; otherwise 400 naming `field`.
    static func id(_ value: String, field: String) throws -> String {
        guard Identifier.isValid(value) else {
            throw APIError.invalidRequest("\(field) must be 1-128 characters of A-Z a-z 0-9 . _ : @ -")
        }
        return value
    }

    /// A path parameter that must be a valid id, percent-decoded: most HTTP clients encode
    /// `:` and `@` in paths (`/v1/users/a%40x.org/unread`), and the router hands segments over
    /// as sent. Every route reads its ids here, so each is decoded exactly once.
    static func pathId(_ name: String, in context: some RequestContext) throws -> String {
        guard let raw = context.parameters.get(name) else {
            throw APIError.invalidRequest("missing \(name)")
        }
        guard let value = percentDecoded(raw) else {
            throw APIError.invalidRequest("\(name) is not valid percent-encoding")
        }
        return try id(value, field: name)
    }

    /// `text` with every `%XX` replaced by the byte it encodes; nil when a `%` is not
    /// followed by two hex digits or the bytes are not UTF-8. (`/` decoded from `%2F` is no
    /// id character, so it cannot smuggle a path separator through.)
    static func percentDecoded(_ text: String) -> String? {
        let percent = UInt8(ascii: "%")
        guard text.utf8.contains(percent) else { return text }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == percent else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// A list of message ids for a marking request: 1-1000 valid ids.
    static func messageIds(_ ids: [String]) throws -> [String] {
        guard !ids.isEmpty else { throw APIError.invalidRequest("messageIds must name at least one message") }
        guard ids.count <= maximumMessageIds else {
            throw APIError.invalidRequest("messageIds may name at most \(maximumMessageIds) messages")
        }
        for messageId in ids { _ = try id(messageId, field: "messageIds") }
        return ids
    }
}
