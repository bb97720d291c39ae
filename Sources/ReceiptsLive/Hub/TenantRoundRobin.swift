import DequeModule

/// Work waiting in one line per tenant, taken in turns: `quantum` of one tenant, then
/// `quantum` of the next, so that a tenant with a few items waits behind at most one quantum
/// of each other tenant, however many the others have waiting. Each tenant's items come out
/// in the order they went in. Pure: no locks, no clocks (`LiveWriteQueue` drives it on an
/// event loop).
struct TenantRoundRobin<Item> {
    private var lines: [String: Deque<Item>] = [:]
    /// The tenants with items waiting, in the order of their next turns.
    private var turns: Deque<String> = []
    /// The items waiting, of every tenant.
    private(set) var count = 0

    var isEmpty: Bool { self.count == 0 }

    /// Whether `tenant` has items waiting.
    func hasItems(of tenant: String) -> Bool { self.lines[tenant] != nil }

    /// Adds `items` at the end of `tenant`'s line; a tenant that had none waiting takes its
    /// turn after those who have.
    mutating func append(_ items: some Sequence<Item>, of tenant: String) {
        var line = self.lines.removeValue(forKey: tenant) ?? []
        let before = line.count
        line.append(contentsOf: items)
        guard !line.isEmpty else { return }
        if before == 0 { self.turns.append(tenant) }
        self.count += line.count - before
        self.lines[tenant] = line
    }

    /// Takes up to `limit` items: `quantum` (at least one) of each tenant in turn, the
    /// tenant whose turn it is first; a tenant with items left takes its next turn after the
    /// others'.
    mutating func take(_ limit: Int, quantum: Int) -> [Item] {
        var taken: [Item] = []
        taken.reserveCapacity(min(limit, self.count))
        while taken.count < limit, let tenant = self.turns.popFirst() {
            var line = self.lines.removeValue(forKey: tenant)!
            let share = min(max(1, quantum), limit - taken.count, line.count)
            taken.append(contentsOf: line.prefix(share))
            line.removeFirst(share)
            if !line.isEmpty {
                self.lines[tenant] = line
                self.turns.append(tenant)
            }
        }
        self.count -= taken.count
        return taken
    }

    /// Takes every item of `tenant`, in order, out of the turns.
    mutating func takeAll(of tenant: String) -> [Item] {
        guard let line = self.lines.removeValue(forKey: tenant) else { return [] }
        self.turns.removeAll { $0 == tenant }
        self.count -= line.count
        return Array(line)
    }
}
