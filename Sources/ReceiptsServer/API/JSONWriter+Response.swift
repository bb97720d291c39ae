import Hummingbird
import NIOCore
import ReceiptsJSON

extension JSONWriter {
    /// The written JSON as a 200 answer (`EditedResponse` changes the status where needed).
    var response: Response {
        Response(status: .ok, headers: [.contentType: "application/json; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(bytes: self.bytes)))
    }
}
