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
            backoff: .init(initial: .milliseconds(10), maximum: .milliseconds(200)),
            logger: TestDatabase.logger
        )
        var events = listener.subscribe(to: channel).makeAsyncIterator()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await listener.run() }

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
        // The subscription ends with the listener.
        #expect(await events.next() == nil)
    }

    @Test("each subscription gets the notifications of its own channel, and nothing of the others")
    func subscriptionsByChannel() async throws {
        let mine = TestDatabase.uniqueName("mine")
        let theirs = TestDatabase.uniqueName("theirs")
        let unheard = TestDatabase.uniqueName("unheard")
        let listener = PostgresListener(configuration: TestDatabase.configuration, logger: TestDatabase.logger)
        var first = listener.subscribe(to: mine).makeAsyncIterator()
        var second = listener.subscribe(to: theirs).makeAsyncIterator()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await listener.run() }
            #expect(await first.next() == .listening(afterGap: false))
            #expect(await second.next() == .listening(afterGap: false))
            try await TestDatabase.pool.execute(
                "SELECT pg_notify($1, 'nobody'), pg_notify($2, 'for theirs'), pg_notify($3, 'for mine')", [unheard, theirs, mine])
            guard case .notification(let forMine) = await first.next(), case .notification(let forTheirs) = await second.next() else {
                Issue.record("expected a notification on each subscription")
                return
            }
            #expect(forMine.channel == mine && forMine.payload == "for mine")
            #expect(forTheirs.channel == theirs && forTheirs.payload == "for theirs")
            group.cancelAll()
        }
        #expect(await first.next() == nil)
        #expect(await second.next() == nil)
    }

    @Test("a consumer that does not keep up loses notifications past its buffer, and is told so before the next one")
    func boundedSubscription() async throws {
        let channel = TestDatabase.uniqueName("slow")
        let listener = PostgresListener(configuration: TestDatabase.configuration, bufferSize: 4, logger: TestDatabase.logger)
        let marker = TestDatabase.uniqueName("marker")
        var events = listener.subscribe(to: channel).makeAsyncIterator()
        var markers = listener.subscribe(to: marker).makeAsyncIterator()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await listener.run() }
            #expect(await events.next() == .listening(afterGap: false))
            #expect(await markers.next() == .listening(afterGap: false))
            // Ten notifications while the consumer takes none: the first four are kept. The
            // listener hands notifications on in the order they came, so once a later one
            // reached the other subscription, all ten were handed on.
            try await TestDatabase.pool.execute(
                "SELECT pg_notify($1, n::text) FROM generate_series(1, 10) AS n", [channel])
            try await TestDatabase.pool.execute("SELECT pg_notify($1, 'later')", [marker])
            guard case .notification = await markers.next() else {
                Issue.record("expected the later notification")
                return
            }
            var payloads: [String] = []
            for _ in 0..<4 {
                guard case .notification(let notification) = await events.next() else {
                    Issue.record("expected a notification")
                    return
                }
                payloads.append(notification.payload)
            }
            #expect(payloads == ["1", "2", "3", "4"])
            // The next one says that some were lost before it.
            try await TestDatabase.pool.execute("SELECT pg_notify($1, 'after')", [channel])
            #expect(await events.next() == .missed)
            guard case .notification(let after) = await events.next() else {
                Issue.record("expected the notification sent after the loss")
                return
            }
            #expect(after.payload == "after")
            group.cancelAll()
        }
    }
}
