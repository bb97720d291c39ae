-- 0016: receipts.unread_counts answers a chat's threads as one JSON array, computed only for
-- a chat with a reply above the watermark (sql/functions/unread.sql): a new result type.
DROP FUNCTION IF EXISTS receipts.unread_counts(text, text);
