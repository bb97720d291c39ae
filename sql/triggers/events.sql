-- The triggers that write the event log (see sql/functions/events.sql for how it is read).
--
-- Statement-level triggers turn every receipt-changing statement into events, one per chat
-- and user per statement, each with one INSERT ... SELECT: ids from the sequence in event
-- order, the transaction id beside each (the statement that fired the trigger changed rows,
-- so the transaction already has its id, taken before any event id), and then one
-- receipts.wake_listeners(). The payload is empty: the listener reads the rows, and
-- identical notifications of one transaction are folded into one.
--
-- An event of a chat carries its audience as the chat's audience version (who were members
-- then: sql/migrations/0008_event_audiences.sql), read by key in a subquery of the trigger's
-- INSERT, inside that statement: a few bytes, whatever the group's size (the members
-- themselves, an array a row, made a read in a group of 5,000 write 24 KB).
--
-- The receipt and unread triggers join the statement's old rows to its new ones (transition
-- tables). PL/pgSQL plans such a statement once per session, sized by the rows of its first
-- run, and keeps the plan until an ANALYZE of the tables it reads: a session whose first run
-- updated one row got a nested loop, and kept it for a read-all (10,000 messages: 11 s, 25
-- million row comparisons, instead of 0.1 s). So both join those rows by hashing, whatever
-- the first run's size: nested loops and merge joins off, hash joins on explicitly (a
-- function's settings hold for what it calls, and the marking function turns hash joins
-- off; with every join method off, the planner takes a nested loop anyway at a cost of ten
-- billion, and that cost has PostgreSQL compile the statement with JIT on every run). And
-- jit off: a lookup by key that the planner can only do with a nested loop (the unread
-- view's subqueries by member) costs as much, and an UPDATE of member rows outside the
-- marking function (a leave, a mute) spent 0.4 s compiling its trigger's INSERT.
-- Transition tables have no statistics, and a merge join would sort both sides (30 ms of a
-- read-all of 10,000 messages, against 10 ms for a hash join). Every other lookup in them is
-- by key in a subquery, so no other join can scan a table.

-- message.created: one event per chat and sender of an INSERT statement. The event of one
-- message (every send of the service: a chat appears once in a call) carries its thread
-- ("threadId", null on the main timeline) and whom it mentions: "mentions", the members it
-- named, and "mentionsAll": true when it mentioned everyone (not the list of every member,
-- which would make the event grow with the group).
CREATE OR REPLACE FUNCTION receipts.record_messages_created() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF receipts.importing() THEN  -- an import writes one chat.imported a chat instead
        RETURN NULL;
    END IF;
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, message_ids, data, audience_version)
    SELECT created.tenant_id, nextval('receipts.event_ids'), pg_current_xact_id(), 'message.created',
           created.chat_id, created.sender_id, created.message_ids,
           CASE WHEN cardinality(created.message_ids) > 1 THEN '{}'::jsonb
                WHEN created.mentions_all
                THEN jsonb_build_object('threadId', created.thread_id, 'mentions', created.mentions, 'mentionsAll', true)
                ELSE jsonb_build_object('threadId', created.thread_id, 'mentions', created.mentions) END,
           (SELECT chat.audience_version FROM receipts.chats AS chat
            WHERE chat.tenant_id = created.tenant_id AND chat.chat_id = created.chat_id)
    FROM (
        SELECT tenant_id, chat_id, sender_id, array_agg(message_id ORDER BY seq) AS message_ids,
               (array_agg(to_jsonb(mentions)))[1] AS mentions, bool_or(mentions_all) AS mentions_all,
               (array_agg(thread_id))[1] AS thread_id
        FROM inserted GROUP BY tenant_id, chat_id, sender_id ORDER BY tenant_id, chat_id, sender_id
    ) AS created;
    IF FOUND THEN
        PERFORM receipts.wake_listeners();
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION receipts.record_messages_created() IS 'Trigger: message.created events for inserted messages.';

