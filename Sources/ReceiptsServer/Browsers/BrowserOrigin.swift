import Synchronization

/// The `Origin` of a browser's request and whether its answer may be shared with that origin
/// (CORS), decided in two steps: `CrossOriginMiddleware` allows what the server allows for
/// every tenant, and `AuthenticationMiddleware`, once it knows the credential's tenant,
/// allows the tenant's own origins or refuses the request (403).
///
/// A reference, carried in the request context: the context travels inwards by value, and
/// the verdict reached inside must reach the middleware that writes the answer's headers on
/// the way out. One request's tasks use it, one after the other.
final class BrowserOrigin: Sendable {
    /// The `Origin` header, as sent.
    let origin: String
    private let allowed: Atomic<Bool>

    init(origin: String, allowed: Bool) {
        self.origin = origin
        self.allowed = Atomic(allowed)
    }

    /// Whether the answer may be shared with the origin (`Access-Control-Allow-Origin`).
    var isAllowed: Bool { self.allowed.load(ordering: .acquiring) }

    /// The credential's tenant allows the origin.
    func allow() {
        self.allowed.store(true, ordering: .releasing)
    }
}
