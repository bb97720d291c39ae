import Foundation
import Postgres
import TestSupport
import Testing

@Suite("Listener")
struct ListenerTests {
    @Test("a NOTIFY from another connection reaches the listener, also after its connection is killed")
    func notificationsAndReconnect() async throws {
        let channel = TestDatabase.uniqueName("channel")
        let listener = PostgresListener(
            configuration: TestDatabase.configuration,
            channels: [channel],
            backoff: .init(initial: .milliseconds(10), maximum: .milliseconds(200)),
            logger: TestDatabase.logger
        )
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await listener.run() }
            var events = listener.events.makeAsyncIterator()

            #expect(await events.next() == .listening(afterGap: false))
            try await TestDatabase.pool.execute("SELECT pg_notify($1, $2)", [channel, "first"])
            let first = await events.next()
            guard case .notification(let notification) = first else {
                Issue.record("expected a notification, got \(String(describing: first))")
                return
            }
            #expect(notification.channel == channel)
            #expect(notification.payload == "first")

            let pid = try #require(listener.backendPID)
            #expect(try await TestDatabase.pool.query("SELECT pg_terminate_backend($1::int4)", [Int32(pid)]).scalar(Bool.self))
            // The listener notices, reconnects and says that it may have missed something.
            #expect(await events.next() == .listening(afterGap: true))
            #expect(listener.backendPID != pid)

            try await TestDatabase.pool.execute("SELECT pg_notify($1, $2)", [channel, "second"])
            let second = await events.next()
            guard case .notification(let again) = second else {
                Issue.record("expected a notification, got \(String(describing: second))")
                return
            }
            #expect(again.payload == "second")
            group.cancelAll()
        }
        #expect(!listener.isListening)
    }

    @Test("notifications of other channels are not delivered")
    func otherChannels() async throws {
        let channel = TestDatabase.uniqueName("mine")
        let other = TestDatabase.uniqueName("other")
        let listener = PostgresListener(configuration: TestDatabase.configuration, channels: [channel], logger: TestDatabase.logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await listener.run() }
            var events = listener.events.makeAsyncIterator()
            #expect(await events.next() == .listening(afterGap: false))
            try await TestDatabase.pool.execute("SELECT pg_notify($1, 'x'), pg_notify($2, 'y')", [other, channel])
            guard case .notification(let notification) = await events.next() else {
                Issue.record("expected a notification")
                return
            }
            #expect(notification.channel == channel)
            #expect(notification.payload == "y")
            group.cancelAll()
        }
    }
}
