-- 0014: the unread list names each chat's threads with unread replies
-- (sql/functions/unread.sql): receipts.unread_counts answers them, a new result type.
DROP FUNCTION IF EXISTS receipts.unread_counts(text, text);
