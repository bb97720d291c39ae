import Postgres
import ReceiptsCore
import ReceiptsStore
import TestSupport
import Testing

/// Who sees an event of a chat: the members of the chat's audience version when it happened
/// (`sql/migrations/0008_event_audiences.sql`), found when the log is read, never copied into
/// the event.
@Suite("Event audiences")
struct EventAudienceTests {
    /// The tenant's events as a resuming stream reads them: `type chat userId: audience`.
    static func audiences(_ store: ReceiptsStore, tenant: String, pageSize: Int = 100) async throws -> [String] {
        var position: Int64 = 0
        var lines: [String] = []
        while true {
            let page = try await store.events(tenant: tenant, after: position, through: .max, limit: pageSize)
            for event in page {
                lines.append("\(event.type) \(event.chatId ?? "-") \(event.userId ?? "-"): \(event.audience.sorted().joined(separator: ","))")
            }
            guard let last = page.last, page.count == pageSize else { return lines }
            position = last.id
        }
    }

    @Test("a read in a group of 5,000 writes an event of at most 512 bytes, and all 5,000 members see it")
    func eventSizeDoesNotGrowWithTheGroup() async throws {
        let (store, pool, tenant) = try await TestDatabase.serviceStore(tenantPrefix: "audience-size")
        let members = (0..<5_000).map { "member-\($0)" }
        #expect(try await store.putChat(tenant: tenant, chat: "g", kind: .group, members: members) == .created)
        _ = try await store.sendMessage(tenant: tenant, chat: "g", id: "m", sender: members[0], text: "hello")
        _ = try await store.markRead(tenant: tenant, chat: "g", user: members[1], target: .messages(["m"]))

        let sizes = try await TestDatabase.pool.query(
            "SELECT type, pg_column_size(event.*) FROM receipts.events AS event WHERE event.tenant_id = $1 ORDER BY event_id", [tenant]
        ).map { try $0.decode((String, Int).self) }
        #expect(sizes.map(\.0) == ["message.created", "receipt.read", "unread.changed"])
        for (type, size) in sizes { #expect(size <= 512, "\(type): \(size) bytes") }

        let events = try await store.events(tenant: tenant, after: 0, through: .max, limit: 10)
        let read = try #require(events.first { $0.type == "receipt.read" })
        #expect(Set(read.audience) == Set(members))
        #expect(events.first { $0.type == "unread.changed" }?.audience == [members[1]])
        await pool.close()
    }

    @Test("an event is seen by who was a member when it happened, whatever the page it is read in")
    func audienceFollowsJoinsAndLeaves() async throws {
        let (store, pool, tenant) = try await TestDatabase.serviceStore(tenantPrefix: "audience-members")
        #expect(try await store.putChat(tenant: tenant, chat: "g", kind: .group, members: ["s", "a", "b"]) == .created)
        _ = try await store.sendMessage(tenant: tenant, chat: "g", id: "m1", sender: "s", text: "1")
        _ = try await store.markDelivered(tenant: tenant, chat: "g", user: "a", target: .messages(["m1"]))
        #expect(try await store.leave(tenant: tenant, chat: "g", user: "b") == .left)
        _ = try await store.sendMessage(tenant: tenant, chat: "g", id: "m2", sender: "s", text: "2")
        #expect(try await store.join(tenant: tenant, chat: "g", user: "c") == .joined)
        _ = try await store.sendMessage(tenant: tenant, chat: "g", id: "m3", sender: "s", text: "3")
        #expect(try await store.join(tenant: tenant, chat: "g", user: "b") == .joined)
        _ = try await store.markDelivered(tenant: tenant, chat: "g", user: "a", target: .messages(["m3"]))

        let expected = [
            "message.created g s: a,b,s",
            "receipt.delivered g a: a,b,s",
            "unread.changed g b: b",
            "message.created g s: a,s",
            "message.created g s: a,c,s",
            "receipt.delivered g a: a,b,c,s",
        ]
        let whole = try await Self.audiences(store, tenant: tenant)
        #expect(whole == expected)
        // A page that starts after the first event of a version finds that version's members too.
        for pageSize in [1, 2] {
            let paged = try await Self.audiences(store, tenant: tenant, pageSize: pageSize)
            #expect(paged == expected, "pages of \(pageSize)")
        }
        await pool.close()
    }

    @Test("a deleted chat's events keep their audience; a new chat of the same id has its own")
    func deletedChatKeepsItsAudience() async throws {
        let (store, pool, tenant) = try await TestDatabase.serviceStore(tenantPrefix: "audience-deleted")
        #expect(try await store.putChat(tenant: tenant, chat: "g", kind: .group, members: ["a", "b"]) == .created)
        _ = try await store.sendMessage(tenant: tenant, chat: "g", id: "m1", sender: "a", text: "1")
        #expect(try await store.deleteChat(tenant: tenant, chat: "g") == .deleted)
        #expect(try await store.putChat(tenant: tenant, chat: "g", kind: .group, members: ["c", "d"]) == .created)
        _ = try await store.sendMessage(tenant: tenant, chat: "g", id: "m2", sender: "c", text: "2")

        let audiences = try await Self.audiences(store, tenant: tenant)
        #expect(
            audiences == [
                "message.created g a: a,b",
                "chat.deleted g -: a,b",
                "unread.changed g b: b",
                "message.created g c: c,d",
            ])
        await pool.close()
    }

