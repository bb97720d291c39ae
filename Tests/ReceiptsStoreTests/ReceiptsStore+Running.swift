import ReceiptsStore

extension ReceiptsStore {
    /// Runs `body` while the store runs as the service runs it (its batchers take requests),
    /// and stops it afterwards.
    func whileRunning<Result: Sendable>(_ body: () async throws -> Result) async throws -> Result {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.run() }
            defer { group.cancelAll() }
            return try await body()
        }
    }
}
