import Foundation
import Hummingbird
import ReceiptsCore

/// The query parameters of the message views: `viewer`, `before`, `limit`, `labels`, `tz`.
struct ViewQuery {
    let parameters: Parameters

    init(_ parameters: Parameters) {
        self.parameters = parameters
    }

    func string(_ name: String) -> String? {
        self.parameters.get(name)
    }

    /// Whose view is asked for: with a user token, that user (naming another is 403); with
    /// a tenant key, the `viewer` parameter, if any.
    func viewer(for principal: Principal) throws -> String? {
        let named = try self.string("viewer").map { try Validation.id($0, field: "viewer") }
        if let tokenUser = principal.tokenUser {
            if let named, named != tokenUser { throw APIError.forbidden("a user token views only as its own user") }
            return tokenUser
        }
        return named
    }

    func integer(_ name: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text = self.string(name) else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw APIError.invalidRequest("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }

    func labelStyle() throws -> LabelStyle {
        guard let text = self.string("labels") else { return .counts }
        guard let style = LabelStyle(rawValue: text) else {
            throw APIError.invalidRequest("labels must be counts, ticks or imessage")
        }
        return style
    }

    func timeZone() throws -> TimeZone {
        guard let name = self.string("tz") else { return TimeZone(identifier: "UTC")! }
        guard let zone = TimeZone(identifier: name) else {
            throw APIError.invalidRequest("tz must be an IANA time zone name such as Europe/Berlin")
        }
        return zone
    }
}
