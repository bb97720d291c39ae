@testable import ReceiptsLive
import Testing

@Suite("Peer instances")
struct PeerInstancesTests {
    @Test("a peer counts as present for three announcement intervals after it was heard")
    func presence() {
        var peers = PeerInstances(announcementInterval: .seconds(5))
        let start = ContinuousClock.now
        #expect(!peers.arePresent(at: start))
        let first = peers.heard(at: start)
        #expect(first)  // new: announce at once
        #expect(peers.arePresent(at: start + .seconds(14)))
        let again = peers.heard(at: start + .seconds(10))
        #expect(!again)  // known: no announcement needed
        #expect(peers.arePresent(at: start + .seconds(24)))
        #expect(!peers.arePresent(at: start + .seconds(25)))
        let later = peers.heard(at: start + .seconds(40))
        #expect(later)  // gone meanwhile: new again
    }

    @Test("only other instances' payloads count: not psql's triggers, not this instance's own")
    func payloads() {
        #expect(PeerInstances.isPeer("instance-abc", own: "instance-xyz"))
        #expect(!PeerInstances.isPeer("instance-xyz", own: "instance-xyz"))
        #expect(!PeerInstances.isPeer("", own: "instance-xyz"))
        #expect(!PeerInstances.isPeer("something", own: "instance-xyz"))
    }
}
