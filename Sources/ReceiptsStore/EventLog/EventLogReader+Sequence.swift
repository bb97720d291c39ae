import CoreMetrics
import NIOConcurrencyHelpers

/// The reads of the log, in order, as one sequence: it waits for a request, yields what writes
/// handed over, and reads the log whenever asked (requests coalesce into one), or when a
/// handover did not follow on from where the reader stands; again after a short pause while
/// the cursor waits for running transactions (a rollback sends no notification), or the
/// database cannot be reached. The pause starts at 1 ms and grows only while nothing moves
/// (to 20 ms; 1 s while the log cannot be read).
extension EventLogReader {
    public func makeAsyncIterator() -> Iterator {
        Iterator(reader: self, wakes: self.wakes.makeAsyncIterator())
    }

    public struct Iterator: AsyncIteratorProtocol {
        enum Phase {
            /// Nothing asked: wait for a request.
            case idle
            /// Yielding what writes handed over, then reading when asked.
            case handingOver
            /// Reading the log until it is up to date.
            case reading
        }

        /// The read yielded last, and where the cursor stood before it.
        enum Yielded {
            case handover(EventLogRead)
            case read(EventLogRead, before: Int64?)
        }

        let reader: EventLogReader
        var wakes: AsyncStream<Void>.Iterator
        var phase = Phase.idle
        var handovers: ArraySlice<EventLogRead> = []
        var mustRead = false
        var pause = Duration.milliseconds(1)
        var yielded: Yielded?

        public mutating func next() async -> EventLogRead? {
            if let yielded = self.yielded {
                self.yielded = nil
                await self.finish(yielded)
            }
            while !Task.isCancelled {
                switch self.phase {
                case .idle:
                    // Writes that commit from here on may hand over again; what was asked
                    // meanwhile has woken this iterator once more.
                    self.reader.state.withLockedValue { $0.asked.isIdle = true }
                    guard await self.wakes.next() != nil else { return nil }
                    let asked = self.reader.state.withLockedValue { state in
                        defer { state.asked = Requests(isIdle: false) }
                        return state.asked
                    }
                    (self.mustRead, self.handovers, self.pause) = (asked.read, asked.handedOver[...], .milliseconds(1))
                    self.phase = .handingOver
                case .handingOver:
                    guard let handover = self.handovers.popFirst() else {
                        self.phase = self.mustRead ? .reading : .idle
                        continue
                    }
                    if self.mustRead {
                        self.reader.handoversRead.increment()
                    } else if let taken = self.reader.alreadyPast(handover) {
                        self.counted(taken)
                    } else {
                        self.yielded = .handover(handover)
                        return handover
                    }
                case .reading:
                    let before = self.reader.standing.position
                    switch await self.reader.readStep() {
                    case .read(let read):
                        self.yielded = .read(read, before: before)
                        return read
                    case .done(let result):
                        await self.settle(result, before: before)
                    }
                }
            }
            return nil
        }

        /// After the consumer's turn with what was yielded last.
        private mutating func finish(_ yielded: Yielded) async {
            switch yielded {
            case .handover(let read):
                self.counted(self.reader.wasTakenWhole(read))
            case .read(let read, let before):
                if let result = await self.reader.afterTaking(read) { await self.settle(result, before: before) }
            }
        }

        private mutating func counted(_ taken: Bool) {
            (taken ? self.reader.handoversTaken : self.reader.handoversRead).increment()
            if !taken { self.mustRead = true }
        }

        /// A look at the log ended: wait for the next request when up to date, else pause and
        /// read again.
        private mutating func settle(_ result: EventLogReadResult, before: Int64?) async {
            if case .upToDate = result {
                self.phase = .idle
                return
            }
            if before != self.reader.standing.position { self.pause = .milliseconds(1) }
            try? await Task.sleep(for: self.pause)
            let longest: Duration = if case .failed = result { .seconds(1) } else { .milliseconds(20) }
            self.pause = Swift.min(self.pause * 2, longest)
        }
    }
}

