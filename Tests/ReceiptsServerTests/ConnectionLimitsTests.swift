import Foundation
import HTTPTypes
import ReceiptsServer
import Testing

/// README, "Limits, timeouts and faults": slow and broken clients, on the socket. The
/// service runs in-process with short timeouts (`receiptsd`'s own, 10 s and 60 s, are
/// checked in `ReceiptsdConnectionTests`).
@Suite("Connection limits")
struct ConnectionLimitsTests {
    static let headTimeout = Duration.seconds(1)
    static let idleTimeout = Duration.seconds(3)

    static func run(_ body: @Sendable (APIClient) async throws -> Void) async throws {
        try await TestService.run(configure: { configuration in
            configuration.requestHeadTimeout = Self.headTimeout
            configuration.idleConnectionTimeout = Self.idleTimeout
        }, body)
    }

    @Test("a half-sent request head is closed after the head timeout, while other connections answer at once")
    func halfSentHead() async throws {
        try await Self.run { client in
            // Taken before connecting: the server's timer starts when it accepts, which may be
            // before the client's connect returns.
            let opened = ContinuousClock.now
            let stuck = try await RawConnection.open(port: client.port)
            try await stuck.send("GET /healthz HTTP/1.1\r\nHost: receipts\r\n")
            // Others are served meanwhile, each well within the head timeout (a loaded CI run
            // took one 640 ms: the bound leaves room for that, not for waiting on the stuck one).
            while ContinuousClock.now - opened < .milliseconds(500) {
                let asked = ContinuousClock.now
                #expect(try await client.request(.get, "/healthz", as: nil).status == .ok)
                #expect(ContinuousClock.now - asked < .milliseconds(900))
            }
            #expect(!stuck.isClosed, "closed before the head timeout")
            #expect(try await stuck.waitUntilClosed(within: .seconds(3)), "a half-sent head still open 3.7 s on")
            #expect(ContinuousClock.now - opened >= Self.headTimeout)
            #expect(stuck.pendingText.isEmpty, "answered \(stuck.pendingText)")
        }
    }

