import CoreMetrics
import Logging
import NIOConcurrencyHelpers

/// A look at the log, step by step: the sequence and `read(taking:)` run the same steps.
extension EventLogReader {
    /// What a step found: a read to take, or the end of the look.
    enum Step {
        case read(EventLogRead)
        case done(EventLogReadResult)
    }

    /// Reads the log until it is up to date, waits for a running transaction, or fails,
    /// handing each read to `taking` before the next (what the sequence does between two
    /// requests; tests drive the hub with it).
    public func read(taking: (EventLogRead) async -> Void) async -> EventLogReadResult {
        while true {
            switch await self.readStep() {
            case .done(let result):
                return result
            case .read(let read):
                await taking(read)
                if let result = await self.afterTaking(read) { return result }
            }
        }
    }

    /// Finds where the reader stands when it must (the first look, or after a failover), then
    /// reads the page after its cursor.
    func readStep() async -> Step {
        do {
            if self.state.withLockedValue({ $0.log.needsStart }) {
                let newest = try await self.store.newestEvent()
                if !self.state.withLockedValue({ $0.log.isIn(newest.history) }) {
                    // The first look, or the database went on to another history meanwhile.
                    self.follow(try await self.store.eventHistory())
                    return .done(.waiting)
                }
                // Asked after that read: whatever may still commit a lower id is among these.
                let writers = try await self.store.eventWriters()
                let started = self.state.withLockedValue {
                    $0.log.start(after: newest.id, in: newest.history, writers: writers, now: .now)
                }
                guard started else { return .done(.waiting) }
            }
            let position = self.state.withLockedValue { state -> (from: Int64, history: EventHistory)? in
                guard let cursor = state.log.cursor, let history = state.log.history else { return nil }
                return (cursor.position, history)
            }
            guard let (from, history) = position else { return .done(.failed) }
            self.logReads.increment()
            let page = try await self.store.eventLog(after: from, limit: self.options.pageSize)
            if page.history != history.currentId {
                // A failover (or a restore): the ids of this page are of another history.
                self.follow(try await self.store.eventHistory())
                return .done(.waiting)
            }
            return .read(self.state.withLockedValue { self.newRead(page, after: from, history: history, isHandover: false, in: &$0) })
        } catch {
            self.failed(error)
            return .done(.failed)
        }
    }

    /// After the consumer's turn with `read`: asks which transactions a gap waits for, ends an
    /// overdue wait, and says whether to read on.
    ///
    /// - Returns: nil to read the next page at once; else how the look ended.
    func afterTaking(_ read: EventLogRead) async -> EventLogReadResult? {
        // Not taken: the consumer could not (its own reads failed), or another read moved on.
        guard let cursor = self.state.withLockedValue({ $0.lastTaken == read.serial ? $0.log.cursor : nil }) else { return .failed }
        do {
            var writers: EventWriters?
            if cursor.needsRunningTransactions {
                // Asked after the read: whatever may still fill the gap is among these.
                let found = try await self.store.eventWriters()
                if !found.hasWriterWithoutTransaction {
                    self.state.withLockedValue { $0.log.waitForGap(on: found.transactions) }
                }
                writers = found
            }
            self.stallWatch.observe(gap: cursor.gapStart, writers: writers)
            if cursor.isWaiting {
                return await self.abandonOverdueWait() ? nil : .waiting
            }
            return read.page.events.count < self.options.pageSize ? .upToDate : nil
        } catch {
            self.failed(error)
            return .failed
        }
    }

    /// Ends a wait at a missing event id that has lasted `Options.abandonGapsAfter`
    /// (`EventLogFollower.overdueWait(at:)`): abandons the missing ids up to the newest id seen
    /// (`ReceiptsStore.abandonEventIds`), which the cursor steps over in its next read. A call
    /// that fails (a writer ran its commit-time check early and holds the lock: see
    /// sql/functions/events.sql) leaves the cursor waiting, as before; the next attempt comes
    /// after another deadline, as after an abandonment that did not end the wait.
    ///
    /// - Returns: whether ids were abandoned (then read again at once).
    private func abandonOverdueWait() async -> Bool {
        guard let due = self.state.withLockedValue({ $0.log.overdueWait(at: .now) }) else { return false }
        do {
            let abandoned = try await self.store.abandonEventIds(through: due.target)
            self.state.withLockedValue { $0.log.abandoned(through: abandoned.horizon, transaction: abandoned.transaction) }
            self.stallWatch.abandoned(at: due.gap, through: abandoned.horizon, waited: due.waited)
            return true
        } catch {
            self.logger.warning("abandoning missing event ids failed: live events keep waiting", metadata: ["error": "\(error)"])
            return false
        }
    }

    private func failed(_ error: any Error) {
        // Before the first successful read, migrations may still be running (serve applies
        // them while services start): that is expected, and retried.
        let level: Logger.Level = self.state.withLockedValue { $0.log.needsStart } ? .debug : .error
        self.logger.log(level: level, "reading the event log failed", metadata: ["error": "\(error)"])
    }
}

/// Where the reader stands, for whoever starts from it (a stream, a webhook).
extension EventLogReader {
    /// How long a start waits for the reader to be ready: longer than the reader waits at
    /// start for a transaction that may still commit a lower id.
    var readyWait: Duration { Swift.max(.seconds(10), self.options.abandonGapsAfter + .seconds(2)) }

    /// The cursor's position once the reader has settled where it stands in the log (every
    /// event up to it has committed, or never will), and the histories it is of; throws
    /// `EventLogNotReady` when it has not within the deadline.
    public func readyPosition() async throws -> (position: Int64, history: EventHistory) {
        let deadline = ContinuousClock.now + self.readyWait
        while true {
            if let ready = self.standing.ready { return ready }
            guard ContinuousClock.now < deadline else { throw EventLogNotReady() }
            self.requestRead()
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// `readyPosition()`, and where the tenant's log stands, read in the same event history:
    /// when the database has gone on to another one (a failover) that the reader has not
    /// followed yet, it waits until it has.
    public func readyLogPosition(tenant: String) async throws -> (position: Int64, history: EventHistory, log: EventLogPosition) {
        let deadline = ContinuousClock.now + self.readyWait
        while true {
            let (current, history) = try await self.readyPosition()
            let log = try await self.store.eventLogPosition(tenant: tenant)
            if log.history == history.currentId { return (current, history, log) }
            guard ContinuousClock.now < deadline else { throw EventLogNotReady() }
            self.requestRead()
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Records the cursor's position in the database about once a second
    /// (`ReceiptsStore.settleEventHistory`): where a history that begins after a failover starts
    /// checking what it kept, so that positions from just before it still resume. Runs until
    /// its task is cancelled.
    public func settleHistory() async {
        var settled: (history: String, position: Int64)?
        while !Task.isCancelled {
            try? await Task.sleep(for: self.options.historySettleInterval)
            guard let ready = self.standing.ready else { continue }
            let current = (history: ready.history.currentId, position: ready.position)
            guard settled.map({ $0 != current }) ?? true else { continue }
            do {
                if try await self.store.settleEventHistory(current.history, through: current.position) {
                    settled = current
                } else {
                    // The database went on to another history (a failover, with no write since
                    // to make the reader look): look now.
                    self.requestRead()
                }
            } catch {
                self.logger.debug("recording the event log reader's position failed", metadata: ["error": "\(error)"])
            }
        }
    }
}
