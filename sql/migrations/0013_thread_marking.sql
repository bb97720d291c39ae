-- 0013: marking within a thread or the main timeline. A read or delivery up to a message, or
-- of everything, may be limited to one thread's replies or to the main timeline
-- (sql/functions/marking.sql): the marking functions take the scope, a new argument.
DROP FUNCTION IF EXISTS receipts.mark_read_each(text, text[], text[], text[], boolean[]);
DROP FUNCTION IF EXISTS receipts.mark_delivered(text, text, text, text[], text);
