import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import TestSupport
import Testing

/// Events a test stream client received, in order (as JSON text).
final class ReceivedEvents: Sendable {
    private let state = NIOLockedValueBox((events: [String](), finished: false, opened: false))

    func receive(_ json: String) { self.state.withLockedValue { $0.events.append(json) } }
    func finish() { self.state.withLockedValue { $0.finished = true } }
    func markOpened() { self.state.withLockedValue { $0.opened = true } }
    var isOpenedOrFinished: Bool { self.state.withLockedValue { $0.opened || $0.finished } }

    /// The event at `index` once it arrived; nil if the stream ended or `deadline` passed.
    func event(at index: Int, before deadline: ContinuousClock.Instant) async -> String? {
        while ContinuousClock.now < deadline {
            let (event, finished) = self.state.withLockedValue { state in
                (index < state.events.count ? state.events[index] : nil, state.finished)
            }
            if let event { return event }
            if finished { return nil }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return nil
    }
}

/// A stream under test: the next events, with a generous deadline so that a missing event
/// fails the test instead of hanging it.
struct EventReader {
    let received: ReceivedEvents
    private var index = 0

    init(_ received: ReceivedEvents) { self.received = received }

    mutating func next(within limit: Duration = .seconds(10)) async -> [String: Any]? {
        guard let json = await self.received.event(at: self.index, before: .now + limit) else { return nil }
        self.index += 1
        return (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any]
    }

    /// The next `count` events.
    mutating func take(_ count: Int, within limit: Duration = .seconds(10)) async -> [[String: Any]] {
        var events: [[String: Any]] = []
        while events.count < count, let event = await self.next(within: limit) { events.append(event) }
        return events
    }
}

enum StreamClients {
    static let logger = Logger(label: "stream-client")

    /// Opens `GET /v1/stream` as a WebSocket and runs `body` once the handshake is done.
    static func withWebSocket(
        port: Int,
        credential: String,
        after: String? = nil,
        useQueryToken: Bool = false,
        _ body: (inout EventReader, _ send: @Sendable (String) async throws -> Void) async throws -> Void
    ) async throws {
        let received = ReceivedEvents()
        let outbox = AsyncStream<String>.makeStream()
        var query: [String] = []
        if let after { query.append("after=\(after)") }
        if useQueryToken { query.append("token=\(credential)") }
        var configuration = WebSocketClientConfiguration()
        if !useQueryToken { configuration.additionalHeaders = [.authorization: "Bearer \(credential)"] }
        let url = "ws://127.0.0.1:\(port)/v1/stream" + (query.isEmpty ? "" : "?" + query.joined(separator: "&"))
        let clientConfiguration = configuration
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { received.finish() }
                try await WebSocketClient.connect(url: url, configuration: clientConfiguration, logger: logger) { inbound, outbound, _ in
                    received.markOpened()
                    try await withThrowingTaskGroup(of: Void.self) { inner in
                        inner.addTask {
                            for await text in outbox.stream { try await outbound.write(.text(text)) }
                        }
                        for try await message in inbound.messages(maxSize: 1 << 24) {
                            if case .text(let text) = message { received.receive(text) }
                        }
                        inner.cancelAll()
                    }
                }
            }
            while !received.isOpenedOrFinished { try await Task.sleep(for: .milliseconds(2)) }
            var reader = EventReader(received)
            try await body(&reader) { outbox.continuation.yield($0) }
            outbox.continuation.finish()
            group.cancelAll()
        }
    }

    /// Opens `GET /v1/events` (Server-Sent Events) and runs `body` once the headers arrived.
    /// `body` also gets each event's SSE `id:` line, in `"sseId"`.
    static func withEventSource(
        port: Int,
        credential: String,
        lastEventID: String? = nil,
        _ body: (inout EventReader) async throws -> Void
    ) async throws {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/events")
        request.headers.add(name: "Authorization", value: "Bearer \(credential)")
        if let lastEventID { request.headers.add(name: "Last-Event-ID", value: lastEventID) }
        // A client of its own, shut down at the end: that aborts the endless response.
        let httpClient = HTTPClient(eventLoopGroupProvider: .singleton)
        let response: HTTPClientResponse
        do {
            response = try await httpClient.execute(request, timeout: .seconds(60))
        } catch {
            try await httpClient.shutdown()
            throw error
        }
        try #require(response.status == .ok)
        #expect(response.headers.first(name: "content-type") == "text/event-stream")
        let received = ReceivedEvents()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { received.finish() }
                var pending = ""
                var id: String?
                for try await buffer in response.body {
                    pending += String(buffer: buffer)
                    while let newline = pending.firstIndex(of: "\n") {
                        let line = String(pending[..<newline])
                        pending = String(pending[pending.index(after: newline)...])
                        if line.hasPrefix("id: ") { id = String(line.dropFirst(4)) }
                        if line.hasPrefix("data: "), var object = (try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8))) as? [String: Any] {
                            object["sseId"] = id
                            let data = try JSONSerialization.data(withJSONObject: object)
                            received.receive(String(decoding: data, as: UTF8.self))
                        }
                    }
                }
            }
            var reader = EventReader(received)
            try await body(&reader)
            try await httpClient.shutdown()
            group.cancelAll()
        }
    }
}
