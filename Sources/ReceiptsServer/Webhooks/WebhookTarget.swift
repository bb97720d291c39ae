import Foundation

/// A webhook's `url`, checked: `http` or `https`, a host, at most 2048 characters.
struct WebhookTarget: Sendable, Hashable {
    static let maximumLength = 2048

    /// The URL as given (what is stored and shown).
    let url: String
    /// `http` or `https`.
    let scheme: String
    /// The host as it appears in the URL, without brackets for IPv6.
    let host: String
    let port: Int

    /// Nil when `url` is not an absolute `http`/`https` URL with a host, or is longer than
    /// 2048 characters (Unicode code points, as JSON Schema counts them).
    init?(_ url: String) {
        guard url.unicodeScalars.count <= Self.maximumLength, !url.unicodeScalars.contains("\0"), let components = URLComponents(string: url),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            var host = components.host, !host.isEmpty
        else { return nil }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if let port = components.port, !(1...65535).contains(port) { return nil }
        self.url = url
        self.scheme = scheme
        self.host = host
        self.port = components.port ?? (scheme == "https" ? 443 : 80)
    }
}
