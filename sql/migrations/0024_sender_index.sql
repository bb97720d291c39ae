-- 0024: messages_by_sender is keyed (tenant, sender, chat, seq), no longer (tenant, chat,
-- sender, seq). With the chat second, it was an index of the chat like the key, and wherever
-- the planner took a chat for about a row (a generic plan in a database of many tenants, or
-- any plan before the first ANALYZE) it could walk a chat through it for lookups that name
-- no sender. PostgreSQL's own foreign-key check of every new receipt chunk row (a message by
-- (tenant, chat, seq)) did so: each send into a chat of 10,000 messages walked them all, once
-- per chunk row (2 ms each, in a database of 1,000 tenants). Its users name tenant, chat and
-- sender together (a reader's own messages above their watermark), which the new order
-- serves as well; the erasure of a user finds their messages in every chat by its prefix.
-- Built in this migration's transaction, which holds writes to messages for the build (about
-- 1.6 s per million messages on a 2-core machine).
DROP INDEX receipts.messages_by_sender;
CREATE INDEX messages_by_sender ON receipts.messages (tenant_id, sender_id, chat_id, seq);
COMMENT ON INDEX receipts.messages_by_sender IS
    'A user''s own messages: in a chat above their read watermark (never unread for them), or in every chat.';
