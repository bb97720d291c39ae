import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOPosix
import ReceiptsCore
import ReceiptsLive
import ServiceLifecycle
import Synchronization

/// The credentials of every open stream, watched together for the whole process: a stream
/// must not outlive its credential (the contract: a stream whose credential stops being
/// valid closes, WebSocket 1008, SSE ends).
///
/// - A user token ends at its `exp`, known exactly: one timer for each token (not each
///   stream) ends its streams then.
/// - Every credential is checked again with the `Authenticator`, the same check a new request
///   passes, when the credentials of any tenant change (on any instance: `CredentialChanges`)
///   and every `checkInterval` besides, for a change made in psql without the NOTIFY: a
///   removed key ends its streams within about a second of the change, or within one and a
///   half intervals without the NOTIFY (the check reads what the database held at most half
///   an interval before).
/// - Each credential is checked once however many streams use it (a tenant key's thousands).
///   The streams hold no task and no timer for it, so an idle stream costs nothing here.
/// - A check that fails for any other reason (the database is out) keeps the streams open:
///   the events they carry come from the same database, and an outage must not make every
///   client reconnect.
final class StreamCredentialWatch: Service, Sendable {
    /// What `watch(_:ended:)` gave a stream, to stop watching when the stream ends.
    struct Watch: Sendable {
        fileprivate let credential: String
        fileprivate let id: Int
    }

    private struct Watched {
        let principal: Principal
        /// The streams' `ended`, by their watch's id.
        var streams: [Int: @Sendable () -> Void] = [:]
        /// Ends the streams at a user token's expiry.
        var expiry: Scheduled<Void>?
    }

    private let authenticator: Authenticator
    let checkInterval: Duration
    private let logger: Logger
    private let watched = Mutex<[String: Watched]>([:])
    private let nextId = Atomic<Int>(0)

    init(authenticator: Authenticator, checkInterval: Duration, logger: Logger) {
        self.authenticator = authenticator
        self.checkInterval = checkInterval
        self.logger = logger
    }

    /// Watches `credential` for one stream: `ended` is called once, on any thread, if it stops
    /// being valid (at once for a token already expired). Call `stop(_:)` when the stream ends.
    func watch(_ credential: StreamCredential, ended: @escaping @Sendable () -> Void) -> Watch {
        let id = self.nextId.add(1, ordering: .relaxed).newValue
        let key = credential.credential
        let expired = self.watched.withLock { watched -> Bool in
            if let expiresAt = credential.expiresAt, expiresAt.timeIntervalSinceNow <= 0 { return true }
            if watched[key] == nil {
                var entry = Watched(principal: credential.principal)
                if let expiresAt = credential.expiresAt {
                    entry.expiry = NIOSingletons.posixEventLoopGroup.any().scheduleTask(in: .nanoseconds(Int64(expiresAt.timeIntervalSinceNow * 1e9) + 1)) {
                        self.end(key)
                    }
                }
                watched[key] = entry
            }
            // In place: a copy of the entry would copy its streams, thousands for a tenant key.
            watched[key]!.streams[id] = ended
            return false
        }
        if expired { ended() }
        return Watch(credential: credential.credential, id: id)
    }

    /// `watch(_:ended:)` of `credential` as a held stream takes it (`OpeningStream`): it
    /// returns what stops the watch.
    func watching(_ credential: StreamCredential) -> OpeningStream.CredentialWatch {
        { ended in
            let watch = self.watch(credential, ended: ended)
            return { self.stop(watch) }
        }
    }

    /// Stops watching for the stream `watch` was given to.
    func stop(_ watch: Watch) {
        self.watched.withLock { watched in
            // In place, as in `watch`.
            guard watched[watch.credential]?.streams.removeValue(forKey: watch.id) != nil,
                watched[watch.credential]?.streams.isEmpty == true
            else { return }
            watched.removeValue(forKey: watch.credential)?.expiry?.cancel()
        }
    }

    func run() async {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                _ = await self.authenticator.changes.waitForAnyChange(atMost: self.checkInterval)
                guard !Task.isCancelled else { return }
                await self.checkAll()
            }
        }
    }

    /// Checks every credential watched once, and ends the streams of those no longer valid.
    func checkAll() async {
        let credentials = self.watched.withLock { $0.map { (credential: $0.key, principal: $0.value.principal) } }
        var failures = 0
        for (credential, principal) in credentials {
            do {
                let current = try await self.authenticator.principal(for: credential, knownWithin: self.checkInterval / 2)
                if current != principal { self.end(credential) }
            } catch let error as APIError where error.status == .unauthorized {
                self.end(credential)
            } catch is CancellationError {
                return
            } catch {
                failures += 1
            }
        }
        if failures > 0 {
            self.logger.warning(
                "checking the open streams' credentials failed; their streams stay open",
                metadata: ["receipts.credentials_unchecked": "\(failures)"])
        }
    }

    /// Ends every stream of `credential`.
    private func end(_ credential: String) {
        let ended = self.watched.withLock { $0.removeValue(forKey: credential) }
        ended?.expiry?.cancel()
        for end in ended?.streams.values ?? [:].values { end() }
    }
}
