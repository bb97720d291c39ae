import CoreMetrics

/// How many requests each batch statement did, by kind of batch (`runBatches`): the
/// histogram `receipts_batch_requests{kind}`. A batch of one is a request that found its
/// tenant idle; larger ones are the requests that came while the one before was in the
/// database.
struct BatchRequestCounts: Sendable {
    private let recorders: [String: Recorder]

    init(kinds: [String], factory: any MetricsFactory) {
        self.recorders = Dictionary(uniqueKeysWithValues: kinds.map { kind in
            (kind, Recorder(label: ReceiptsStore.batchRequestsMetric, dimensions: [("kind", kind)], aggregate: true, factory: factory))
        })
    }

    /// Records a batch of `requests` of `kind` sent to the database (a batch sent again after a
    /// conflict counts again).
    func record(_ requests: Int, of kind: String) {
        self.recorders[kind]?.record(requests)
    }
}
