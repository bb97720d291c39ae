-- 0023: messages_by_thread holds replies only, and the main timeline gets an index of its own.
--
-- As one index of every message, (tenant, chat, thread, seq) was the smallest index of a chat
-- (the thread of most messages is null), so wherever the planner took a chat for about a row
-- (a generic plan in a database of many tenants, or any plan before the first ANALYZE), it
-- walked a chat through it for lookups that had nothing to do with threads: the count of a
-- reader's own messages above their watermark (receipts.messages_to_read, the unread view)
-- went through every message above it instead of the sender's index, and lookups by id
-- through the whole chat. A partial index is a candidate only for a query whose conditions
-- imply its predicate: `thread_id = $1` implies `thread_id IS NOT NULL`, a page of the main
-- timeline says `thread_id IS NULL`, and nothing else can walk them. Each message is still in
-- exactly one of the two, so a send writes as many index entries as before.
--
-- Both are built in this migration's transaction, which holds writes to messages for the
-- build (about 1 s per million messages on a 2-core machine).
DROP INDEX receipts.messages_by_thread;
CREATE INDEX messages_by_thread ON receipts.messages (tenant_id, chat_id, thread_id, seq) WHERE thread_id IS NOT NULL;
COMMENT ON INDEX receipts.messages_by_thread IS 'A page of one thread (its replies), by seq.';
CREATE INDEX messages_on_main_timeline ON receipts.messages (tenant_id, chat_id, seq) WHERE thread_id IS NULL;
COMMENT ON INDEX receipts.messages_on_main_timeline IS 'A page of the main timeline (the messages that are no reply), by seq.';
