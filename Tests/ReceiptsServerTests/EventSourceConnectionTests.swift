import Foundation
import NIOCore
import ReceiptsServer
import TestSupport
import Testing

/// `GET /v1/events` on the wire: as a connection's first request (held by NIO handlers) and
/// after other requests on a kept-alive connection (written by the request's task), the same
/// stream; and how it ends on a graceful shutdown.
@Suite("Server-Sent Events on their connection")
struct EventSourceConnectionTests {
    @Test("a stream opened after another request on a kept-alive connection carries events as one that opens its connection")
    func afterAnotherRequest() async throws {
        try await TestService.run { client in
            let tenant = try await client.createTenant()
            try await tenant.createChat("g", members: ["a", "b"])
            let first = try await RawConnection.open(port: client.port)
            let later = try await RawConnection.open(port: client.port)
            defer {
                first.close()
                later.close()
            }
            let authorization = "Authorization: Bearer \(tenant.apiKey)\r\n"
            try await first.send("GET /v1/events HTTP/1.1\r\nHost: receipts\r\n\(authorization)\r\n")
            try await later.send("GET /healthz HTTP/1.1\r\nHost: receipts\r\n\r\n")
            #expect(try await later.answer()?.status == 200)
            try await later.send("GET /v1/events HTTP/1.1\r\nHost: receipts\r\n\(authorization)\r\n")
            for connection in [first, later] {
                #expect(try await connection.waitUntilReceived(": receipts event stream"), "\(connection.pendingText)")
                #expect(connection.pendingText.lowercased().contains("content-type: text/event-stream"))
            }
            let id = try await tenant.send(in: "g", from: "a")
            for connection in [first, later] {
                #expect(try await connection.waitUntilReceived(id), "\(connection.pendingText)")
            }
        }
    }

    @Test("a refused stream that opens its connection is answered in the contract's shape, and the connection closes")
    func refusedFirstRequest() async throws {
        try await TestService.run { client in
            let connection = try await RawConnection.open(port: client.port)
            defer { connection.close() }
            try await connection.send("GET /v1/events HTTP/1.1\r\nHost: receipts\r\nAuthorization: Bearer nope\r\n\r\n")
            let answer = try #require(try await connection.answer())
            #expect(answer.status == 401)
            #expect(answer.errorCode == "unauthorized")
            #expect(try await connection.waitUntilClosed(within: .seconds(5)))
        }
    }

    @Test("on graceful shutdown a stream that opened its connection ends with the closing comment, and the connection closes")
    func shutdown() async throws {
        try await TestService.runInServiceGroup { port, apiKey, shutDown in
            let connection = try await RawConnection.open(port: port)
            defer { connection.close() }
            try await connection.send("GET /v1/events HTTP/1.1\r\nHost: receipts\r\nAuthorization: Bearer \(apiKey)\r\n\r\n")
            #expect(try await connection.waitUntilReceived(": receipts event stream"))
            await shutDown()
            #expect(try await connection.waitUntilReceived(": closed: the server is shutting down; reconnect with the last id to resume"))
            #expect(try await connection.waitUntilClosed(within: .seconds(5)))
        }
    }
}
