import Foundation
import ReceiptsCore
@testable import ReceiptsServer
import Testing

@Suite("Generated message ids")
struct GeneratedIDTests {
    @Test("a generated id is a lowercase version 4 UUID that is a valid id")
    func shape() throws {
        let id = GeneratedID.message()
        #expect(id.wholeMatch(of: /[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}/) != nil, "\(id)")
        #expect(Identifier.isValid(id))
        #expect(UUID(uuidString: id) != nil)
    }

    @Test("ten thousand generated ids are all different")
    func unique() {
        let ids = (0..<10_000).map { _ in GeneratedID.message() }
        #expect(Set(ids).count == ids.count)
    }
}
