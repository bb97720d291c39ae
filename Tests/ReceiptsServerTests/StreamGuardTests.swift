import AsyncHTTPClient
import Foundation
import HTTPTypes
import HummingbirdWSClient
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import Postgres
import ReceiptsServer
import ServiceLifecycle
import TestSupport
import Testing

/// The limits streams live under (README, "Limits, timeouts and faults"): refusals before
/// the upgrade in the contract's shape, the stream caps, the frame size, and streams that end
/// with their credential.
@Suite("Stream guards")
struct StreamGuardTests {
    @Test("a WebSocket upgrade without a valid credential is 401 with the error JSON, as SSE is; ?token= takes no API key")
    func upgradeRefusedWithJSON() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let token = try await tenant.token(for: "a")
            for (path, credential) in [
                ("/v1/stream", nil), ("/v1/stream?token=nope", nil), ("/v1/stream", "nope"),
                ("/v1/stream?token=\(tenant.apiKey)", nil),
            ] as [(String, String?)] {
                let answer = try await RawUpgrade.open(port: client.port, path: path, credential: credential)
                #expect(answer.status == 401, "\(path): \(answer.head)")
                #expect(answer.errorCode == "unauthorized", "\(path): \(answer.body)")
                #expect(answer.head.lowercased().contains("content-type: application/json"))
                await answer.close()
            }
            let sse = try await client.request(.get, "/v1/events?token=\(tenant.apiKey)", as: nil)
            #expect(sse.status == .unauthorized)
            #expect(sse.errorCode == "unauthorized")
            // The same key in the header, and a user token in the URL, still open streams.
            let byHeader = try await RawUpgrade.open(port: client.port, path: "/v1/stream", credential: tenant.apiKey)
            #expect(byHeader.status == 101)
            await byHeader.close()
            let byToken = try await RawUpgrade.open(port: client.port, path: "/v1/stream?token=\(token)")
            #expect(byToken.status == 101)
            await byToken.close()
        }
    }

    @Test("the 21st stream of one user is 429 rate_limited, WebSocket and SSE alike; closing one lets a new one in")
    func streamCapPerUser() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let token = try await tenant.token(for: "a")
            var open: [RawUpgrade] = []
            for index in 0..<20 {
                let stream = try await RawUpgrade.open(port: client.port, path: "/v1/stream", credential: token)
                #expect(stream.status == 101, "stream \(index): \(stream.head)")
                open.append(stream)
            }
            let refused = try await RawUpgrade.open(port: client.port, path: "/v1/stream", credential: token)
            #expect(refused.status == 429)
            #expect(refused.errorCode == "rate_limited")
            await refused.close()
            let refusedEvents = try await client.request(.get, "/v1/events", as: token)
            #expect(refusedEvents.status == .tooManyRequests)
            #expect(refusedEvents.errorCode == "rate_limited")
            // Another user of the tenant, and the tenant key, are not held back by this user's streams.
            let other = try await RawUpgrade.open(port: client.port, path: "/v1/stream", credential: try await tenant.token(for: "b"))
            #expect(other.status == 101)
            await other.close()

            await open.removeLast().close()
            var reopened: RawUpgrade?
            let deadline = ContinuousClock.now + .seconds(5)
            while reopened == nil, ContinuousClock.now < deadline {
                let attempt = try await RawUpgrade.open(port: client.port, path: "/v1/stream", credential: token)
                if attempt.status == 101 { reopened = attempt } else { await attempt.close() }
            }
            #expect(reopened != nil, "no new stream after one was closed")
            await reopened?.close()
            for stream in open { await stream.close() }
        }
    }

    @Test("an SSE client that closes its connection gives its place back at once: with 20 open and one closed, the 21st opens within a second")
    func eventSourceCapFreedOnClose() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            let token = try await tenant.token(for: "a")
            var open: [RawEventSource] = []
            for index in 0..<20 {
                let stream = try await RawEventSource.open(port: client.port, credential: token)
                #expect(stream.status == 200, "stream \(index): \(stream.head)")
                open.append(stream)
            }
            let refused = try await RawEventSource.open(port: client.port, credential: token)
            #expect(refused.status == 429)
            await refused.close()

            // The client closes its side; no event or heartbeat is due for 15 s.
            await open.removeLast().close()
            let closed = ContinuousClock.now
            var reopened: RawEventSource?
            while reopened == nil, ContinuousClock.now - closed < .seconds(5) {
                let attempt = try await RawEventSource.open(port: client.port, credential: token)
                if attempt.status == 200 {
                    reopened = attempt
                } else {
                    #expect(attempt.status == 429, "\(attempt.head)")
                    await attempt.close()
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            let took = ContinuousClock.now - closed
            print("SSE cap: the 21st stream opened \(took) after one of 20 was closed")
            #expect(reopened != nil, "no new stream within 5 s of closing one")
            // About at once; 1 s for a loaded machine.
            #expect(took < .seconds(1), "the place came back after \(took)")
            await reopened?.close()
            for stream in open { await stream.close() }
        }
    }

    @Test("a stream of a tenant key that an operator replaces in the database (not through this service) closes within the re-check interval")
    func replacedKeyEndsStream() async throws {
        try await TestService.run(configure: { $0.streamCredentialCheckInterval = .seconds(1) }) { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let replaced = NIOLockedValueBox<ContinuousClock.Instant?>(nil)
            let webSocketOpened = NIOLockedValueBox(false)
            // The close frame and when it came (not when the SSE part below is done with).
            async let webSocket = {
                let frame = try await WebSocketProbe.closeFrame(port: client.port, credential: tenant.apiKey, within: .seconds(20)) { _, received in
                    webSocketOpened.withLockedValue { $0 = true }
                    _ = await received.event(at: 0, before: .now + .seconds(10))
                }
                return (frame: frame, at: ContinuousClock.now)
            }()
            var sseEnded: Duration?
            try await StreamClients.withEventSource(port: client.port, credential: tenant.apiKey) { stream in
                // Both streams open before the message, so both see it.
                let openBy = ContinuousClock.now + .seconds(10)
                while !webSocketOpened.withLockedValue({ $0 }), ContinuousClock.now < openBy { try await Task.sleep(for: .milliseconds(10)) }
                let id = try await tenant.send(in: "g", from: "b")
                #expect((await stream.next())?["messageIds"] as? [String] == [id])
                // As `UPDATE receipts.api_keys SET key_hash = …` in psql (no notification: the
                // streams' periodic check finds it).
                try await TestDatabase.pool.query(
                    "UPDATE receipts.api_keys SET key_hash = sha256(convert_to($2, 'UTF8')) WHERE tenant_id = $1",
                    [tenant.id, "rk_replaced_\(tenant.id)"])
                let at = ContinuousClock.now
                replaced.withLockedValue { $0 = at }
                #expect(await stream.next(within: .seconds(15)) == nil)
                sseEnded = ContinuousClock.now - at
            }
            let (frame, closedAt) = try await webSocket
            let webSocketEnded = replaced.withLockedValue { $0 }.map { closedAt - $0 }
            print("replaced key: SSE ended \(sseEnded.map { "\($0)" } ?? "never"), WebSocket closed \(webSocketEnded.map { "\($0)" } ?? "?") after")
            #expect(frame?.closeCode == .policyViolation)
            // The re-check interval (1 s here) and the directory's reload, plus 1 s for a loaded machine.
            #expect(sseEnded.map { $0 < .seconds(3) } == true, "the SSE stream ended \(String(describing: sseEnded)) after the key was replaced")
            #expect(webSocketEnded.map { $0 < .seconds(3) } == true, "the WebSocket closed \(String(describing: webSocketEnded)) after the key was replaced")
        }
    }

    @Test("the tenant cap counts the key's and the users' streams together")
    func streamCapPerTenant() async throws {
        try await TestService.run(configure: { $0.maximumStreamsPerTenant = 3 }) { client in
            let tenant = try await client.createTenant()
            let other = try await client.createTenant(name: "other")
            var open: [RawUpgrade] = []
            for credential in [tenant.apiKey, try await tenant.token(for: "a"), try await tenant.token(for: "b")] {
                let stream = try await RawUpgrade.open(port: client.port, path: "/v1/stream", credential: credential)
                #expect(stream.status == 101)
                open.append(stream)
            }
            let refused = try await RawUpgrade.open(port: client.port, path: "/v1/stream", credential: try await tenant.token(for: "c"))
            #expect(refused.status == 429)
            #expect(refused.errorCode == "rate_limited")
            await refused.close()
            let sse = try await client.request(.get, "/v1/events", as: tenant.apiKey)
            #expect(sse.status == .tooManyRequests)
            // Another tenant is unaffected.
            let elsewhere = try await RawUpgrade.open(port: client.port, path: "/v1/stream", credential: other.apiKey)
            #expect(elsewhere.status == 101)
            await elsewhere.close()
            for stream in open { await stream.close() }
        }
    }

    @Test("a client frame over 64 KiB closes the WebSocket with 1009; one of 60 KiB does not")
    func frameSize() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let token = try await tenant.token(for: "a")
            let tooLarge = try await WebSocketProbe.closeFrame(port: client.port, credential: token) { outbound, _ in
                try await outbound.write(.text(String(repeating: "x", count: 65 * 1024)))
            }
            #expect(tooLarge?.closeCode == .messageTooLarge)

            try await StreamClients.withWebSocket(port: client.port, credential: token) { stream, send in
                try await send(String(repeating: "y", count: 60 * 1024))
                let id = try await tenant.send(in: "g", from: "b")
                #expect((await stream.next())?["messageIds"] as? [String] == [id])
            }
        }
    }

    @Test("a stream opened with a user token ends when the token expires: WebSocket 1008 with a reason, SSE ends")
    func tokenExpiry() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            // Long enough for the streams to open and carry one event on a busy machine (the
            // whole suite runs beside this test), short enough to wait for.
            let issued = ContinuousClock.now
            let token = try await tenant.token(for: "a", ttlSeconds: 4)
            async let webSocket = WebSocketProbe.closeFrame(port: client.port, credential: token)
            var sseEnded: Duration?
            try await StreamClients.withEventSource(port: client.port, credential: token) { stream in
                let id = try await tenant.send(in: "g", from: "b")
                #expect((await stream.next())?["messageIds"] as? [String] == [id])
                #expect(await stream.next(within: .seconds(8)) == nil)
                sseEnded = ContinuousClock.now - issued
            }
            let frame = try await webSocket
            let closedAfter = ContinuousClock.now - issued
            #expect(frame?.closeCode == .policyViolation)
            #expect(frame?.reason?.contains("expired") == true)
            #expect(closedAfter < .seconds(7))
            #expect(sseEnded.map { $0 < .seconds(7) } == true)
        }
    }

    @Test("on graceful shutdown a WebSocket closes with 1001 and the reason, never 1000")
    func shutdownClosesGoingAway() async throws {
        try await TestService.runInServiceGroup { port, apiKey, shutDown in
            let base = "http://127.0.0.1:\(port)"
            _ = try await GracefulShutdownTests.send(.PUT, base + "/v1/chats/g", as: apiKey, json: #"{"kind":"group","members":["a","b"]}"#)
            let (steps, step) = AsyncStream<Void>.makeStream()
            async let closed = WebSocketProbe.closeFrame(port: port, credential: apiKey) { _, received in
                step.yield()  // open
                _ = await received.event(at: 0, before: .now + .seconds(10))
                step.yield()  // live
            }
            var iterator = steps.makeAsyncIterator()
            await iterator.next()
            _ = try await GracefulShutdownTests.send(.POST, base + "/v1/chats/g/messages", as: apiKey, json: #"{"senderId":"a","text":"hi"}"#)
            await iterator.next()
            await shutDown()
            let frame = try await closed
            #expect(frame?.closeCode == .goingAway)
            #expect(frame?.reason == "the server is shutting down; reconnect with the last id to resume")
        }
    }
}

/// `GET /v1/events` sent over a plain TCP connection: the answer's status and head, and the
/// stream held open (cheaply) until `close()` closes the client's side.
private struct RawEventSource {
    let channel: any Channel
    let status: Int
    let head: String

    static func open(port: Int, credential: String) async throws -> RawEventSource {
        let received = RawUpgrade.ReceivedBytes()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(received) }
            }
            .connect(host: "127.0.0.1", port: port).get()
        let request = "GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAuthorization: Bearer \(credential)\r\n\r\n"
        try await channel.writeAndFlush(ByteBuffer(string: request)).get()
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let (text, closed) = received.snapshot
            if let end = text.range(of: "\r\n\r\n") {
                let head = String(text[..<end.lowerBound])
                let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                return RawEventSource(channel: channel, status: status, head: head)
            }
            if closed { break }
            try await Task.sleep(for: .milliseconds(2))
        }
        try? await channel.close()
        throw RawUpgrade.Failure(description: "no answer to GET /v1/events: \(received.snapshot.text)")
    }

    func close() async {
        try? await self.channel.close()
    }
}
