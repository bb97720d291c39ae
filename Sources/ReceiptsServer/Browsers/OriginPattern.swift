import Foundation

/// One entry of a list of allowed web origins: `scheme://host[:port]`, or
/// `scheme://*.domain[:port]` for every subdomain of `domain` (docs/web-clients.md).
///
/// Scheme and host compare case-insensitively, so they are kept lowercased; a scheme's
/// default port (80 for http, 443 for https) is the same origin as no port, as browsers
/// send it. The text it was parsed from may end with one `/`; anything else after the
/// port (a path, a query, a fragment, user information) is refused, as it names no origin.
public struct OriginPattern: Hashable, Sendable, CustomStringConvertible {
    /// Lowercased, e.g. `https`.
    public let scheme: String
    /// Lowercased; for a wildcard pattern the domain after `*.`.
    public let host: String
    /// True for `scheme://*.domain`: any host ending in `.domain` (not `domain` itself).
    public let isWildcard: Bool
    /// The port when it is not the scheme's default.
    public let port: Int?

    /// The longest entry taken: far more than any host name (253) with a scheme and port.
    public static let maximumLength = 300

    /// Why a text is no origin (the 400's message).
    public struct Invalid: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// Parses an entry of `allowedOrigins` or `RECEIPTS_ALLOWED_ORIGINS`.
    public init(parsing text: String) throws(Invalid) {
        guard let parsed = OriginText(text, allowsWildcard: true, allowsTrailingSlash: true) else {
            throw Invalid(
                description: "\"\(text.prefix(80))\" is no origin: expected scheme://host[:port] or scheme://*.domain[:port], without a path")
        }
        self.init(scheme: parsed.scheme, host: parsed.host, isWildcard: parsed.isWildcard, port: parsed.port)
    }

    init(scheme: String, host: String, isWildcard: Bool, port: Int?) {
        self.scheme = scheme
        self.host = host
        self.isWildcard = isWildcard
        self.port = port
    }

    /// Whether a browser's origin is one this entry names.
    public func matches(_ origin: WebOrigin) -> Bool {
        guard origin.scheme == self.scheme, origin.port == self.port else { return false }
        if !self.isWildcard { return origin.host == self.host }
        return origin.host.utf8.count > self.host.utf8.count + 1 && origin.host.hasSuffix("." + self.host)
    }

    /// The entry as stored and answered: `https://*.example.com`, `http://localhost:3000`.
    public var description: String {
        "\(self.scheme)://\(self.isWildcard ? "*." : "")\(self.host)\(self.port.map { ":\($0)" } ?? "")"
    }
}

/// A browser's origin, as its `Origin` header names it (RFC 6454): scheme, host and port.
public struct WebOrigin: Hashable, Sendable {
    /// Lowercased.
    public let scheme: String
    /// Lowercased.
    public let host: String
    /// The port when it is not the scheme's default.
    public let port: Int?

    /// Nil for `null` (opaque origins: sandboxed frames, `file:` pages) and anything that is
    /// not `scheme://host[:port]`.
    public init?(header: String) {
        guard let parsed = OriginText(header, allowsWildcard: false, allowsTrailingSlash: false) else { return nil }
        self.scheme = parsed.scheme
        self.host = parsed.host
        self.port = parsed.port
    }

    /// Whether this is the origin of a page served by whoever was reached at `authority` (the
    /// request's `Host`): the same host and port, whatever the scheme (a proxy in front may
    /// end TLS).
    public func isSameAuthority(as authority: String) -> Bool {
        guard let parsed = OriginText("\(self.scheme)://\(authority)", allowsWildcard: false, allowsTrailingSlash: false) else {
            return false
        }
        return parsed.host == self.host && parsed.port == self.port
    }
}

/// The parts of `scheme://host[:port]`, lowercased, the default port dropped.
private struct OriginText {
    var scheme: String
    var host: String
    var isWildcard = false
    var port: Int?

    init?(_ text: String, allowsWildcard: Bool, allowsTrailingSlash: Bool) {
        guard text.utf8.count <= OriginPattern.maximumLength, let separator = text.range(of: "://") else { return nil }
        let scheme = text[..<separator.lowerBound].lowercased()
        guard let first = scheme.utf8.first, Self.isLetter(first),
            scheme.utf8.allSatisfy({ Self.isLetter($0) || Self.isDigit($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") })
        else { return nil }
        var authority = text[separator.upperBound...]
        if allowsTrailingSlash, authority.hasSuffix("/") { authority = authority.dropLast() }
        var hostText = authority
        var port: Int?
        if let colon = authority.lastIndex(of: ":"), !authority[colon...].contains("]") {
            let digits = authority[authority.index(after: colon)...]
            guard (1...5).contains(digits.utf8.count), digits.utf8.allSatisfy(Self.isDigit), let number = Int(digits), (1...65535).contains(number)
            else { return nil }
            port = number
            hostText = authority[..<colon]
        }
        var host = hostText.lowercased()
        if allowsWildcard, host.hasPrefix("*.") {
            self.isWildcard = true
            host.removeFirst(2)
        }
        guard Self.isHost(host) else { return nil }
        self.scheme = scheme
        self.host = host
        if let given = port, given != Self.defaultPort(of: scheme) { self.port = given }
    }

    static func defaultPort(of scheme: String) -> Int? {
        switch scheme {
        case "http", "ws": 80
        case "https", "wss": 443
        default: nil
        }
    }

    /// A registered name (letters, digits, `-`, `_`, in dot-separated labels), an IPv4
    /// address (the same alphabet) or a bracketed IPv6 address.
    private static func isHost(_ host: String) -> Bool {
        let bytes = Array(host.utf8)
        guard !bytes.isEmpty, bytes.count <= 255 else { return false }
        if bytes.first == UInt8(ascii: "[") {
            guard bytes.count > 2, bytes.last == UInt8(ascii: "]") else { return false }
            return bytes.dropFirst().dropLast().allSatisfy { Self.isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }
        }
        return host.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63
                && label.utf8.allSatisfy { Self.isLetter($0) || Self.isDigit($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
        }
    }

    private static func isLetter(_ byte: UInt8) -> Bool { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20) }
    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
    private static func isHexDigit(_ byte: UInt8) -> Bool { Self.isDigit(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20) }
}
