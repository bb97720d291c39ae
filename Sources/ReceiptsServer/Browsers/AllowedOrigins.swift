import Foundation

/// The web origins the whole server allows, for every tenant (`RECEIPTS_ALLOWED_ORIGINS`):
/// comma-separated entries of the tenants' forms, or `*` for any origin
/// (docs/web-clients.md). Empty by default: then only each tenant's own list, and the service's own
/// origin, are allowed.
public struct AllowedOrigins: Sendable, Equatable {
    /// `*`: every origin, `null` included.
    public var allowsAny: Bool
    public var patterns: [OriginPattern]

    public init(allowsAny: Bool = false, patterns: [OriginPattern] = []) {
        self.allowsAny = allowsAny
        self.patterns = patterns
    }

    /// None but the tenants' own and the service's own origin.
    public static let none = AllowedOrigins()

    /// Parses `RECEIPTS_ALLOWED_ORIGINS`: entries separated by commas, blanks around them
    /// ignored; `*` among them allows any origin.
    public init(parsing list: String) throws(OriginPattern.Invalid) {
        self.init()
        for entry in list.split(separator: ",") {
            let trimmed = entry.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { continue }
            if trimmed == "*" {
                self.allowsAny = true
            } else {
                self.patterns.append(try OriginPattern(parsing: trimmed))
            }
        }
    }

    /// Whether the `Origin` header value is allowed.
    func allows(_ origin: String, parsed: WebOrigin?) -> Bool {
        if self.allowsAny { return true }
        guard let parsed else { return false }
        return self.patterns.contains { $0.matches(parsed) }
    }
}
