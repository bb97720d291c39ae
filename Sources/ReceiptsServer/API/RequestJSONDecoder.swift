import Foundation
import Hummingbird
import NIOCore
import ReceiptsJSON

/// Decodes request bodies for `request.decode(as:context:)`: reads the body up to the
/// context's limit (413 beyond it, chunked or not), refuses repeated keys (400, see
/// `JSONObjectKeys`) and members a `RequestBody` does not know (400), then decodes as
/// `JSONCoding` says.
///
/// Bodies are read here, by the handler, so never before the request is authenticated.
public struct RequestJSONDecoder: RequestDecoder {
    public init() {}

    public func decode<T: Decodable>(_ type: T.Type, from request: Request, context: some RequestContext) async throws -> T {
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
