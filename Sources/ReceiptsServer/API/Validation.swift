import Foundation
import Hummingbird
import ReceiptsCore

/// Checks of request values, each failing with a 400 in the contract's shape.
enum Validation {
    /// The most ids one marking request may name.
    static let maximumMessageIds = 1000
    /// The longest message text, in UTF-8 bytes.
    static let maximumTextBytes = 64 * 1024
    /// The most members a chat may be created with.
    static let maximumMembers = 10_000

    /// `value` if it is a valid id; otherwise 400 naming `field`.
    static func id(_ value: String, field: String) throws -> String {
        guard Identifier.isValid(value) else {
            throw APIError.invalidRequest("\(field) must be 1-128 characters of A-Z a-z 0-9 . _ : @ -")
        }
        return value
    }

    /// A path parameter that must be a valid id.
    static func pathId(_ name: String, in context: some RequestContext) throws -> String {
        guard let value = context.parameters.get(name) else {
            throw APIError.invalidRequest("missing \(name)")
        }
        return try id(value, field: name)
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