-- receipt.read / receipt.delivered: the arrays of a chunk row only grow by appending, so what
-- a statement added is each row's new tail. One event per chat and user; a delivery that
-- came with a read (same user, same message) is part of the read, not an event of its own;
-- hidden reads (hidden_read_by) make no receipt event at all. The new tails are expanded
-- with unnest in the select list (in place, ProjectSet), not a function scan per row.
CREATE OR REPLACE FUNCTION receipts.record_receipts() RETURNS trigger
LANGUAGE plpgsql SET enable_mergejoin = off SET enable_nestloop = off SET enable_hashjoin = on SET jit = off AS $$
BEGIN
    IF receipts.importing() THEN  -- an import writes one chat.imported a chat instead
        RETURN NULL;
    END IF;
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, message_ids, audience_version)
    SELECT change.tenant_id, nextval('receipts.event_ids'), pg_current_xact_id(), change.type,
           change.chat_id, change.user_id, change.message_ids,
           (SELECT chat.audience_version FROM receipts.chats AS chat
            WHERE chat.tenant_id = change.tenant_id AND chat.chat_id = change.chat_id)
    FROM (
        WITH added AS (
            SELECT after.tenant_id, after.chat_id, after.message_id, after.seq,
                   after.read_by[cardinality(before.read_by) + 1:] AS new_readers,
                   after.delivered_to[cardinality(before.delivered_to) + 1:] AS new_deliveries
            FROM updated_after AS after
            JOIN updated_before AS before USING (tenant_id, chat_id, seq, chunk)
        ),
        receipts AS (
            SELECT tenant_id, chat_id, message_id, seq, unnest(new_readers) AS user_id, 'receipt.read' AS type
            FROM added
            UNION ALL
            SELECT tenant_id, chat_id, message_id, seq, receiver, 'receipt.delivered'
            FROM (SELECT tenant_id, chat_id, message_id, seq, unnest(new_deliveries) AS receiver, new_readers
                  FROM added WHERE new_deliveries <> '{}') AS delivered
            WHERE NOT (receiver = ANY (new_readers))
        )
        SELECT tenant_id, chat_id, user_id, type, array_agg(message_id ORDER BY seq) AS message_ids
        FROM receipts GROUP BY tenant_id, chat_id, user_id, type
        ORDER BY tenant_id, chat_id, user_id, type
    ) AS change;
    IF FOUND THEN
        PERFORM receipts.wake_listeners();
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION receipts.record_receipts() IS 'Trigger: receipt.read / receipt.delivered events for what a statement appended to receipt chunks.';

-- unread.changed: when a member's own action changed their count or mark (a read, marking
-- unread, leaving) or their total (muting or unmuting the chat), to that user's devices,
-- with the new count and unread mentions
-- (receipts.member_unread, by key: the statement's changes are visible to its AFTER trigger),
-- and for a read whose replies were of one thread (chat_members.last_read_thread), that
-- thread's new counts.
CREATE OR REPLACE FUNCTION receipts.record_unread_changes() RETURNS trigger
LANGUAGE plpgsql SET enable_nestloop = off SET enable_mergejoin = off SET enable_hashjoin = on SET jit = off AS $$
BEGIN
    IF receipts.importing() THEN  -- an import writes one chat.imported a chat instead
        RETURN NULL;
    END IF;
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, data, audience)
    SELECT changed.tenant_id, nextval('receipts.event_ids'), pg_current_xact_id(), 'unread.changed',
           changed.chat_id, changed.user_id,
           -- One subquery by key (no join: this function turns nested loops off); for a read
           -- in one thread, that thread's counts (receipts.unread_in_thread).
           (SELECT jsonb_build_object('unreadCount', unread.unread_count, 'mentions', unread.unread_mentions,
                                      'markedUnread', changed.marked_unread)
            FROM receipts.member_unread AS unread
            WHERE unread.tenant_id = changed.tenant_id AND unread.chat_id = changed.chat_id
              AND unread.user_id = changed.user_id)
           || CASE WHEN changed.read_thread IS NULL THEN '{}'::jsonb ELSE (
                  SELECT jsonb_build_object('threadId', changed.read_thread, 'threadUnreadCount', thread.unread,
                                            'threadMentions', thread.mentions)
                  FROM receipts.unread_in_thread(changed.tenant_id, changed.chat_id, changed.user_id, changed.read_thread)
                      AS thread) END,
           ARRAY[changed.user_id::text]
    FROM (
        -- last_read_thread: the thread of a read that marked something (last_read_at moved).
        SELECT after.tenant_id, after.chat_id, after.user_id, after.marked_unread,
               CASE WHEN after.last_read_at IS DISTINCT FROM before.last_read_at THEN after.last_read_thread END AS read_thread
        FROM updated_after AS after
        JOIN updated_before AS before USING (tenant_id, chat_id, user_id)
        WHERE after.read_seq <> before.read_seq
           OR after.marked_unread <> before.marked_unread
           OR after.last_read_at IS DISTINCT FROM before.last_read_at
           OR (after.left_at IS NOT NULL AND before.left_at IS NULL)
           OR after.muted <> before.muted
        ORDER BY after.tenant_id, after.chat_id, after.user_id
        OFFSET 0
    ) AS changed;
    IF FOUND THEN
        PERFORM receipts.wake_listeners();
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION receipts.record_unread_changes() IS 'Trigger: unread.changed events for members whose count or mark changed.';

