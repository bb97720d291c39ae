import Foundation
import HTTPTypes
import OpenAPIRuntime

/// Read-your-writes through read replicas (docs/api.md, "Read-your-writes: the consistency
/// token"): keeps the `Receipts-Consistency-Token` of every 2xx answer to a write, and sends
/// the one held with the reads a standby may serve, so that those are never answered from
/// data older than the client's last write.
///
/// Every attempt passes through it (it sits inside `RetryMiddleware`), so a read repeated
/// after a 503 sends the newest token held by then. A token a caller set on the request
/// itself (through `generated`) is left as it is.
struct ConsistencyTokenMiddleware: ClientMiddleware {
    let tokens: ConsistencyTokenBox

    /// The reads a standby may serve, by `operationId`: the only ones that take the token.
    static let replicaReads: Set<String> = [
        Operations.GetUnread.id, Operations.GetChat.id, Operations.ListMessages.id, Operations.GetMessage.id,
    ]

    /// The methods whose 2xx answers carry a token.
    static let writeMethods: Set<HTTPRequest.Method> = [.post, .put, .patch, .delete]

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        if request.method == .get, Self.replicaReads.contains(operationID), request.headerFields[.receiptsConsistencyToken] == nil,
            let token = self.tokens.current
        {
            request.headerFields[.receiptsConsistencyToken] = token
        }
        let (response, responseBody) = try await next(request, body, baseURL)
        if Self.writeMethods.contains(request.method), response.status.kind == .successful,
            let token = response.headerFields[.receiptsConsistencyToken], !token.isEmpty
        {
            self.tokens.replace(with: token)
        }
        return (response, responseBody)
    }
}

extension HTTPField.Name {
    /// A write's position, answered by the service and sent back with reads (docs/api.md).
    static let receiptsConsistencyToken = Self("Receipts-Consistency-Token")!
}
