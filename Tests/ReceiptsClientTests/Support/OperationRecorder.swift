import Foundation
import HTTPTypes
import OpenAPIRuntime
import Synchronization

/// A middleware that writes down every request the client sends (each attempt), by
/// operation id: what a test checks to know which operations ran and how often.
final class OperationRecorder: ClientMiddleware, Sendable {
    private let recorded = Mutex<[String]>([])

    var operations: [String] { recorded.withLock { $0 } }

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        recorded.withLock { $0.append(operationID) }
        return try await next(request, body, baseURL)
    }
}

/// The `operationId`s of openapi.yaml, read from its text.
enum ContractOperations {
    static let document = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/ReceiptsServer/Resources/openapi.yaml")

    static func all() throws -> Set<String> {
        let text = try String(contentsOf: document, encoding: .utf8)
        return Set(text.split(separator: "\n").compactMap { line -> String? in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("operationId:") else { return nil }
            return trimmed.dropFirst("operationId:".count).trimmingCharacters(in: .whitespaces)
        })
    }
}