/// The reads of the log made right behind this process's writes (`CommittedWrites`,
/// `ReceiptsStore.runBatches`), taken without a read of the log.
extension EventLogReader {
    /// Where a read of the log right behind a write should begin, and how many events it takes
    /// at most; nil while the reader would not take it (it is busy, or waits at a gap, and
    /// reads the log itself anyway).
    public func handOverWindow() -> (after: Int64, limit: Int)? {
        self.state.withLockedValue { state in
            guard state.asked.isIdle, !state.asked.read, state.asked.handedOver.isEmpty,
                let cursor = state.log.cursor, cursor.isReady, !cursor.isWaiting, state.log.history != nil
            else { return nil }
            return (cursor.position, Self.handOverLimit)
        }
    }

    /// A write committed, and a read of the log after `position` right behind it found
    /// `events`. When the reader has nothing else to do, the read is returned for the writer's
    /// task to take itself (one hop fewer): take it, then call `handedOver(_:)`. Else nil: the
    /// sequence yields it in turn (or reads the log, when too many wait).
    public func handOver(_ events: EventLogPage, readAfter position: Int64) -> EventLogRead? {
        let handling = self.state.withLockedValue { state -> HandOverHandling in
            guard let history = state.log.history else {
                state.asked.read = true
                return .queued
            }
            let read = self.newRead(events, after: position, history: history, isHandover: true, in: &state)
            if state.asked.isIdle, !state.asked.read, state.asked.handedOver.isEmpty {
                if let taken = self.alreadyPast(read, in: state) {
                    if !taken { state.asked.read = true }
                    return .counted(taken: taken)
                }
                state.asked.isIdle = false
                return .takeHere(read)
            }
            if state.asked.handedOver.count < Self.handOverBacklog {
                state.asked.handedOver.append(read)
            } else {
                state.asked.read = true
            }
            return .queued
        }
        switch handling {
        case .takeHere(let read):
            return read
        case .counted(let taken):
            (taken ? self.handoversTaken : self.handoversRead).increment()
            if !taken { self.wake.yield() }
        case .queued:
            self.wake.yield()
        }
        return nil
    }

    private enum HandOverHandling {
        case takeHere(EventLogRead)
        case counted(taken: Bool)
        case queued
    }

    /// The writer's task has had its turn with a read that `handOver(_:readAfter:)` returned.
    public func handedOver(_ read: EventLogRead) {
        let taken = self.wasTakenWhole(read)
        (taken ? self.handoversTaken : self.handoversRead).increment()
        let wake = self.state.withLockedValue { state -> Bool in
            state.asked.isIdle = true
            if !taken { state.asked.read = true }
            return state.asked.read || !state.asked.handedOver.isEmpty
        }
        if wake { self.wake.yield() }
    }

    /// Whether a handover was taken whole, and there can be no event after it that it left
    /// out (it did not fill `handOverLimit`).
    func wasTakenWhole(_ read: EventLogRead) -> Bool {
        self.state.withLockedValue { state in
            guard state.lastTaken == read.serial, let cursor = state.log.cursor else { return false }
            return cursor.position == read.page.events.last?.id ?? read.after && read.page.events.count < Self.handOverLimit
        }
    }

    /// For a handover the reader has gone past already (it read the log meanwhile): whether
    /// it counts as taken (there can be nothing after it that it left out); nil when it has not.
    func alreadyPast(_ read: EventLogRead) -> Bool? {
        self.state.withLockedValue { self.alreadyPast(read, in: $0) }
    }

    private func alreadyPast(_ read: EventLogRead, in state: State) -> Bool? {
        guard let cursor = state.log.cursor, cursor.isReady, cursor.position >= read.page.events.last?.id ?? read.after,
            state.log.isIn(read.page.history)
        else { return nil }
        return read.page.events.count < Self.handOverLimit
    }
}
