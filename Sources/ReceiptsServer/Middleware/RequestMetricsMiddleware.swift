import Hummingbird

/// Records every request's count and latency by method, route and status, errors included.
struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServiceMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            self.record(request, context: context, status: response.status.code, since: start)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            self.record(request, context: context, status: status, since: start)
            throw error
        }
    }

    private func record(_ request: Request, context: Context, status: Int, since start: ContinuousClock.Instant) {
        self.metrics.recordRequest(
            method: request.method.rawValue,
            route: context.endpointPath ?? "unmatched",
            status: status,
            duration: ContinuousClock.now - start
        )
    }
}
