@testable import Postgres
import Testing

/// What a session's transactions run first, decided without a database: the SQL text and
/// values `SessionPolicy` picks for each mix of role, session timeout and call timeout.
@Suite("Session policy: a transaction's role and statement timeout")
struct SessionPolicyTests {
    typealias Setup = SessionPolicy.Setup

    @Test("a session without a role or a timeout sets nothing up: a transaction starts with its own statement")
    func nothingToSetUp() {
        let policy = SessionPolicy()
        #expect(policy.transactionSetup == nil)
        #expect(policy.roleSetup == nil)
    }

    @Test("a session with a role takes it first in every transaction, with the role as a value")
    func roleOnly() {
        let policy = SessionPolicy(role: "receipts_service")
        let expected = Setup(sql: SessionPolicy.takeRoleStatement, values: ["receipts_service"])
        #expect(policy.transactionSetup == expected)
        #expect(policy.roleSetup == expected)
        #expect(expected.sql == "SELECT set_config('role', $1, true)")
    }

    @Test("a call's timeout alone sets the transaction's statement_timeout, in milliseconds")
    func timeoutOnly() {
        var policy = SessionPolicy()
        policy.limitStatements(toMilliseconds: 250)
        #expect(policy.statementTimeout == 250)
        #expect(policy.transactionSetup == Setup(sql: SessionPolicy.setTimeoutStatement, values: ["250"]))
        // A statement sent without a deadline in a pipeline still takes no setup.
        #expect(policy.roleSetup == nil)
    }

    @Test("a role and a call's timeout are set up by one statement, the role first")
    func roleAndTimeout() {
        var policy = SessionPolicy(role: "receipts_service")
        policy.limitStatements(toMilliseconds: 1500)
        #expect(policy.transactionSetup == Setup(sql: SessionPolicy.takeRoleAndTimeoutStatement, values: ["receipts_service", "1500"]))
        // Without a deadline of its own, a statement in a pipeline takes only the role.
        #expect(policy.roleSetup == Setup(sql: SessionPolicy.takeRoleStatement, values: ["receipts_service"]))
    }

    @Test("a call's timeout never loosens the session's own statement_timeout, and tightens it when shorter")
    func callNeverLoosensSession() {
        var policy = SessionPolicy(sessionStatementTimeout: 300)
        policy.limitStatements(toMilliseconds: 10_000)
        #expect(policy.statementTimeout == 300)
        #expect(policy.transactionSetup == Setup(sql: SessionPolicy.setTimeoutStatement, values: ["300"]))
        policy.limitStatements(toMilliseconds: 120)
        #expect(policy.statementTimeout == 120)
        #expect(policy.transactionSetup?.values == ["120"])
    }

    @Test("when the call ends its timeout is cleared, and the session's own applies again without a setup")
    func clearingTheCallTimeout() {
        var policy = SessionPolicy(role: "receipts_service", sessionStatementTimeout: 300)
        policy.limitStatements(toMilliseconds: 100)
        #expect(policy.transactionSetup?.sql == SessionPolicy.takeRoleAndTimeoutStatement)
        policy.limitStatements(toMilliseconds: nil)
        #expect(policy.statementTimeout == nil)
        #expect(policy.sessionStatementTimeout == 300)
        #expect(policy.transactionSetup == Setup(sql: SessionPolicy.takeRoleStatement, values: ["receipts_service"]))
    }

    @Test("only a positive statement_timeout in milliseconds among the session's settings becomes its own")
    func sessionTimeoutFromSettings() {
        var policy = SessionPolicy()
        policy.noteSetting(name: "receipts.notify", value: "off")
        #expect(policy.sessionStatementTimeout == nil)
        policy.noteSetting(name: "statement_timeout", value: "0")
        #expect(policy.sessionStatementTimeout == nil)
        policy.noteSetting(name: "statement_timeout", value: "5s")
        #expect(policy.sessionStatementTimeout == nil)
        policy.noteSetting(name: "statement_timeout", value: "300")
        #expect(policy.sessionStatementTimeout == 300)
        // A later setting wins, as it does on the server.
        policy.noteSetting(name: "statement_timeout", value: "800")
        #expect(policy.sessionStatementTimeout == 800)
        // A later setting the policy cannot read leaves the last one it could.
        policy.noteSetting(name: "statement_timeout", value: "0")
        #expect(policy.sessionStatementTimeout == 800)
    }

    @Test("a pipeline prepares the timeout statement that fits the session: with the role's parameter or without")
    func timeoutSetupStatement() {
        #expect(SessionPolicy().timeoutSetupStatement == (sql: SessionPolicy.setTimeoutStatement, parameters: 1))
        #expect(
            SessionPolicy(role: "receipts_service").timeoutSetupStatement
                == (sql: SessionPolicy.takeRoleAndTimeoutStatement, parameters: 2))
    }

    @Test("a statement sent by a deadline of its own sets that timeout, bounded by the session's, whatever the call's")
    func timeoutSetupForOneStatement() {
        var policy = SessionPolicy(sessionStatementTimeout: 300)
        policy.limitStatements(toMilliseconds: 50)
        #expect(policy.timeoutSetup(milliseconds: 200) == Setup(sql: SessionPolicy.setTimeoutStatement, values: ["200"]))
        #expect(policy.timeoutSetup(milliseconds: 1000) == Setup(sql: SessionPolicy.setTimeoutStatement, values: ["300"]))
        policy.role = "receipts_service"
        #expect(
            policy.timeoutSetup(milliseconds: 200)
                == Setup(sql: SessionPolicy.takeRoleAndTimeoutStatement, values: ["receipts_service", "200"]))
    }

    @Test("a setup's values are bound untyped, as a String parameter is, so it shares the prepared statement made at connect")
    func setupTypes() {
        let setup = SessionPolicy(role: "receipts_service").roleSetup
        #expect(setup?.types == [PostgresDataType.unspecified.oid])
        #expect(SessionPolicy().timeoutSetup(milliseconds: 1).types == [0])
        #expect(SessionPolicy(role: "r").timeoutSetup(milliseconds: 1).types == [0, 0])
    }

    @Test("a statement sent with a setting of the caller's sets it too, its name and value the last two parameters")
    func timeoutSetupWithSetting() {
        let setting = (name: "app.trace", value: "00-abc-def-01")
        #expect(
            SessionPolicy().timeoutSetup(milliseconds: 200, setting: setting)
                == Setup(sql: SessionPolicy.setTimeoutStatement + ", set_config($2, $3, true)", values: ["200", "app.trace", "00-abc-def-01"]))
        #expect(
            SessionPolicy(role: "r").timeoutSetup(milliseconds: 200, setting: setting)
                == Setup(
                    sql: SessionPolicy.takeRoleAndTimeoutStatement + ", set_config($3, $4, true)", values: ["r", "200", "app.trace", "00-abc-def-01"]))
        #expect(SessionPolicy(role: "r").timeoutSetupStatement(withSetting: true).parameters == 4)
    }
}
