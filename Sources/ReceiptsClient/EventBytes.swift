import OpenAPIRuntime

/// The bytes of an event stream, failing when an event (the bytes since the last blank
/// line) grows past a bound: the runtime's SSE decoder buffers a line and an event until
/// they end, so a stream that never ends one must not make it buffer forever.
struct EventBytes: AsyncSequence, Sendable {
    typealias Element = ArraySlice<UInt8>
    let upstream: HTTPBody
    let maximumEventBytes: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        var upstream: HTTPBody.AsyncIterator
        let maximumEventBytes: Int
        var bytesInEvent = 0
        var previousWasNewline = false

        mutating func next() async throws -> ArraySlice<UInt8>? {
            guard let chunk = try await upstream.next() else { return nil }
            for byte in chunk {
                if byte == UInt8(ascii: "\n") {
                    if previousWasNewline { bytesInEvent = 0 }
                    previousWasNewline = true
                } else if byte != UInt8(ascii: "\r") {
                    previousWasNewline = false
                }
                bytesInEvent += 1
                if bytesInEvent > maximumEventBytes {
                    throw ReceiptsError(status: 0, code: .responseTooLarge, message: "an event of the stream is over \(maximumEventBytes) bytes")
                }
            }
            return chunk
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(upstream: upstream.makeAsyncIterator(), maximumEventBytes: maximumEventBytes)
    }
}
