/// Whether other instances of the service listen on the same database, as far as this one
/// has heard.
///
/// Waking other instances after each write costs the requests that run beside it (NOTIFY
/// takes a database-wide lock at commit, so notifying commits queue behind each other), so
/// an instance sends those notifications, one at a time, only while it
/// knows another instance listens. Instances announce themselves with a NOTIFY of their own
/// payload when their listener connects and every `announcementInterval`; an instance that
/// hears a peer it did not know announces itself at once, so two instances know of each
/// other within a round trip. A peer not heard for three intervals is taken to be gone.
struct PeerInstances {
    /// The prefix of every instance's notification payload (psql's triggers send none).
    static let payloadPrefix = "instance-"

    let announcementInterval: Duration
    private var lastHeard: ContinuousClock.Instant?

    init(announcementInterval: Duration) {
        self.announcementInterval = announcementInterval
    }

    /// How long a peer counts as present after it was last heard.
    var timeout: Duration { self.announcementInterval * 3 }

    /// Whether a peer was heard within `timeout` before `now`.
    func arePresent(at now: ContinuousClock.Instant) -> Bool {
        guard let lastHeard else { return false }
        return now - lastHeard < self.timeout
    }

    /// Records a peer's notification; returns whether no peer was known before (then this
    /// instance should announce itself at once).
    mutating func heard(at now: ContinuousClock.Instant) -> Bool {
        let isNew = !self.arePresent(at: now)
        self.lastHeard = now
        return isNew
    }

    /// Whether `payload` is another instance's (not psql's, not this instance's own).
    static func isPeer(_ payload: String, own: String) -> Bool {
        payload.hasPrefix(Self.payloadPrefix) && payload != own
    }
}
