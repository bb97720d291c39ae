import Postgres
import TestSupport
import Testing

/// Log positions as PostgreSQL writes them, and a multi-host connection string split per host.
struct WALPositionTests {
    @Test("a position reads PostgreSQL's text form and writes it back")
    func roundTrip() throws {
        let position = try #require(WALPosition("16/B374D848"))
        #expect(position.offset == 0x16_B374_D848)
        #expect(position.description == "16/B374D848")
        #expect(WALPosition("0/0")?.offset == 0)
        #expect(WALPosition("FFFFFFFF/FFFFFFFF")?.offset == UInt64.max)
        #expect(try #require(WALPosition("0/10")) < position)
    }

    @Test("anything but two hexadecimal halves is no position", arguments: ["", "/", "16", "16/", "/1", "16/B374D848/1", "G/1", "123456789/1", "1/ 2", "-1/2"])
    func malformed(text: String) {
        #expect(WALPosition(text) == nil)
    }

    @Test("a multi-host URL gives one configuration per host, every other setting kept")
    func eachHostOfAURL() throws {
        var configuration = PostgresConfiguration(
            connectionString: "postgresql://receipts:p%27w@127.0.0.1:55431,127.0.0.1:55432,db3/receipts?target_session_attrs=standby&sslmode=disable")
        configuration.role = "receipts_service"
        let hosts = try configuration.eachHost()
        #expect(hosts.map(\.server) == ["127.0.0.1:55431", "127.0.0.1:55432", "db3:5432"])
        let first = hosts[0].configuration
        #expect(first.role == "receipts_service")
        #expect(first.connectionString.contains("host='127.0.0.1'"))
        #expect(first.connectionString.contains("port='55431'"))
        #expect(first.connectionString.contains("password='p\\'w'"))
        #expect(first.connectionString.contains("dbname='receipts'"))
        #expect(first.connectionString.contains("sslmode='disable'"))
        #expect(!first.connectionString.contains("target_session_attrs"))
    }

    @Test("a keyword/value string with one port for every host, and a single host")
    func eachHostOfKeywords() throws {
        let hosts = try PostgresConfiguration(connectionString: "host=a,b port=6000 dbname=x").eachHost()
        #expect(hosts.map(\.server) == ["a:6000", "b:6000"])
        #expect(try PostgresConfiguration(connectionString: "postgresql://u@h/db").eachHost().map(\.server) == ["h:5432"])
    }

    @Test("lists of hosts and ports that do not pair up, and strings libpq cannot read, fail")
    func eachHostRefuses() {
        #expect(throws: PostgresError.self) { try PostgresConfiguration(connectionString: "host=a,b,c port=1,2").eachHost() }
        #expect(throws: PostgresError.self) { try PostgresConfiguration(connectionString: "host='unterminated").eachHost() }
    }

    @Test("each host's string connects: the test database reached through a one-host split")
    func splitConnects() async throws {
        let hosts = try PostgresConfiguration(connectionString: TestDatabase.url).eachHost()
        let connection = try await PostgresConnection.connect(to: try #require(hosts.first).configuration, logger: TestDatabase.logger)
        let rows = try await connection.query("SELECT pg_current_wal_lsn()::text")
        #expect(WALPosition(try #require(rows.first).decode(String.self, column: 0)) != nil)
        await connection.close()
    }
}
