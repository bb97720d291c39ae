import Foundation
import Hummingbird
import NIOCore
import ReceiptsJSON

/// Decodes request bodies for `request.decode(as:context:)`: refuses a body declared as
/// something other than JSON (415, see `JSONMediaType`), reads the body up to the
/// context's limit (413 beyond it, chunked or not), refuses repeated keys (400, see
/// `JSONObjectKeys`) and members a `RequestBody` does not know (400), then decodes as
/// `JSONCoding` says.
///
/// Bodies are read here, by the handler, so never before the request is authenticated.
public struct RequestJSONDecoder: RequestDecoder {
    public init() {}

    public func decode<T: Decodable>(_ type: T.Type, from request: Request, context: some RequestContext) async throws -> T {
        if let declared = request.headers[.contentType] { try JSONMediaType.require(declared) }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: context.maxUploadSize)
        } catch is NIOTooManyBytesError {
            throw RequestBodyLimit.exceeded
        }
        return try body.withUnsafeReadableBytes { bytes in
            let members = try JSONObjectKeys.requireUnique(in: bytes)
            if let body = T.self as? any RequestBody.Type { try body.requireKnown(members: members) }
            return try JSONCoding.makeDecoder().decode(T.self, from: Data(bytes))
        }
    }
}

/// Which `Content-Type` a JSON body may declare: `application/json`, or a structured
/// `…+json` type, with any parameters (`charset=utf-8`). A body declared as anything else
/// (`text/plain`, form data) is 415 `unsupported_media_type`, whatever it holds; a body that
/// declares no type is read as JSON.
enum JSONMediaType {
    static func require(_ declared: String) throws(APIError) {
        guard !self.isJSON(declared) else { return }
        let type = declared.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces).prefix(100)
        throw APIError(
            .unsupportedMediaType, .unsupportedMediaType,
            "the request body must be JSON (Content-Type: application/json), not \(type.isEmpty ? "an empty type" : String(type))")
    }

    static func isJSON(_ declared: String) -> Bool {
        let type = declared.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces).lowercased()
        return type == "application/json" || (type.hasPrefix("application/") && type.hasSuffix("+json"))
    }
}
