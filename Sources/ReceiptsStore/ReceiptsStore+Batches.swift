import Logging
import NIOCore
import Postgres
import Tracing

/// How one kind of batch is done in SQL: its statement, and the outcomes its rows give.
struct BatchStatements<Request: Sendable, Outcome: Sendable>: Sendable {
    /// Whether a batch has the log read right behind it for the event hub while the hub is
    /// idle (`runBatches`): for writes with few events and a reader waiting for them (reads).
    /// Not for sends: one to a group of 5,000 has an `unread.changed` for each member, and the
    /// read behind it held the next send up (3.4 to 6.7 ms a send there).
    var handsEventsOver = false
    /// The statement doing `requests` of `tenant`, one outcome row per request in order.
    let statement: @Sendable (_ tenant: String, _ requests: [Request]) -> PostgresQuery
    /// The outcomes in the statement's rows.
    let outcomes: @Sendable (PostgresRows) throws -> [Outcome]
}

extension ReceiptsStore {
    /// How many batch statements a run keeps in the database at once: one running, and the
    /// next one sent behind it, so the server starts it as soon as it has committed the
    /// first, while the service reads and answers that one.
    static let batchesInFlight = 2

    /// Does a tenant's batches from `queue` on one connection, until the queue ends the run.
    ///
    /// Batches go through a `PostgresPipeline`, `batchesInFlight` at a time. Each batch is
    /// its own transaction, followed in the pipeline by a read of the log position it left
    /// (its requests' consistency token), and after each one `committedWrites` is signalled
    /// (also after a failure: a commit whose answer was lost with the connection still added
    /// events). While the event hub would take them (`CommittedWrites.eventsToRead()`), the
    /// log is read right behind a batch of reads in the pipeline
    /// (`BatchStatements.handsEventsOver`), and what it holds is handed to the hub with the
    /// signal.
    /// - A batch that PostgreSQL aborts for a deadlock or a serialization failure (nothing of
    ///   it stays) is sent again, up to five times.
    /// - A batch of several requests that fails for another reason is sent again as one
    ///   batch per request, so a bad request fails only itself; so is one that reached its
    ///   earliest request's deadline (its statement is bounded by it), so the others get the
    ///   rest of their own time.
    /// - A lost connection ends the run with its error; the batcher fails the batches not
    ///   answered and starts another run for the rest.
    func runBatches<Request: Sendable, Outcome: Sendable>(
        of kind: String,
        tenant: String,
        from queue: BatchQueue<Request, Outcome>,
        _ statements: BatchStatements<Request, Outcome>
    ) async throws {
        // A run serves the requests that come while it works, not only the one that started
        // it: its lease has a deadline of its own, not that request's; it waits in its
        // tenant's line of the pool, as the tenant's requests do.
        try await PostgresFlow.named(tenant) {
            try await PostgresDeadline.without {
                try await self.runBatchesOnOneConnection(of: kind, tenant: tenant, from: queue, statements)
            }
        }
    }