-- Abandoned event ids (see sql/functions/events.sql), and the event history (see
-- sql/functions/histories.sql). The common path, per event row at commit: the share lock (a
-- local counter after the first row of a transaction), the WAL timeline against the one this
-- session last checked (a setting), and one read of the horizon. Invoker's rights and no
-- SET clause: both would cost on every row. When the timeline is not the one checked (the
-- session's first event, or the server was promoted), receipts.enter_event_history looks
-- and, on a new timeline, begins a new history, which raises the horizon above every id this
-- transaction may hold: so it reads the horizon after that.
CREATE OR REPLACE FUNCTION receipts.renumber_abandoned_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock_shared(8242555388271095923);
    IF pg_catalog.current_setting('receipts.event_history_timeline', true)
        IS DISTINCT FROM pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8) THEN
        PERFORM receipts.enter_event_history();
    END IF;
    IF NEW.event_id <= (SELECT horizon.last_value FROM receipts.abandoned_event_ids AS horizon) THEN
        PERFORM receipts.renumber_abandoned_event(NEW.tenant_id, NEW.event_id);
    END IF;
    RETURN NULL;
END;
$$;
COMMENT ON FUNCTION receipts.renumber_abandoned_events() IS
    'Trigger at commit: events whose ids the hub abandoned meanwhile, or that were taken before a new event history began, move to fresh ids (see sql/functions/events.sql and histories.sql).';

DROP TRIGGER IF EXISTS record_messages_created ON receipts.messages;
CREATE TRIGGER record_messages_created
    AFTER INSERT ON receipts.messages
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION receipts.record_messages_created();

DROP TRIGGER IF EXISTS record_receipts ON receipts.receipt_chunks;
CREATE TRIGGER record_receipts
    AFTER UPDATE ON receipts.receipt_chunks
    REFERENCING OLD TABLE AS updated_before NEW TABLE AS updated_after
    FOR EACH STATEMENT EXECUTE FUNCTION receipts.record_receipts();

DROP TRIGGER IF EXISTS record_unread_changes ON receipts.chat_members;
CREATE TRIGGER record_unread_changes
    AFTER UPDATE ON receipts.chat_members
    REFERENCING OLD TABLE AS updated_before NEW TABLE AS updated_after
    FOR EACH STATEMENT EXECUTE FUNCTION receipts.record_unread_changes();

DROP TRIGGER IF EXISTS renumber_abandoned_events ON receipts.events;
CREATE CONSTRAINT TRIGGER renumber_abandoned_events
    AFTER INSERT ON receipts.events
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION receipts.renumber_abandoned_events();
