import Foundation
import NIOHTTP1

extension BenchScenarios {
    // MARK: - What a commit costs

    /// Single mark-reads one at a time, and from four clients at once: the latency of a
    /// request whose commit PostgreSQL must make durable before it answers. Against a Patroni
    /// cluster (`--database-url` of scripts/ha-cluster.sh), run once with
    /// `synchronous_mode` on and once off, interleaved: the difference is what waiting for
    /// the standby costs each write (docs/operations.md, "High availability").
    func markReadLatency(into results: inout BenchResults) async throws {
        let key = self.tenant.apiKey
        let perClient = self.count(2_000, minimum: 50)
        for clients in [1, 4] {
            for index in 0..<clients {
                try await self.client.expect(201, .PUT, "/v1/chats/commit\(clients)x\(index)", as: key,
                                             body: ["kind": "direct", "members": ["cs\(index)", "cr\(index)"]])
                try await self.insertMessages(chat: "commit\(clients)x\(index)", sender: "cs\(index)", count: perClient)
            }
        }
        try await self.settleDatabase()
        let client = self.client
        for clients in [1, 4] {
            let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
                for index in 0..<clients {
                    group.addTask {
                        var latencies: [Double] = []
                        latencies.reserveCapacity(perClient)
                        for message in 1...perClient {
                            let started = ContinuousClock.now
                            try await client.check(200, .POST, "/v1/chats/commit\(clients)x\(index)/read", as: key,
                                                    body: ["userId": "cr\(index)", "messageIds": ["commit\(clients)x\(index)-\(message)"]])
                            latencies.append(Double((ContinuousClock.now - started) / .microseconds(1)) / 1_000)
                        }
                        return latencies
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            results.add("mark-read latency, one message per request, \(clients) client(s)", latencies: latencies, target: "—",
                        note: "n=\(latencies.count)")
        }
    }
}
