import Hummingbird

/// An answer that writes its own JSON, member by member, so that every response of a kind
/// lists its members in the same, documented order: `id` first when there is one, then the
/// others as the OpenAPI document's schema lists them (`docs/api.md`, "JSON").
///
/// `JSONEncoder` on Linux writes an object's members in no fixed order (it keeps them in a
/// dictionary), so two answers of one kind could differ; its `sortedKeys` would be stable but
/// puts `apiKey` before `id` and `createdAt` before `id` and `kind`. Hence `JSONWriter`.
protocol JSONResponse: ResponseGenerator {
    /// Writes the answer's JSON object, members in the documented order.
    func write(to json: inout JSONWriter)
    /// About the size of the answer, so that its buffer rarely grows.
    var estimatedJSONBytes: Int { get }
}

extension JSONResponse {
    var estimatedJSONBytes: Int { 256 }

    /// The JSON as a 200 answer (`EditedResponse` sets another status where needed).
    func response(from request: Request, context: some RequestContext) throws -> Response {
        var json = JSONWriter(capacity: self.estimatedJSONBytes)
        self.write(to: &json)
        return json.response
    }

    /// The answer as text.
    var json: String {
        var json = JSONWriter(capacity: self.estimatedJSONBytes)
        self.write(to: &json)
        return json.text
    }
}
