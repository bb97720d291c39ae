import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import Postgres
import ReceiptsLive
import ReceiptsStore
import ServiceLifecycle

/// Applies pending migrations (unless turned off), then assembles the service: database
/// pool, event listener and hub, routes.
///
/// `receiptsd serve` runs what this returns; tests build the same application.
public func buildApplication(
    _ configuration: ReceiptsConfiguration,
    logger: Logger
) async throws -> some ApplicationProtocol {
    var database = PostgresConfiguration(connectionString: configuration.databaseURL, applicationName: configuration.instanceName)
    // libpq counts whole seconds, at least 2.
    database.connectTimeoutSeconds = max(2, Int(configuration.databaseTimeout.components.seconds))
    if configuration.runMigrations {
        // Before anything starts: the event hub and the retention job read what they create.
        // As the login role (the tables' owner), not receipts_service.
        try await MigrationRunner(directory: configuration.migrationsDirectory, logger: logger).applyPending(to: database)
    }
    let poolOptions = PostgresConnectionPool.Options(
            maximumConnections: configuration.databasePoolSize,
            // A request's leases share its deadline (DatabaseDeadlineMiddleware), which bounds
            // their wait and their calls; background work waits this long for a connection.
            leaseTimeout: TimeAmount(configuration.databaseTimeout),
            // For what no deadline bounds (background work, batch pipelines): the sessions'
            // statement_timeout ends a slow statement first; this is for a server that cannot.
            unresponsiveCallTimeout: TimeAmount(configuration.databaseTimeout + .seconds(1)),
            fairConcurrency: configuration.fairness.sharedConnections
        )
    let pool = PostgresConnectionPool(
        configuration: ReceiptsStore.serviceSessions(of: database, timeout: configuration.databaseTimeout),
        options: poolOptions,
        logger: logger
    )
    let metrics = ServiceMetrics()
    let store = ReceiptsStore(pool: pool, logger: logger, metrics: metrics.factory)
    let standbys = try configuration.replicas.databaseURL.map { url in
        try StandbyReads(
            configuration.replicas, url: url, poolOptions: poolOptions, sessionsLike: database, primary: pool,
            databaseTimeout: configuration.databaseTimeout, logger: logger)
    }
    var listenerDatabase = database
    listenerDatabase.applicationName = "\(configuration.instanceName)-listener"
    let listener = PostgresListener(configuration: listenerDatabase, logger: logger)
    let hubOptions = EventHub.Options(
        maximumLag: configuration.streamMaximumLag,
        notifiesOtherInstances: configuration.notifiesOtherInstances,
        peerAnnouncementInterval: configuration.peerAnnouncementInterval,
        abandonGapsAfter: configuration.abandonEventGapsAfter,
        fanOutLoopShare: configuration.fairness.fanOutLoopShare
    )
    // Each subscribes to its channel of the listener.
    let hub = EventHub(store: store, listener: listener, options: hubOptions, logger: logger, metrics: metrics.factory)
    let credentialNotifications = CredentialNotifications(
        listener: listener, changes: CredentialChanges(directory: store.credentials))
    let components = ServiceComponents(
        configuration: configuration, pool: pool, store: store, hub: hub, metrics: metrics, standbys: standbys)

    // One responder for every request, and for the event streams that NIO handlers hold.
    let responder = buildRouter(components).buildResponder()
    let app = Application(
        responder: responder,
        server: buildServer(components, responder: responder),
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port),
            serverName: "receiptsd"
        ),
        services: [
            // Before the hub: on shutdown it waits for the ends of the streams NIO handlers hold
            // (WebSockets' close frames) after the hub closed every stream.
            pool, standbys ?? NoStandbys(), store, listener, components.streamGuards.openStreams, hub, credentialNotifications,
            components.streamGuards.credentials, components.databaseHealth,
            EventRetentionService(
                store: store, retentionSeconds: configuration.eventRetentionSeconds, interval: .seconds(3600), logger: logger),
            // Deleting, erasing and credentials: background work.
            ChatPurgeService(store: store, signal: components.deletedChats, logger: logger),
            APIKeyUseRecorder(use: components.authenticator.keyUse, store: store, logger: logger),
            ErasureService(
                store: store, signal: components.erasures,
                holder: "\(configuration.instanceName)-\(UInt64.random(in: 1...UInt64.max))", logger: logger),
            ImportService(
                store: store, signal: components.imports, options: configuration.imports,
                holder: "\(configuration.instanceName)-\(UInt64.random(in: 1...UInt64.max))", logger: logger),
            // Last: on shutdown it stops first, while the hub and the pool still run.
            components.webhooks,
        ],
        logger: logger
    )
    return app
}

/// Stands in the service list where `StandbyReads` would run when there are no standbys.
private struct NoStandbys: Service {
    func run() async throws {
        // A service that returns early would end the application.
        try? await gracefulShutdown()
    }
}

