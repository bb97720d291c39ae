@testable import ReceiptsLive
import Testing

@Suite("Tenant round robin")
struct TenantRoundRobinTests {
    @Test("a tenant with one item waits behind one quantum of a tenant with thousands, whichever came first")
    func fewBehindOneQuantum() {
        var lines = TenantRoundRobin<String>()
        lines.append((0..<5000).map { "crowd-\($0)" }, of: "crowd")
        lines.append(["quiet-0"], of: "quiet")
        let first = lines.take(256, quantum: 32)
        #expect(first.count == 256)
        #expect(first.firstIndex(of: "quiet-0") == 32)
        #expect(lines.count == 5000 + 1 - 256)
    }

    @Test("each tenant's items come out in the order they went in, across appends and takes")
    func orderKept() {
        var generator = SystemRandomNumberGenerator()
        var lines = TenantRoundRobin<(String, Int)>()
        var counters: [String: Int] = [:]
        var seen: [String: [Int]] = [:]
        for round in 0..<300 {
            let tenant = ["a", "b", "c", "d"][round % 4 == 0 ? 0 : Int.random(in: 0...3, using: &generator)]
            let count = Int.random(in: 1...20, using: &generator)
            let start = counters[tenant, default: 0]
            lines.append((start..<start + count).map { (tenant, $0) }, of: tenant)
            counters[tenant] = start + count
            for (tenant, item) in lines.take(Int.random(in: 0...30, using: &generator), quantum: 5) { seen[tenant, default: []].append(item) }
        }
        for (tenant, item) in lines.take(lines.count, quantum: 5) { seen[tenant, default: []].append(item) }
        #expect(lines.isEmpty)
        for (tenant, count) in counters { #expect(seen[tenant] == Array(0..<count)) }
    }

    @Test("turns go round: every tenant with items gets a quantum before any gets a second")
    func turnsGoRound() {
        var lines = TenantRoundRobin<String>()
        lines.append(Array(repeating: "a", count: 10), of: "a")
        lines.append(Array(repeating: "b", count: 10), of: "b")
        lines.append(["c"], of: "c")
        #expect(lines.take(7, quantum: 2) == ["a", "a", "b", "b", "c", "a", "a"])
        // b's turn is next; a tenant that comes now waits for a's and b's.
        lines.append(["d"], of: "d")
        #expect(lines.take(6, quantum: 2) == ["b", "b", "a", "a", "d", "b"])
    }

    @Test("takeAll takes one tenant's items out of the turns, and the others' turns go on")
    func takeAll() {
        var lines = TenantRoundRobin<Int>()
        lines.append([1, 2, 3], of: "a")
        lines.append([4, 5], of: "b")
        #expect(lines.takeAll(of: "a") == [1, 2, 3])
        #expect(lines.takeAll(of: "a") == [])
        #expect(!lines.hasItems(of: "a"))
        #expect(lines.count == 2)
        #expect(lines.take(10, quantum: 1) == [4, 5])
        #expect(lines.isEmpty)
    }
}
