import Foundation
import HTTPTypes
import OpenAPIRuntime

/// Bounds what an answer may make the client buffer: the generated code collects a JSON
/// body whole before decoding it, so a body past `maximumBytes` fails with
/// `ReceiptsError.Code.responseTooLarge` instead of growing memory without end. The event
/// stream is endless by design and is bounded per event instead (`ServerSentEventLines`).
struct ResponseSizeLimitMiddleware: ClientMiddleware {
    let maximumBytes: Int
    static let unboundedOperations: Set<String> = ["eventSource"]

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let (response, responseBody) = try await next(request, body, baseURL)
        guard let responseBody, !Self.unboundedOperations.contains(operationID) else { return (response, responseBody) }
        if case .known(let length) = responseBody.length, length > maximumBytes {
            throw Self.tooLarge(maximumBytes)
        }
        let limited = ByteLimitedSequence(upstream: responseBody, maximumBytes: maximumBytes)
        return (response, HTTPBody(limited, length: responseBody.length, iterationBehavior: .single))
    }

    static func tooLarge(_ limit: Int) -> ReceiptsError {
        ReceiptsError(status: 0, code: .responseTooLarge, message: "the answer is larger than \(limit) bytes")
    }
}

/// The chunks of a body, failing once more than `maximumBytes` went through.
struct ByteLimitedSequence: AsyncSequence, Sendable {
    typealias Element = ArraySlice<UInt8>
    let upstream: HTTPBody
    let maximumBytes: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        var upstream: HTTPBody.AsyncIterator
        let maximumBytes: Int
        var seen = 0

        mutating func next() async throws -> ArraySlice<UInt8>? {
            guard let chunk = try await upstream.next() else { return nil }
            seen += chunk.count
            if seen > maximumBytes { throw ResponseSizeLimitMiddleware.tooLarge(maximumBytes) }
            return chunk
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(upstream: upstream.makeAsyncIterator(), maximumBytes: maximumBytes)
    }
}
