import CoreMetrics
import Logging
import NIOConcurrencyHelpers
import ReceiptsStore
import Tracing

/// For each read of the log, fan out: the events go into the feeds, JSON-encoded once, and
/// to the subscribers they concern.
extension EventHub {
    /// Takes a read of the log into the feeds. The events before the first unread.changed that
    /// needs its user's totals go out at once, the rest once those are read: a sender's
    /// receipt.read does not wait for the reader's totals. Each part is taken as a read of its
    /// own, with the page's snapshot (the cursor looks at ids in order either way). A part
    /// that cannot be taken (its totals cannot be read) leaves the rest to a later read.
    func take(_ read: EventLogRead) async {
        guard let span = Self.relaySpan(of: read.page.events) else { return await self.fanOut(read) }
        await self.fanOut(read)
        span.end()
    }

    /// The span of relaying a read that holds events of traced batches, when tracing is on:
    /// child of the first one's batch (`StoredEvent.traceParent`), linked to the others'; nil
    /// for a read of untraced events only.
    private static func relaySpan(of events: [StoredEvent]) -> (any Span)? {
        guard ReceiptsTracing.isOn else { return nil }
        var seen = Set<String>()
        let traces = events.compactMap(\.traceParent).filter { seen.insert($0).inserted }
        guard let first = traces.first else { return nil }
        let span = InstrumentationSystem.tracer.startSpan(
            "receipts.relay", context: ReceiptsTracing.context(continuing: first), ofKind: .internal)
        for other in traces.dropFirst() { span.addLink(SpanLink(context: ReceiptsTracing.context(continuing: other), attributes: [:])) }
        span.attributes["receipts.events"] = events.count
        return span
    }

    /// `take`'s work: the events into the feeds, in parts (see `take`).
    private func fanOut(_ read: EventLogRead) async {
        let events = read.page.events
        let split = self.log.withMirror { fanOut, _ in
            UnreadTotalsOfPage.firstNeedingTotals(in: events, isStreamed: fanOut.isStreamed(_:user:))
        }
        guard let split, split > 0 else {
            _ = await self.append(read)
            return
        }
        // Stopped before the first part's end (at a gap): the rest waits for the next read.
        guard let reached = await self.append(read.part(0..<split, after: read.after)), reached == events[split - 1].id else { return }
        _ = await self.append(read.part(split..<events.count, after: reached))
    }

    /// Takes a part of a read into the feeds (`take`): JSON-encoded once, outside the lock,
    /// for the tenants that have streams, each `unread.changed` that a stream sees with its
    /// user's totals, read first (`UnreadTotalsOfPage`); then the subscribers it concerns are
    /// handed their events or woken.
    ///
    /// - Returns: where the reader stands after it; nil when nothing was taken.
    private func append(_ read: EventLogRead) async -> Int64? {
        let page = read.page
        var totals = UnreadTotalsOfPage()
        var encoded: [Int64: LiveEvent] = [:]
        for attempt in 1...3 {
            let (streamed, missing) = self.log.withMirror { fanOut, _ in
                (Set(page.events.lazy.map(\.tenantId).filter(fanOut.isStreamed)),
                 totals.missing(in: page.events, isStreamed: fanOut.isStreamed(_:user:)))
            }
            do {
                try await totals.read(missing, from: self.store)
            } catch {
                self.logger.error("reading unread totals for live events failed", metadata: ["error": "\(error)"])
                return nil
            }
            for event in page.events where streamed.contains(event.tenantId) && encoded[event.id]?.hasTotals != true {
                encoded[event.id] = LiveEvent(event, history: read.history, totals: totals[event])
            }
            var deliveries = LiveDeliveries()
            // Taken and handed to the event loops as one step (`appendOrder`): a live
            // subscriber's events reach its event loop in order, ahead of its close.
            let taking = self.appendOrder.withLock {
                let taking = self.log.take(read) { fanOut in
                    // A stream that came meanwhile and sees a user whose totals were not read:
                    // read them too, before anything is appended (at most twice more).
                    attempt == 3 || totals.missing(in: page.events, isStreamed: fanOut.isStreamed(_:user:)).isEmpty
                } append: { fanOut, accepted, standing -> (wakes: [EventFanOut.Wake], position: Int64?) in
                    // Settled in the history the database went on to: the feeds serve again from
                    // where the cursor began in it.
                    let resumed = standing.isReady ? fanOut.resume(from: read.after) : []
                    let wakes = fanOut.append(accepted, encoded: encoded, history: read.history, deliveries: &deliveries)
                    return (resumed + wakes, standing.position)
                }
                deliveries.send(loopShare: self.options.fanOutLoopShare) { [weak self] subscriber, period, position in
                    self?.fellBehind(subscriber, period: period, at: position)
                }
                return taking
            }
            switch taking {
            case .declined:
                continue
            case .stale:
                return nil
            case .taken(let taken):
                self.wakeUps.perform(taken.wakes)
                if let position = taken.position {
                    self.relayedEvents.increment(by: page.events.count { $0.id <= position })
                }
                return taken.position
            }
        }
        return nil
    }
}

/// The reads of the log made right behind this process's writes, taken without a read
/// of the log (`CommittedWrites`, `ReceiptsStore.runBatches`).
extension EventHub: CommittedEventsConsumer {
    public func eventsToHandOver() -> (after: Int64, limit: Int)? {
        self.log.handOverWindow()
    }

    public func writeCommitted() {
        self.log.requestRead()
    }

    /// Takes the events right here, in the writer's task, when the reader has nothing else
    /// to do (one hop fewer: no task of the hub's is woken); else leaves them to the reader's
    /// sequence. Either way, one that does not follow on has the log read.
    public func writeCommitted(handingOver events: EventLogPage, readAfter position: Int64) async {
        guard let read = self.log.handOver(events, readAfter: position) else { return }
        await self.take(read)
        self.log.handedOver(read)
    }
}
