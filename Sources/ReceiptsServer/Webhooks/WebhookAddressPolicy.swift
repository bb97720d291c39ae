import Foundation
import NIOCore

/// Which network addresses a webhook may be delivered to (docs/api.md, "Webhooks": not loopback, private,
/// link-local, multicast or unspecified, unless `RECEIPTS_WEBHOOK_ALLOW_PRIVATE_NETWORKS=true`).
///
/// A webhook's URL comes from a tenant, and the service sits inside a network: without this
/// check a tenant could make it POST to the database's host, a cloud metadata endpoint
/// (169.254.169.254) or an admin interface on loopback. The check is made on the address
/// the delivery connects to (`WebhookSender` resolves the name, checks every address, and
/// pins the connection to the one it checked), so a name that resolves to a private address,
/// or changes to one after the `PUT`, is refused too; a literal such address in the URL is
/// refused at the `PUT` already.
struct WebhookAddressPolicy: Sendable {
    /// Whether private and loopback addresses are allowed (tests; a receiver inside the
    /// service's own network).
    var allowsPrivateNetworks: Bool

    /// Whether the service may connect to `address`.
    func allows(_ address: SocketAddress) -> Bool {
        self.allowsPrivateNetworks || Self.isPublic(address)
    }

    /// Whether `address` lies outside the refused ranges; false for anything but IPv4 and IPv6.
    static func isPublic(_ address: SocketAddress) -> Bool {
        guard let bytes = Self.bytes(of: address) else { return false }
        return Self.isPublic(bytes)
    }

    /// The address of an IP literal (`10.0.0.1`, `::1`, `[::1]`); nil for a host name.
    static func literal(_ host: String) -> SocketAddress? {
        var host = host
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return try? SocketAddress(ipAddress: host, port: 0)
    }

    /// Whether the 4 (IPv4) or 16 (IPv6) address bytes lie outside the refused ranges.
    static func isPublic(_ bytes: [UInt8]) -> Bool {
        if bytes.count == 4 { return self.isPublicIPv4(bytes) }
        guard bytes.count == 16 else { return false }
        // IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) reach an IPv4 address.
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff
            || bytes[0..<12] == [0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0]
        {
            return self.isPublicIPv4(Array(bytes[12..<16]))
        }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) { return false }  // :: (unspecified), ::1 (loopback)
        if bytes[0..<12].allSatisfy({ $0 == 0 }) { return false }  // IPv4-compatible (deprecated)
        switch bytes[0] {
        case 0xff: return false  // multicast
        case 0xfc, 0xfd: return false  // unique local (fc00::/7)
        case 0xfe where bytes[1] & 0xc0 == 0x80: return false  // link-local (fe80::/10)
        case 0xfe where bytes[1] & 0xc0 == 0xc0: return false  // site-local (fec0::/10, deprecated)
        default: return true
        }
    }

    private static func isPublicIPv4(_ bytes: [UInt8]) -> Bool {
        switch (bytes[0], bytes[1]) {
        case (0, _): return false  // "this network", unspecified
        case (10, _): return false  // private
        case (100, 64...127): return false  // shared address space (carrier-grade NAT)
        case (127, _): return false  // loopback
        case (169, 254): return false  // link-local (cloud metadata endpoints)
        case (172, 16...31): return false  // private
        case (192, 168): return false  // private
        case (192, 0) where bytes[2] == 0: return false  // IETF protocol assignments
        case (198, 18...19): return false  // benchmarking
        case (224...255, _): return false  // multicast, reserved, broadcast
        default: return true
        }
    }

    private static func bytes(of address: SocketAddress) -> [UInt8]? {
        switch address {
        // The address bytes at their place in the socket address (after the 2-byte family
        // and the 2-byte port; for IPv6 also the 4-byte flow label), read as bytes so that no
        // C module's field names are needed.
        case .v4(let address):
            return withUnsafeBytes(of: address.address) { Array($0[4..<8]) }
        case .v6(let address):
            return withUnsafeBytes(of: address.address) { Array($0[8..<24]) }
        case .unixDomainSocket:
            return nil
        }
    }
}