/// What the routes share.
public struct ServiceComponents: Sendable {
    public let configuration: ReceiptsConfiguration
    public let pool: PostgresConnectionPool
    public let store: ReceiptsStore
    public let hub: EventHub
    public let metrics: ServiceMetrics
    let authenticator: Authenticator
    let databaseHealth: DatabaseHealthMonitor
    let userTokens: UserTokens
    /// The stream caps and the credential checks of every stream.
    let streamGuards: StreamGuards
    /// `GET /v1/stream`.
    var webSocketStream: WebSocketStream { WebSocketStream(hub: self.hub, store: self.store, guards: self.streamGuards) }
    /// Which web origins may use which tenant's credentials.
    let origins: OriginPolicy
    /// Wakes the purge of deleted chats' messages.
    let deletedChats = WorkSignal()
    /// Wakes the erasure worker.
    let erasures = WorkSignal()
    /// Wakes the import worker; the import bodies arriving now.
    let imports = WorkSignal()
    let importUploads = ImportUploads()
    /// Delivers the webhooks this instance holds the lease of.
    public let webhooks: WebhookDispatcher
    /// The tenants' bounds of requests in flight and rate limits.
    let admission: TenantAdmissionGate
    /// Where the reads a standby may serve go.
    let replicaReads: ReplicaReads
    /// The connection cap's places (`buildServer`), counted for `/metrics`.
    let connectionSlots: ConnectionSlots

    public init(
        configuration: ReceiptsConfiguration,
        pool: PostgresConnectionPool,
        store: ReceiptsStore,
        hub: EventHub,
        metrics: ServiceMetrics,
        standbys: StandbyReads? = nil
    ) {
        self.configuration = configuration
        self.pool = pool
        self.store = store
        self.hub = hub
        self.metrics = metrics
        self.userTokens = UserTokens(store: store)
        self.authenticator = Authenticator(store: store, userTokens: self.userTokens)
        self.origins = OriginPolicy(server: configuration.allowedOrigins, directory: store.credentials)
        self.streamGuards = StreamGuards(
            authenticator: self.authenticator,
            limiter: StreamLimiter(
                maximumPerUser: configuration.maximumStreamsPerUser, maximumPerTenant: configuration.maximumStreamsPerTenant),
            origins: self.origins,
            credentials: StreamCredentialWatch(
                authenticator: self.authenticator, checkInterval: configuration.streamCredentialCheckInterval, logger: store.logger),
            openStreams: OpenStreams()
        )
        self.databaseHealth = DatabaseHealthMonitor(pool: pool, logger: store.logger)
        self.admission = TenantAdmissionGate(fairness: configuration.fairness, directory: store.credentials)
        self.replicaReads = ReplicaReads(
            store: store, standbys: standbys, recentWrites: standbys.map { _ in RecentWrites(window: configuration.replicas.ownWritesWindow) },
            metrics: metrics)
        self.webhooks = WebhookDispatcher(
            store: store, hub: hub, options: configuration.webhooks, instanceName: configuration.instanceName, logger: store.logger,
            metrics: metrics)
        let maximumConnections = configuration.maximumConnections
        self.connectionSlots = ConnectionSlots(maximum: maximumConnections, spillOver: ConnectionSlots.spillOver(forMaximum: maximumConnections))
    }
}

