@testable import ReceiptsServer
import Testing

@Suite("Bearer credentials")
struct BearerCredentialTests {
    @Test("the scheme in any case, blanks around the credential ignored")
    func accepted() {
        #expect(Authenticator.bearerCredential(inHeader: "Bearer rk_abc") == "rk_abc")
        #expect(Authenticator.bearerCredential(inHeader: "bearer rk_abc") == "rk_abc")
        #expect(Authenticator.bearerCredential(inHeader: "BEARER  rk_abc \t") == "rk_abc")
        #expect(Authenticator.bearerCredential(inHeader: "Bearer a.b.c") == "a.b.c")
    }

    @Test("other schemes, a missing credential and a glued scheme are no credential")
    func refused() {
        for header in ["", "Bearer", "Bearer ", "Bearer  \t ", "Basic cmtfYWJj", "Bearerrk_abc", "Bearer\trk_abc", "Bearet rk_abc", "bearer", "B"] {
            #expect(Authenticator.bearerCredential(inHeader: header) == nil, "\(header)")
        }
    }
}
