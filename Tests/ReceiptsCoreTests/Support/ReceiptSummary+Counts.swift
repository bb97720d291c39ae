import ReceiptsCore

extension ReceiptSummary {
    /// Y, D and X in that order, so one expectation can check all three counts.
    var counts: [Int] { [recipients, delivered, read] }
}
