import ReceiptsStore

extension ReceiptsStore {
    /// Runs `body` while the store runs as the service runs it (its batchers take requests),
    /// and stops it afterwards. With `asService` false, runs `body` alone: the store batches alike (see `TenantBatcher`).
    func whileRunning<Result: Sendable>(asService: Bool = true, _ body: () async throws -> Result) async throws -> Result {
        guard asService else { return try await body() }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.run() }
            defer { group.cancelAll() }
            return try await body()
        }
    }
}
