import Hummingbird
import ReceiptsJSON

/// An answer written as JSON with its members in the same, documented order on every
/// response: `id` first when there is one, then the others as the OpenAPI document's schema
/// lists them (`docs/api.md`, "JSON").
///
/// An answer is a plain `Encodable`, its properties declared in that order, and
/// `OrderedJSONEncoder` writes it (`JSONEncoder` on Linux writes an object's members in no
/// fixed order: it keeps them in a dictionary). An answer on a hot path may write itself
/// instead (`write(to:)`), where a release benchmark shows that it matters.
protocol JSONResponse: ResponseGenerator, Encodable {
    /// Writes the answer's JSON object, members in the documented order.
    func write(to json: inout JSONWriter) throws
    /// About the size of the answer, so that its buffer rarely grows.
    var estimatedJSONBytes: Int { get }
}

extension JSONResponse {
    var estimatedJSONBytes: Int { 256 }

    func write(to json: inout JSONWriter) throws {
        try json.encode(self)
    }

    /// The JSON as a 200 answer (`EditedResponse` sets another status where needed).
    func response(from request: Request, context: some RequestContext) throws -> Response {
        var json = JSONWriter(capacity: self.estimatedJSONBytes)
        try self.write(to: &json)
        return json.response
    }

    /// The answer as text.
    var json: String {
        get throws {
            var json = JSONWriter(capacity: self.estimatedJSONBytes)
            try self.write(to: &json)
            return json.text
        }
    }
}
