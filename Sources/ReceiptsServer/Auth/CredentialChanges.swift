import Foundation
import Postgres
import ReceiptsStore
import ServiceLifecycle

/// Brings news of changed credentials to everything that held them, on every instance.
///
/// Every change of a tenant's credentials (a key added or removed, tokens revoked, the token
/// secret rotated, the tenant erased) NOTIFYs `receipts_credentials` with the tenant's id
/// (`receipts.credentials_changed`). The listener hears it (`CredentialNotifications`
/// subscribes to the channel) and this:
/// - invalidates the `CredentialDirectory`: the next request reloads it, so a removed key, a
///   revoked token or a retired secret is refused (401) on this instance within the time of a
///   notification and one reload, and the token keys (`UserTokens`) follow its generations;
/// - wakes the streams' credential watch, which checks every open stream's credential again at
///   once and closes the streams (WebSocket 1008, SSE ends) of those no longer valid
///   (`StreamCredentialWatch`).
/// A listener that reconnects may have missed notifications: it counts as a change of every
/// tenant. The periodic checks (`CredentialDirectory.Options.maximumAge`, the streams'
/// interval) remain behind it if a notification is lost anyway.
struct CredentialChanges: Sendable {
    /// The channel credential changes are announced on.
    static let channel = "receipts_credentials"

    let directory: CredentialDirectory

    /// What the listener reported on `channel`.
    func heard(_ event: PostgresListener.Event) {
        switch event {
        case .listening(let afterGap):
            if afterGap { self.changed(tenant: nil) }
        case .missed:
            self.changed(tenant: nil)
        case .notification(let notification) where notification.channel == Self.channel:
            self.changed(tenant: notification.payload)
        case .notification:
            break
        }
    }

    /// The credentials of `tenant` (nil: of any tenant) changed.
    func changed(tenant: String?) {
        self.directory.invalidate(tenant: tenant)
    }

    /// Returns when the credentials of any tenant change, after `timeout`, or when the task is
    /// cancelled, whichever comes first; true when they changed.
    func waitForAnyChange(atMost timeout: Duration) async -> Bool {
        await self.directory.waitForChange(of: nil, atMost: timeout)
    }
}

/// Hands the listener's notifications of changed credentials to `CredentialChanges`, until
/// the service shuts down.
struct CredentialNotifications: Service {
    let changes: CredentialChanges
    private let notifications: AsyncStream<PostgresListener.Event>

    /// Subscribes to `listener`: make it before the listener runs.
    init(listener: PostgresListener, changes: CredentialChanges) {
        self.changes = changes
        self.notifications = listener.subscribe(to: CredentialChanges.channel)
    }

    func run() async {
        await cancelWhenGracefulShutdown {
            for await event in self.notifications { self.changes.heard(event) }
        }
    }
}