    @Test("an erased user is in the audience of no event, a deleted chat's included")
    func erasedUserLeavesEveryAudience() async throws {
        let (store, pool, tenant) = try await TestDatabase.serviceStore(tenantPrefix: "audience-erased")
        #expect(try await store.putChat(tenant: tenant, chat: "g", kind: .group, members: ["a", "b"]) == .created)
        #expect(try await store.putChat(tenant: tenant, chat: "old", kind: .group, members: ["a", "b"]) == .created)
        _ = try await store.sendMessage(tenant: tenant, chat: "g", id: "m1", sender: "a", text: "1")
        _ = try await store.sendMessage(tenant: tenant, chat: "old", id: "m2", sender: "a", text: "2")
        #expect(try await store.deleteChat(tenant: tenant, chat: "old") == .deleted)
        _ = try await store.requestUserErasure(tenant: tenant, user: "b", deletingMessages: false)

        let audiences = try await Self.audiences(store, tenant: tenant)
        #expect(
            audiences == [
                "message.created g a: a",
                "message.created old a: a",
                "chat.deleted old -: a",
                // Their own events leave the log with the erasure worker's steps.
                "unread.changed old b: b",
            ])
        await pool.close()
    }

    @Test("retention deletes the audience periods that ended a day before the events it keeps, and no other")
    func retentionDeletesEndedPeriods() async throws {
        let (store, pool, tenant) = try await TestDatabase.serviceStore(tenantPrefix: "audience-retention")
        #expect(try await store.putChat(tenant: tenant, chat: "g", kind: .group, members: ["a", "b", "c"]) == .created)
        #expect(try await store.leave(tenant: tenant, chat: "g", user: "b") == .left)
        #expect(try await store.leave(tenant: tenant, chat: "g", user: "c") == .left)
        // b left long ago; c just now.
        _ = try await TestDatabase.pool.query(
            """
            UPDATE receipts.audience_periods SET left_at = now() - interval '2 days'
            WHERE tenant_id = $1 AND user_id = 'b'
            """, [tenant])
        _ = try await store.pruneEvents(olderThanSeconds: 3_600)

        let periods = try await TestDatabase.pool.query(
            "SELECT user_id::text FROM receipts.audience_periods WHERE tenant_id = $1 ORDER BY user_id", [tenant]
        ).map { try $0.decode(String.self, column: 0) }
        #expect(periods == ["a", "c"])
        await pool.close()
    }

    @Test("a database of the schema before 0008 keeps its events' stored audiences, and its current members see the events after")
    func upgradeKeepsStoredAudiences() async throws {
        let migrations = try Migration.load(from: SchemaSnapshotTests.migrations)
        let scripts = try RepeatableScript.load(besides: SchemaSnapshotTests.migrations)
        let lines = try await TestDatabase.withFreshDatabase { url in
            let configuration = PostgresConfiguration(connectionString: url)
            let connection = try await PostgresConnection.connect(to: configuration, logger: TestDatabase.logger)
            do {
                // The tables as 0007 left them, with rows as the previous release wrote them
                // (its functions are not at hand: the rows go in directly).
                _ = try await MigrationRunner(migrations: migrations.filter { $0.version < 8 }, logger: TestDatabase.logger)
                    .applyPending(on: connection)
                _ = try await connection.executeScript(
                    """
                    SET receipts.all_tenants = on;
                    INSERT INTO receipts.tenants (tenant_id, name, token_secret) VALUES ('t', 't', '\\x01');
                    INSERT INTO receipts.chats (tenant_id, chat_id, kind, members_numbered) VALUES ('t', 'g', 'group', 3);
                    INSERT INTO receipts.chat_members (tenant_id, chat_id, user_id, left_at)
                    VALUES ('t', 'g', 'a', NULL), ('t', 'g', 'b', NULL), ('t', 'g', 'c', now());
                    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, audience)
                    VALUES ('t', nextval('receipts.event_ids'), pg_current_xact_id(), 'message.created', 'g', 'a', '{a,b,c}');
                    RESET receipts.all_tenants;
                    """)
                _ = try await MigrationRunner(migrations: migrations, scripts: scripts, logger: TestDatabase.logger)
                    .applyPending(on: connection)
                _ = try await connection.executeScript(
                    """
                    SELECT receipts.send_message('t', 'g', 'm', 'a', 'after');
                    SELECT receipts.join_chat('t', 'g', 'd');
                    SELECT receipts.send_message('t', 'g', 'm2', 'a', 'after the join');
                    """)
                let rows = try await connection.query(
                    "SELECT type, user_id, audience::text, audience_version FROM receipts.events_after('t', 0, 1000, 100)")
                let lines = try rows.map { row in
                    let (type, user, audience, version) = try row.decode((String, String?, String, Int32?).self)
                    return "\(type) \(user ?? "-") \(audience) \(version.map(String.init) ?? "-")"
                }
                await connection.close()
                return lines
            } catch {
                await connection.close()
                throw error
            }
        }
        #expect(
            lines == [
                "message.created a {a,b,c} -",
                "message.created a {a,b} 1",
                "message.created a {a,b,d} 2",
            ])
    }
}
