/// What every transaction of one session sets up first: the role it takes
/// (`PostgresConfiguration.role`) and the `statement_timeout` it runs under.
///
/// A value without I/O: it decides which statement a transaction runs first and with which
/// values, as SQL text; `LibPQConnection` holds one, prepares that text once per session and
/// sends it in the same round trip as the transaction's first statement (pipeline mode).
/// Nothing here is a session-level `SET`: each transaction sets it again with
/// `set_config(…, true)` (`SET LOCAL`), so nothing a transaction does to its role or timeout
/// outlives it.
struct SessionPolicy: Sendable, Equatable {
    /// The statement every transaction of a session with a `role` starts with:
    /// `set_config(…, true)` is `SET LOCAL ROLE`, undone when the transaction ends.
    static let takeRoleStatement = "SELECT set_config('role', $1, true)"
    /// `takeRoleStatement` that also sets the transaction's `statement_timeout` (`SET LOCAL`).
    static let takeRoleAndTimeoutStatement = "SELECT set_config('role', $1, true), set_config('statement_timeout', $2, true)"
    /// Sets the transaction's `statement_timeout` (`SET LOCAL`), on a session without a role.
    static let setTimeoutStatement = "SELECT set_config('statement_timeout', $1, true)"
    /// What `timeoutSetup(milliseconds:setting:)` appends to set one more run-time parameter
    /// of the caller's for the transaction: its name and value are the last two parameters.
    static func settingSuffix(from parameter: Int) -> String { ", set_config($\(parameter), $\(parameter + 1), true)" }

    /// What a transaction runs first: one of the statements above and its values, bound as
    /// untyped text (as a `String` is), so the server infers `text` for `set_config`.
    struct Setup: Equatable, Sendable {
        var sql: String
        var values: [String]

        /// The parameters' types, for the prepared statement's key: all untyped.
        var types: [UInt32] { SessionPolicy.untypedParameters(self.values.count) }
    }

    /// The role every transaction takes; nil keeps the login role. Set once the session has
    /// shown that its login may take it (see `LibPQConnection.setUpSession`).
    var role: String?
    /// The session's own `statement_timeout` in milliseconds, when its settings give one
    /// (`PostgresConfiguration.settings`): a call's `statementTimeout` never loosens it.
    private(set) var sessionStatementTimeout: Int?
    /// While a call with a deadline runs (set for that call, see `PostgresConnection.call`): the milliseconds it has left, or the session's own
    /// timeout if that is shorter, which every transaction it starts sets as its
    /// `statement_timeout`, so the server ends a statement by the deadline itself. nil: the
    /// session's own `statement_timeout` applies.
    private(set) var statementTimeout: Int?

    init(role: String? = nil, sessionStatementTimeout: Int? = nil) {
        self.role = role
        self.sessionStatementTimeout = sessionStatementTimeout
    }

    /// Notes a run-time parameter the session has set (`PostgresConfiguration.settings`):
    /// a positive `statement_timeout` in plain milliseconds becomes the session's own, which
    /// no call may loosen. Other values (`0`, `5s`) are not compared, so they bound nothing.
    mutating func noteSetting(name: String, value: String) {
        if name == "statement_timeout", let milliseconds = Int(value), milliseconds > 0 {
            self.sessionStatementTimeout = milliseconds
        }
    }

    /// Sets `statementTimeout` for a call that has `milliseconds` left, or the session's own
    /// timeout if that is shorter; nil clears it, when the call ends.
    mutating func limitStatements(toMilliseconds milliseconds: Int?) {
        self.statementTimeout = milliseconds.map(self.bounded)
    }

    /// What a transaction runs first: takes the `role` and sets the `statementTimeout`; nil
    /// when there is neither, and the transaction starts with its own first statement.
    var transactionSetup: Setup? {
        switch (self.role, self.statementTimeout) {
        case (nil, nil):
            nil
        case (let role?, nil):
            Setup(sql: Self.takeRoleStatement, values: [role])
        case (nil, let timeout?):
            Setup(sql: Self.setTimeoutStatement, values: [String(timeout)])
        case (let role?, let timeout?):
            Setup(sql: Self.takeRoleAndTimeoutStatement, values: [role, String(timeout)])
        }
    }

    /// What a transaction runs first when it only takes the `role` (a statement sent in
    /// pipeline mode without a deadline); nil without a role.
    var roleSetup: Setup? {
        self.role.map { Setup(sql: Self.takeRoleStatement, values: [$0]) }
    }

    /// The statement of `timeoutSetup(milliseconds:)` and its number of parameters: a
    /// pipeline prepares it before it begins, since a statement sent in pipeline mode cannot
    /// wait for a prepare of its own setup.
    var timeoutSetupStatement: (sql: String, parameters: Int) {
        self.timeoutSetupStatement(withSetting: false)
    }

    /// `timeoutSetupStatement`, or with one setting of the caller's as well
    /// (`timeoutSetup(milliseconds:setting:)`): both are prepared before a pipeline begins.
    func timeoutSetupStatement(withSetting: Bool) -> (sql: String, parameters: Int) {
        let (sql, parameters) = self.role == nil ? (Self.setTimeoutStatement, 1) : (Self.takeRoleAndTimeoutStatement, 2)
        return withSetting ? (sql + Self.settingSuffix(from: parameters + 1), parameters + 2) : (sql, parameters)
    }

    /// What a transaction runs first to end its statements within `milliseconds` (or the
    /// session's own `statement_timeout`, if shorter), taking the `role` too: for one
    /// statement sent in pipeline mode by a deadline of its own, whatever `statementTimeout`
    /// the call has. With `setting`, it also sets that run-time parameter for the transaction
    /// (`SET LOCAL`; a custom one such as `app.trace` needs no declaration).
    func timeoutSetup(milliseconds: Int, setting: (name: String, value: String)? = nil) -> Setup {
        let timeout = String(self.bounded(milliseconds))
        var values = self.role.map { [$0, timeout] } ?? [timeout]
        if let setting { values += [setting.name, setting.value] }
        return Setup(sql: self.timeoutSetupStatement(withSetting: setting != nil).sql, values: values)
    }

    /// `milliseconds`, or the session's own timeout if that is shorter.
    private func bounded(_ milliseconds: Int) -> Int {
        min(milliseconds, self.sessionStatementTimeout ?? milliseconds)
    }

    /// The types of `count` untyped parameters (`PostgresDataType.unspecified`).
    static func untypedParameters(_ count: Int) -> [UInt32] {
        [UInt32](repeating: PostgresDataType.unspecified.oid, count: count)
    }
}
