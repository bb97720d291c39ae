import Foundation
import Logging
import NIOHTTP1
import Postgres

extension BenchScenarios {
    // MARK: - The idle path, hop by hop

    /// Where the idle read → sender time goes. Each hop the read and its event take, timed on
    /// its own, one at a time, with nothing else going on:
    /// - the HTTP round trip (`GET /healthz`: loopback, the HTTP stack, this client);
    /// - the read's SQL as the service calls it (`receipts.mark_read` via libpq, a transaction
    ///   of its own: the function, its triggers and the commit);
    /// - the commit's `NOTIFY` until a listening connection has it (`pg_notify` in a
    ///   transaction of its own, until `PostgresListener` yields it);
    /// - the hub's read of the log (`receipts.events_since` after the read's events);
    /// - a libpq round trip (`SELECT 1`), what every statement pays besides its work.
    /// `serviceMilliseconds` is the read requests' mean time inside the service (from its
    /// `/metrics`), measured by the caller around the idle figure.
    func idlePathHops(serviceMilliseconds: Double?, into results: inout BenchResults) async throws {
        let samples = self.count(300, minimum: 20)
        let warmUp = 20
        let chat = "hops"
        try await self.client.expect(201, .PUT, "/v1/chats/\(chat)", as: self.tenant.apiKey, body: ["kind": "direct", "members": ["hs", "hr"]])
        try await self.insertMessages(chat: chat, sender: "hs", count: samples + warmUp)
        try await self.settleDatabase()

        let client = self.client
        let http = try await Self.timed(samples, warmUp: warmUp) { _ in try await client.check(200, .GET, "/healthz", as: nil) }
        let pool = self.database.servicePool
        let roundTrip = try await Self.timed(samples, warmUp: warmUp) { _ in _ = try await pool.query("SELECT 1", []) }

        // The read's SQL, and then the log read that finds its events.
        let tenant = self.tenant.id
        var sql: [Double] = []
        var logRead: [Double] = []
        for index in 1...(samples + warmUp) {
            let before = try await pool.query("SELECT last_value FROM receipts.event_ids", []).scalar(Int64.self)
            let start = ContinuousClock.now
            _ = try await pool.query(
                "SELECT outcome, marked, unread_count FROM receipts.mark_read($1, $2, $3, $4, NULL)",
                [tenant, chat, "hr", ["\(chat)-\(index)"]])
            let marked = ContinuousClock.now
            let events = try await pool.query("SELECT event_id FROM receipts.events_since($1, 500)", [before])
            let read = ContinuousClock.now
            guard events.contains(where: { !$0.isNull(column: 0) }) else { throw BenchFailure("the log read found no event of the read") }
            if index > warmUp {
                sql.append(Self.milliseconds(marked - start))
                logRead.append(Self.milliseconds(read - marked))
            }
        }

        let notify = try await self.notifyToListen(samples: samples, warmUp: warmUp)

        results.add("… hop: HTTP round trip (GET /healthz)", latencies: http, target: "")
        if let serviceMilliseconds {
            results.add("… hop: the read request inside the service (mean)", unit: "ms", value: serviceMilliseconds, target: "",
                        note: "from /metrics: middleware, batcher, SQL, answer")
        }
        results.add("… hop: the read's SQL (receipts.mark_read via libpq, commit)", latencies: sql, target: "")
        results.add("… hop: NOTIFY → a listening connection", latencies: notify, target: "")
        results.add("… hop: the hub's log read (receipts.events_since)", latencies: logRead, target: "")
        results.add("… hop: libpq round trip (SELECT 1)", latencies: roundTrip, target: "")
    }

    /// `pg_notify` in a transaction of its own until a `PostgresListener` on another
    /// connection yields it; milliseconds.
    private func notifyToListen(samples: Int, warmUp: Int) async throws -> [Double] {
        let channel = "receipts_bench_hops"
        let listener = PostgresListener(
            configuration: .init(connectionString: self.database.url, applicationName: "receipts-bench-listener"),
            logger: Logger(label: "bench-listener"))
        var notifications = listener.subscribe(to: channel).makeAsyncIterator()
        let listening = Task { try await listener.run() }
        defer { listening.cancel() }
        // Until LISTEN is in effect.
        guard case .listening = await notifications.next() else { throw BenchFailure("the listener did not start") }
        let pool = self.database.pool
        var latencies: [Double] = []
        for index in 0..<(samples + warmUp) {
            let start = ContinuousClock.now
            _ = try await pool.query("SELECT pg_notify($1, $2)", [channel, String(index)])
            while true {
                guard let event = await notifications.next() else { throw BenchFailure("the listener stopped") }
                if case .notification(let notification) = event, notification.payload == String(index) { break }
            }
            if index >= warmUp { latencies.append(Self.milliseconds(ContinuousClock.now - start)) }
        }
        return latencies
    }

    /// The mean time inside the service of `POST /v1/chats/{chatId}/read` answered 200 so far,
    /// and how many, from the service's `/metrics`.
    func readRequestTotals() async throws -> (seconds: Double, count: Double) {
        let text = String(decoding: try await self.client.check(200, .GET, "/metrics", as: nil), as: UTF8.self)
        var seconds = 0.0
        var count = 0.0
        for line in text.split(separator: "\n") where line.hasPrefix("receipts_http_request_duration_seconds")
            && line.contains("method=\"POST\"") && line.contains("/read\"") && line.contains("status=\"200\"") {
            guard let value = line.split(separator: " ").last.flatMap({ Double($0) }) else { continue }
            if line.hasPrefix("receipts_http_request_duration_seconds_sum") { seconds += value }
            if line.hasPrefix("receipts_http_request_duration_seconds_count") { count += value }
        }
        return (seconds, count)
    }

    /// Runs `call(n)` for n in 0..<(samples + warmUp) one at a time; the milliseconds of each
    /// after the warm-up.
    private static func timed(_ samples: Int, warmUp: Int, _ call: (Int) async throws -> Void) async throws -> [Double] {
        var latencies: [Double] = []
        for index in 0..<(samples + warmUp) {
            let start = ContinuousClock.now
            try await call(index)
            if index >= warmUp { latencies.append(Self.milliseconds(ContinuousClock.now - start)) }
        }
        return latencies
    }

    private static func milliseconds(_ duration: Duration) -> Double {
        Double(duration / .microseconds(1)) / 1000
    }
}
