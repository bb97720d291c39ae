-- 0012: threads. A message sent with "threadId" is a reply in the thread of that message
-- (its root: a message of the same chat that is not itself a reply). The main timeline is
-- the messages that are no reply; a root carries its thread's summary.
--
-- messages.thread_id names the root of a reply (null on the main timeline), and
-- messages_by_thread pages either the main timeline (thread_id IS NULL) or one thread by seq.
-- receipts.threads keeps each root's summary, its replies and when the last came, written by
-- the sends and deletes of replies (sql/functions/sending.sql, deleting.sql): a page reads it
-- by key, never by counting replies. Deleting a root deletes its replies with it.

ALTER TABLE receipts.messages ADD COLUMN thread_id receipts.identifier;
COMMENT ON COLUMN receipts.messages.thread_id IS
    'The root of the thread the message is a reply in (a message of the same chat that is no reply); null on the main timeline.';
CREATE INDEX messages_by_thread ON receipts.messages (tenant_id, chat_id, thread_id, seq);
COMMENT ON INDEX receipts.messages_by_thread IS
    'A page of the main timeline (thread_id IS NULL) or of one thread, by seq.';

CREATE TABLE receipts.threads (
    tenant_id     receipts.identifier NOT NULL,
    chat_id       receipts.identifier NOT NULL,
    root_seq      bigint      NOT NULL,
    replies       integer     NOT NULL CHECK (replies >= 0),
    last_reply_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, chat_id, root_seq),
    FOREIGN KEY (tenant_id, chat_id, root_seq) REFERENCES receipts.messages (tenant_id, chat_id, seq) ON DELETE CASCADE
);
COMMENT ON TABLE receipts.threads IS
    'A thread''s summary, by its root: how many replies it has and when the newest was sent (a root shows it as "thread").';
GRANT SELECT, INSERT, UPDATE, DELETE ON receipts.threads TO receipts_service;
CALL receipts.protect_tenant_table('receipts.threads');

-- Sending takes the thread (sql/functions/sending.sql): a new argument.
DROP FUNCTION IF EXISTS receipts.send_each(text, text[], text[], text[], text[], boolean[], integer[], text[]);