/// The HTTP routes and their middleware.
public func buildRouter(_ components: ServiceComponents) -> Router<ReceiptsRequestContext> {
    let router = Router(context: ReceiptsRequestContext.self)
    // A span per request when tracing is on (`ReceiptsTracing`), continuing the W3C
    // `traceparent` it was sent; stream tokens in query strings are not recorded.
    if ReceiptsTracing.isOn { router.add(middleware: TracingMiddleware(redactingQueryParameters: ["token"])) }
    router.add(middleware: RequestMetricsMiddleware(metrics: components.metrics))
    // Outside ErrorMiddleware: it adds the CORS headers to every answer, errors included.
    router.add(middleware: CrossOriginMiddleware(policy: components.origins))
    router.add(middleware: ErrorMiddleware())
    router.add(middleware: DatabaseDeadlineMiddleware(timeout: components.configuration.databaseTimeout))
    router.add(middleware: BodyLimitMiddleware(readsBody: false))

    HealthController(database: components.databaseHealth, hub: components.hub).addRoutes(to: router)
    OperationsController(
        metrics: components.metrics, pool: components.pool, admission: components.admission, standbys: components.replicaReads.standbys,
        streams: components.streamGuards, connections: components.connectionSlots
    ).addRoutes(to: router)
    // Tokens on every write's answer, and the token a read sends.
    let consistency = ConsistencyMiddleware(
        positions: components.store.commitPositions, recentWrites: components.replicaReads.recentWrites,
        metrics: components.metrics, logger: components.store.logger)

    let admin = router.group("admin/v1")
        .add(middleware: AdminAuthenticationMiddleware(adminToken: components.configuration.adminToken))
        .add(middleware: BodyLimitMiddleware(readsBody: true))
        .add(middleware: consistency)
    AdminController(registration: TenantRegistration(store: components.store)).addRoutes(to: admin)
    TenantLimitsController(store: components.store, fairness: components.configuration.fairness).addRoutes(to: admin)
    let api = router.group("v1")
        .add(middleware: AuthenticationMiddleware(authenticator: components.authenticator, origins: components.origins))
        // Before the body is read: a request refused costs no more than its head.
        .add(middleware: TenantAdmissionMiddleware(admission: components.admission, metrics: components.metrics))
        .add(middleware: BodyLimitMiddleware(readsBody: true))
        .add(middleware: consistency)
    TokenController(userTokens: components.userTokens).addRoutes(to: api)
    ChatController(store: components.store, reads: components.replicaReads, deletedChats: components.deletedChats).addRoutes(to: api)
    MessageController(store: components.store, reads: components.replicaReads).addRoutes(to: api)
    MarkingController(store: components.store).addRoutes(to: api)
    UserController(store: components.store, reads: components.replicaReads).addRoutes(to: api)
    TenantSettingsController(store: components.store).addRoutes(to: api)
    ImportController(
        store: components.store, options: components.configuration.imports, uploads: components.importUploads,
        signal: components.imports
    ).addRoutes(to: api)
    // Deleting, erasing and credentials.
    let credentials = CredentialsController(
        store: components.store, changes: components.authenticator.changes, logger: components.store.logger)
    credentials.addAdminRoutes(to: admin)
    credentials.addRoutes(to: api)
    let erasure = ErasureController(
        store: components.store, erasures: components.erasures, changes: components.authenticator.changes, logger: components.store.logger)
    erasure.addAdminRoutes(to: admin)
    erasure.addRoutes(to: api)
    WebhookController(
        store: components.store, hub: components.hub, dispatcher: components.webhooks,
        addressPolicy: components.webhooks.addressPolicy
    ).addRoutes(to: api)
    EventStreamController(hub: components.hub, guards: components.streamGuards).addRoutes(
        to: router.group("v1/events").add(
            middleware: AuthenticationMiddleware(
                authenticator: components.authenticator, origins: components.origins, acceptsTokenParameter: true))
    )
    if let demoTenant = components.configuration.demoTenant {
        DemoController(tenant: demoTenant, store: components.store, userTokens: components.userTokens).addRoutes(to: router)
    }
    // A WebSocket upgrade goes to the WebSocket router; a plain GET of the stream lands here.
    router.get("v1/stream") { _, _ -> Response in throw WebSocketStream.upgradeRequired }
    // Last, so that it wraps only the not-found answer: 405 for a route's other methods. Not
    // for the admin API while it is off: all of `/admin/*` is 404 then.
    let adminIsOn = components.configuration.adminToken != nil
    let routes = router.routes.map { (method: $0.method, path: $0.path.description) }
        .filter { adminIsOn || $0.path.split(separator: "/").first != "admin" }
    router.add(middleware: MethodNotAllowedMiddleware(routes: routes))
    return router
}

/// HTTP/1 with the event stream's WebSocket upgrade (`EventStreamUpgradeChannel`), within the
/// connection limits (README, "Limits, timeouts and faults"): at most `maximumConnections`
/// open, one more answered 503 at once (`CappedConnectionChannel`); request heads complete
/// within `requestHeadTimeout`, idle connections close after `idleConnectionTimeout`,
/// malformed requests get 400 and a close (`HTTPConnectionGuard`).
func buildServer(_ components: ServiceComponents, responder: some HTTPResponder<ReceiptsRequestContext>) -> HTTPServerBuilder {
    let webSocketRouter = buildWebSocketRouter(components).buildResponder()
    let upgrade = WebSocketUpgrade(stream: components.webSocketStream) { request, context in
        try await webSocketRouter.respond(to: request, context: context)
    }
    let eventSource = EventSourceOpening(hub: components.hub, guards: components.streamGuards) { request, context in
        try await responder.respond(to: request, context: context)
    }
    let limits = ConnectionTimeline.Limits(
        headTimeout: TimeAmount(components.configuration.requestHeadTimeout),
        idleTimeout: TimeAmount(components.configuration.idleConnectionTimeout)
    )
    let slots = components.connectionSlots
    return HTTPServerBuilder { responder in
        CappedConnectionChannel(
            base: GuardedHTTPChannel(
                base: EventStreamUpgradeChannel(responder: responder, upgrade: upgrade, eventSource: eventSource), limits: limits),
            slots: slots,
            headTimeout: min(limits.headTimeout, .seconds(1))
        )
    }
}

/// The WebSocket router, which decides an upgrade of `GET /v1/stream`.
public func buildWebSocketRouter(_ components: ServiceComponents) -> Router<ReceiptsWebSocketContext> {
    let router = Router(context: ReceiptsWebSocketContext.self)
    // The upgrade's database work (the credential, the resume point) has one deadline, as an
    // HTTP request's; the stream that follows runs outside it.
    router.add(middleware: DatabaseDeadlineMiddleware(timeout: components.configuration.databaseTimeout))
    components.webSocketStream.addRoutes(to: router)
    return router
}