    @Test("a head sent a byte at a time is timed from its first byte, also after a request on the same connection")
    func slowHeadAfterRequest() async throws {
        try await Self.run { client in
            let connection = try await RawConnection.open(port: client.port)
            try await connection.send("GET /healthz HTTP/1.1\r\nHost: receipts\r\n\r\n")
            #expect(try await connection.answer()?.status == 200)
            let started = ContinuousClock.now
            // Trickled, a byte every 100 ms: every read is activity, but the head never ends.
            for byte in "GET /healthz HTTP/1.1\r\nHost: receipts\r\nX-Slow: yes\r\n".utf8 {
                if connection.isClosed { break }
                try? await connection.send(String(UnicodeScalar(byte)))
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(try await connection.waitUntilClosed(within: .seconds(1)))
            let closedAfter = ContinuousClock.now - started
            // The head timeout (1 s), not the idle one (3 s).
            #expect(closedAfter < .milliseconds(2500), "closed after \(closedAfter)")
        }
    }

    @Test("an idle keep-alive connection stays open past the head timeout and closes after the idle timeout")
    func idleKeepAlive() async throws {
        try await Self.run { client in
            let connection = try await RawConnection.open(port: client.port)
            try await connection.send("GET /healthz HTTP/1.1\r\nHost: receipts\r\n\r\n")
            #expect(try await connection.answer()?.status == 200)
            let answered = ContinuousClock.now
            try await Task.sleep(for: .milliseconds(1500))
            #expect(!connection.isClosed, "idle connection closed after 1.5 s")
            // Still usable.
            try await connection.send("GET /healthz HTTP/1.1\r\nHost: receipts\r\n\r\n")
            #expect(try await connection.answer()?.status == 200)
            #expect(try await connection.waitUntilClosed(within: .seconds(5)))
            let closedAfter = ContinuousClock.now - answered
            #expect(closedAfter >= Self.idleTimeout, "closed after \(closedAfter)")
            #expect(closedAfter < Self.idleTimeout + .milliseconds(1500) + .seconds(2), "closed after \(closedAfter)")
        }
    }

    @Test("a request asking to close is answered with Connection: close, then closed at once")
    func requestAsksClose() async throws {
        try await Self.run { client in
            for request in ["GET /healthz HTTP/1.1\r\nHost: receipts\r\nConnection: close\r\n\r\n", "GET /healthz HTTP/1.0\r\n\r\n"] {
                let connection = try await RawConnection.open(port: client.port)
                try await connection.send(request)
                let answer = try await connection.answer()
                #expect(answer?.status == 200)
                #expect(answer?.header("connection")?.lowercased() == "close", "\(request.debugDescription)")
                #expect(try await connection.waitUntilClosed(within: .milliseconds(500)), "\(request.debugDescription)")
            }
        }
    }

    @Test("streams outlive the idle timeout: an SSE response and an upgraded WebSocket")
    func streamsAreNotTimed() async throws {
        try await Self.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let sse = try await RawConnection.open(port: client.port)
            try await sse.send("GET /v1/events HTTP/1.1\r\nHost: receipts\r\nAuthorization: Bearer \(tenant.apiKey)\r\n\r\n")
            try await StreamClients.withWebSocket(port: client.port, credential: tenant.apiKey) { stream, _ in
                try await Task.sleep(for: Self.idleTimeout + .seconds(1))
                #expect(!sse.isClosed, "an SSE stream was closed by the idle timeout")
                // On a new connection: the test client's own has been idle too long by now.
                let writer = try await RawConnection.open(port: client.port)
                defer { writer.close() }
                let body = #"{"senderId":"a","text":"still there?"}"#
                try await writer.send(
                    "POST /v1/chats/g/messages HTTP/1.1\r\nHost: receipts\r\nAuthorization: Bearer \(tenant.apiKey)\r\n"
                        + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
                )
                #expect(try await writer.answer()?.status == 201)
                #expect((await stream.next())?["type"] as? String == "message.created", "the WebSocket no longer delivers")
            }
            #expect(try await sse.waitUntilReceived("message.created"), "the SSE stream no longer delivers")
            sse.close()
        }
    }

    @Test("a header line without a colon is answered 400 in the contract's shape, and the connection closed")
    func headerLineWithoutColon() async throws {
        try await Self.run { client in
            // First request of a connection (the WebSocket upgrader reads it) and a later one.
            for earlier in ["", "GET /healthz HTTP/1.1\r\nHost: receipts\r\n\r\n"] {
                let connection = try await RawConnection.open(port: client.port)
                try await connection.send(earlier)
                if !earlier.isEmpty { #expect(try await connection.answer()?.status == 200) }
                try await connection.send("GET /v1/chats/x HTTP/1.1\r\nHost: receipts\r\nAuthorization Bearer rk_nothing\r\n\r\n")
                let answer = try await connection.answer()
                #expect(answer?.status == 400)
                #expect(answer?.errorCode == "invalid_request", "\(answer?.body ?? "no answer")")
                #expect(answer?.header("connection")?.lowercased() == "close")
                #expect(try await connection.waitUntilClosed(within: .seconds(2)))
            }
        }
    }

    @Test("a request line that is not HTTP is answered 400 and the connection closed")
    func notHTTP() async throws {
        try await Self.run { client in
            for garbage in ["HELLO\r\n\r\n", "SSH-2.0-OpenSSH_9.6\r\n", "GET / FTP/1.0\r\n\r\n", "\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}\u{00}\u{01}\u{fc}\u{03}\u{03}"] {
                let connection = try await RawConnection.open(port: client.port)
                try await connection.send(garbage)
                let answer = try await connection.answer()
                #expect(answer?.status == 400, "\(garbage.debugDescription): \(connection.pendingText)")
                #expect(try await connection.waitUntilClosed(within: .seconds(2)), "\(garbage.debugDescription)")
            }
            // The service carries on.
            #expect(try await client.request(.get, "/healthz", as: nil).status == .ok)
        }
    }
}
