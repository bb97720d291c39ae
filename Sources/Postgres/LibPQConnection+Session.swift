/// The session's policy on the wire: the settings and role a connection applies once, right
/// after connecting, and the statement each transaction runs first (`SessionPolicy` picks
/// its SQL and values; here it becomes a statement prepared once per session).
extension LibPQConnection {
    /// A transaction's setup as it is sent: the name of its prepared statement and its values.
    typealias PreparedSetup = (statement: String, values: [String])

    /// Sets the session up right after connecting: its run-time parameters
    /// (`PostgresConfiguration.settings`, in order, each noted in `policy`), then the role
    /// every transaction takes. A failure closes the connection and throws
    /// `connectionFailed`, naming the step.
    func setUpSession(_ configuration: PostgresConfiguration) throws(PostgresError) {
        for setting in configuration.settings {
            try self.setUp("set \(setting.name)") { () throws(PostgresError) in
                _ = try self.execute(
                    "SELECT set_config($1, $2, false)", bindings: try PostgresBindings([setting.name, setting.value]))
            }
            self.policy.noteSetting(name: setting.name, value: setting.value)
        }
        if let role = configuration.role {
            // Not a session-level SET ROLE, which a statement could undo for every later
            // user of the session: each transaction takes the role itself (see `execute`,
            // `executeScript`, `send`). Checked once here, so a role the login cannot take
            // fails at connect, not at the first request.
            try self.setUp("take role \(role)") { () throws(PostgresError) in
                // Bound as any value is (a role with a NUL character fails here), and
                // prepared now: every transaction's setup runs it from now on.
                let bindings = try PostgresBindings([role])
                _ = try self.preparedStatementName(for: SessionPolicy.takeRoleStatement, types: bindings.types)
                self.policy.role = role
                _ = try self.execute("SELECT 1", bindings: try PostgresBindings([]))
            }
        }
    }

    /// Runs one step of the session's set-up; a failure closes the connection.
    private func setUp(_ what: String, _ step: () throws(PostgresError) -> Void) throws(PostgresError) {
        do {
            try step()
        } catch {
            self.close()
            throw PostgresError(
                code: .connectionFailed,
                message: "connected to \(self.server) but could not \(what): \(error.message)",
                sqlState: error.sqlState,
                host: self.server
            )
        }
    }

    /// What a transaction runs first, in the same round trip as its first statement
    /// (`SessionPolicy.transactionSetup`: the role, the call's statement timeout); nil when
    /// there is nothing to set up. Prepares the statement the first time, so it must be
    /// called outside pipeline mode.
    func transactionSetup() throws(PostgresError) -> PreparedSetup? {
        guard let setup = self.policy.transactionSetup else { return nil }
        return (try self.preparedStatementName(for: setup.sql, types: setup.types), setup.values)
    }

    /// Prepares the statement of `timeoutSetup(milliseconds:)` (outside pipeline mode).
    func prepareTimeoutSetup() throws(PostgresError) {
        let (sql, parameters) = self.policy.timeoutSetupStatement
        _ = try self.preparedStatementName(for: sql, types: SessionPolicy.untypedParameters(parameters))
    }

    /// What a transaction runs first to end its statements within `milliseconds` (or the
    /// session's own `statement_timeout`, if shorter), taking the role too: for a statement
    /// sent in pipeline mode, after `prepareTimeoutSetup()`; nil if that was not called.
    func timeoutSetup(milliseconds: Int) -> PreparedSetup? {
        self.preparedSetup(self.policy.timeoutSetup(milliseconds: milliseconds))
    }

    /// `setup` with the name its statement is prepared under, without preparing it (in
    /// pipeline mode a prepare cannot be waited for); nil when there is no setup or its
    /// statement is not prepared.
    func preparedSetup(_ setup: SessionPolicy.Setup?) -> PreparedSetup? {
        guard let setup, let name = self.preparedStatements.name(for: .init(sql: setup.sql, types: setup.types)) else {
            return nil
        }
        return (name, setup.values)
    }
}
