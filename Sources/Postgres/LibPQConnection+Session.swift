import NIOCore
import NIOPosix

/// The session's policy on the wire: the settings and role a connection applies once, right
/// after connecting, and the statement each transaction runs first (`SessionPolicy` picks
/// its SQL and values; here it becomes a statement prepared once per session).
extension LibPQConnection {
    /// Opens a connection on `threadPool` (libpq's connect blocks) and sets its session up,
    /// waiting for the server at most until `deadline`.
    static func open(
        _ configuration: PostgresConfiguration, on threadPool: NIOThreadPool, deadline: NIODeadline? = nil
    ) async throws(PostgresError) -> LibPQConnection {
        let connection: LibPQConnection
        do {
            connection = try await threadPool.runIfActive { () throws(PostgresError) in try LibPQConnection.open(configuration) }
        } catch let error as PostgresError {
            throw error
        } catch {
            throw PostgresError(code: .connectionClosed, message: "the threads that open connections have shut down")
        }
        try await connection.setUpSession(configuration, deadline: deadline)
        return connection
    }

    /// A transaction's setup as it is sent: the name of its prepared statement and its values.
    typealias PreparedSetup = (statement: String, values: [String])

    /// Sets the session up right after connecting: its run-time parameters
    /// (`PostgresConfiguration.settings`, in order, each noted in `policy`), then the role
    /// every transaction takes. A failure closes the connection and throws
    /// `connectionFailed`, naming the step.
    func setUpSession(_ configuration: PostgresConfiguration, deadline: NIODeadline? = nil) async throws(PostgresError) {
        self.callDeadline = deadline
        defer { self.callDeadline = nil }
        for setting in configuration.settings {
            try await self.setUp("set \(setting.name)") { () async throws(PostgresError) in
                _ = try await self.execute(
                    "SELECT set_config($1, $2, false)", bindings: try PostgresBindings([setting.name, setting.value]))
            }
            self.policy.noteSetting(name: setting.name, value: setting.value)
        }
        if let role = configuration.role {
            // Not a session-level SET ROLE, which a statement could undo for every later
            // user of the session: each transaction takes the role itself (see `execute`,
            // `executeScript`, `send`). Checked once here, so a role the login cannot take
            // fails at connect, not at the first request.
            try await self.setUp("take role \(role)") { () async throws(PostgresError) in
                // Bound as any value is (a role with a NUL character fails here), and
                // prepared now: every transaction's setup runs it from now on.
                let bindings = try PostgresBindings([role])
                _ = try await self.preparedStatementName(for: SessionPolicy.takeRoleStatement, types: bindings.types)
                self.policy.role = role
                _ = try await self.execute("SELECT 1", bindings: try PostgresBindings([]))
            }
        }
    }

    /// Runs one step of the session's set-up; a failure closes the connection.
    private func setUp(_ what: String, _ step: () async throws(PostgresError) -> Void) async throws(PostgresError) {
        do {
            try await step()
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
    func transactionSetup() async throws(PostgresError) -> PreparedSetup? {
        guard let setup = self.policy.transactionSetup else { return nil }
        return (try await self.preparedStatementName(for: setup.sql, types: setup.types), setup.values)
    }

    /// Prepares the statements of `timeoutSetup(milliseconds:setting:)`, with and without a
    /// setting (outside pipeline mode).
    func prepareTimeoutSetup() async throws(PostgresError) {
        for withSetting in [false, true] {
            let (sql, parameters) = self.policy.timeoutSetupStatement(withSetting: withSetting)
            _ = try await self.preparedStatementName(for: sql, types: SessionPolicy.untypedParameters(parameters))
        }
    }

    /// What a transaction runs first to end its statements within `milliseconds` (or the
    /// session's own `statement_timeout`, if shorter), taking the role too, and setting
    /// `setting` if given: for a statement sent in pipeline mode, after
    /// `prepareTimeoutSetup()`; nil if that was not called.
    func timeoutSetup(milliseconds: Int, setting: (name: String, value: String)? = nil) -> PreparedSetup? {
        self.preparedSetup(self.policy.timeoutSetup(milliseconds: milliseconds, setting: setting))
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
