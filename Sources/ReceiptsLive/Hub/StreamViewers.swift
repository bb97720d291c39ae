extension EventHub {
    /// Whose events a feed's subscribers see: how many streams (and webhooks) of the tenant
    /// key, and of each user. The hub adds a user's unread totals to `unread.changed` only
    /// where a stream sees that user's events.
    struct StreamViewers {
        private var tenantKey = 0
        private var users: [String: Int] = [:]

        /// Whether some subscriber sees the events of `user`.
        func see(_ user: String) -> Bool { self.tenantKey > 0 || self.users[user] != nil }

        /// A subscriber of `user`'s token, or of the tenant key (nil).
        mutating func insert(_ user: String?) {
            if let user { self.users[user, default: 0] += 1 } else { self.tenantKey += 1 }
        }

        mutating func remove(_ user: String?) {
            guard let user else {
                self.tenantKey -= 1
                return
            }
            self.users[user, default: 1] -= 1
            if self.users[user] == 0 { self.users[user] = nil }
        }
    }
}
