import Foundation
import ReceiptsCore
@testable import ReceiptsStore
import Testing

@Suite("A message's receipts from its chunks")
struct ReceiptChunkOrderTests {
    /// What `ReceiptChunk.inOrderOfTime` promises: one chunk with receipts as it is stored (a
    /// group of up to 32 members keeps the order of its one array, as before chunks); several
    /// by time, ties in chunk order, then in their order in the chunk.
    private static func reference(_ chunks: [[UserReceipt]]) -> [UserReceipt] {
        let filled = chunks.filter { !$0.isEmpty }
        if filled.count <= 1 { return filled.first ?? [] }
        return chunks.enumerated()
            .flatMap { chunk, receipts in receipts.enumerated().map { (chunk, $0.offset, $0.element) } }
            .sorted { ($0.2.at, $0.0, $0.1) < ($1.2.at, $1.0, $1.1) }
            .map(\.2)
    }

    @Test("merged chunks are in the order of time, ties in chunk order, whether each chunk is in order or not")
    func randomChunks() {
        var generator = SystemRandomNumberGenerator()
        let base = Date(timeIntervalSince1970: 1_795_000_000)
        for round in 0..<500 {
            let chunks = (0..<Int.random(in: 0...40, using: &generator)).map { chunk in
                var times = (0..<Int.random(in: 0...32, using: &generator)).map { _ in base + Double(Int.random(in: 0...50, using: &generator)) }
                if round % 4 != 0 { times.sort() }  // appended in the order of time, mostly
                return times.enumerated().map { UserReceipt(userId: "c\(chunk)-u\($0.offset)", at: $0.element) }
            }
            #expect(ReceiptChunk.inOrderOfTime(chunks) == Self.reference(chunks))
        }
    }
}
