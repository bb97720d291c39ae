-- What a page of messages reads besides the messages themselves: the rows of
-- receipts.receipt_chunks, read directly by the service (ReceiptsStore+Messages.swift), with
-- no ORDER BY (PostgreSQL sorting a page of a large group's chunks cost more than the
-- service sorting them). The function that read them before is dropped.

DROP FUNCTION IF EXISTS receipts.receipt_chunks_of(text, text, bigint, bigint);