    private func runBatchesOnOneConnection<Request: Sendable, Outcome: Sendable>(
        of kind: String,
        tenant: String,
        from queue: BatchQueue<Request, Outcome>,
        _ statements: BatchStatements<Request, Outcome>
    ) async throws {
        try await self.pool.withConnection { connection in
            try await connection.withPipeline { pipeline in
                // What was sent and is not answered yet, in the pipeline's order.
                var inFlight: [InFlight<Request, Outcome>] = []
                var batchesSent = 0
                func send(_ batch: Batch<Request, Outcome>, attempt: Int) throws(PostgresError) {
                    // Never a request whose deadline has passed (its answer is 503 already).
                    let (expired, live) = batch.partitioned(expiredBy: .now())
                    if let expired {
                        queue.fail(expired, with: TenantBatcher<Request, Outcome>.deadlinePassed(waitingFor: "its batch to be sent"))
                    }
                    guard let batch = live else { return }
                    let statement = statements.statement(tenant, batch.requests)
                    // When tracing is on: the batch's spans, and its events take the batch
                    // span as their trace parent (for the webhooks that deliver them).
                    let spans = BatchSpans.start(kind: kind, requests: batch.count, traces: batch.traces, sql: statement.sql)
                    do throws(PostgresError) {
                        if let traceParent = spans?.traceParent {
                            try pipeline.send(
                                statement.sql, statement.binds, by: batch.deadline, setting: (ReceiptsTracing.traceParentSetting, traceParent))
                        } else {
                            try pipeline.send(statement.sql, statement.binds, by: batch.deadline)
                        }
                    } catch where !error.isConnectionLoss {
                        spans?.answered(error: error)
                        spans?.end(error: error)
                        // Not sent (a value the protocol cannot carry): fail only the requests
                        // that hold it.
                        guard batch.count > 1 else { return queue.fail(batch, with: error) }
                        for alone in batch.split { try send(alone, attempt: attempt) }
                        return
                    }
                    self.batchRequests.record(batch.count, of: kind)
                    // Right behind it, where the log stands once it has committed: its
                    // requests' consistency token (`CommitPositionSlot`), received with it.
                    try pipeline.sendWithoutRole(CommitPositionSlot.positionSQL, [])
                    inFlight.append(.batch(batch, attempt: attempt, spans: spans))
                    batchesSent += 1
                    // While the event hub would take them, the log is read right behind the
                    // batch, as soon as it has committed, and handed to the hub with the
                    // signal: the hub need not read it itself.
                    if statements.handsEventsOver, let events = self.committedWrites.eventsToRead() {
                        let read = Self.eventLogQuery(after: events.after, limit: events.limit)
                        try pipeline.send(read.sql, read.binds)
                        inFlight.append(.eventLog(after: events.after))
                    }
                }
                while true {
                    // Another lease of the tenant waits for the pool (the tenant holds its share
                    // of it): this run gives its connection back between two batches, and the
                    // batcher starts it again behind that lease, so that a tenant's steady
                    // stream of reads cannot keep its other work from the pool.
                    if inFlight.isEmpty, batchesSent > 0, self.pool.waiting(of: tenant) > 0 { return }
                    if inFlight.count(where: { !$0.isEventLog }) < Self.batchesInFlight, let batch = queue.next(endingRunWhenEmpty: inFlight.isEmpty) {
                        try send(batch, attempt: 1)
                        continue
                    }
                    guard !inFlight.isEmpty else { return }
                    let rows: PostgresRows
                    let (batch, attempt, spans): (Batch<Request, Outcome>, Int, BatchSpans?)
                    switch inFlight.removeFirst() {
                    case .eventLog(let position):
                        let read: PostgresRows
                        do throws(PostgresError) {
                            read = try await pipeline.receive()
                        } catch {
                            self.committedWrites.signal()
                            if error.isConnectionLoss { throw error }
                            continue
                        }
                        if let events = try? EventLogPage(read) {
                            await self.committedWrites.signal(handingOver: events, readAfter: position)
                        } else {
                            self.committedWrites.signal()
                        }
                        continue
                    case .batch(let sent, let sentAttempt, let sentSpans):
                        (batch, attempt, spans) = (sent, sentAttempt, sentSpans)
                    }
                    let received: Result<PostgresRows, PostgresError>
                    do throws(PostgresError) {
                        received = .success(try await pipeline.receive())
                    } catch {
                        received = .failure(error)
                    }
                    if case .failure(let error) = received { spans?.answered(error: error) } else { spans?.answered() }
                    // Ended once its requests are answered, or it is sent again.
                    defer { spans?.end(error: received.failure) }
                    // The position sent behind the batch comes next, whatever the batch's fate.
                    var committedAt: WALPosition?
                    if !received.isConnectionLoss {
                        do throws(PostgresError) {
                            committedAt = CommitPositionSlot.position(in: try await pipeline.receive())
                        } catch where error.isConnectionLoss {
                            self.committedWrites.signal()
                            throw error
                        } catch {}
                    }
                    // Signalled after a failure too: a commit whose answer was lost with the
                    // connection still added events. A read of the log behind the batch
                    // signals instead, with what it read.
                    if inFlight.first?.isEventLog != true || received.isConnectionLoss {
                        self.committedWrites.signal()
                    }
                    do throws(PostgresError) {
                        rows = try received.get()
                    } catch let error where error.isConnectionLoss {
                        throw error
                    } catch let error where error.isSerializationFailure && attempt < 5 {
                        self.logger.debug("retrying a batch after a conflict", metadata: ["receipts.batch": "\(kind)"])
                        try send(batch, attempt: attempt + 1)
                        continue
                    } catch where batch.count > 1 {
                        self.logger.warning(
                            "a batch failed; doing its requests one by one", metadata: ["receipts.batch": "\(kind)", "error": "\(error)"])
                        for alone in batch.split { try send(alone, attempt: 1) }
                        continue
                    } catch {
                        queue.fail(batch, with: error)
                        continue
                    }
                    do {
                        queue.answer(batch, with: try statements.outcomes(rows), committedAt: committedAt)
                    } catch {
                        queue.fail(batch, with: error)
                    }
                }
            }
        }
    }
}

/// What a run of batches has sent and not yet received, in the pipeline's order.
private enum InFlight<Request: Sendable, Outcome: Sendable> {
    /// A batch, how many times it has been sent, and its spans when tracing is on.
    case batch(Batch<Request, Outcome>, attempt: Int, spans: BatchSpans?)
    /// A read of the log after `after`, right behind the batch before it, for the event hub.
    case eventLog(after: Int64)

    var isEventLog: Bool {
        if case .eventLog = self { return true }
        return false
    }
}

extension Result<PostgresRows, PostgresError> {
    fileprivate var failure: PostgresError? {
        if case .failure(let error) = self { return error }
        return nil
    }

    /// Whether it failed because the connection was lost.
    fileprivate var isConnectionLoss: Bool {
        if case .failure(let error) = self { return error.isConnectionLoss }
        return false
    }
}
