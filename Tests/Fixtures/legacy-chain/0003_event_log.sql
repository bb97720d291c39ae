-- 0003: the event log. Statement-level triggers turn every receipt-changing statement into
-- events (one per chat and user per statement) and wake the service's listener.
--
-- Ordering without a lock: event ids come from one sequence, so writers never wait for
-- each other, but transactions commit out of order: id 7 may be visible while id 6 is
-- still in flight. Each event records its transaction (taken before its id), and readers
-- (the service's EventHub) read with pg_current_snapshot():
--   * the ids up to a position P are complete once every id <= P is either visible or
--     provably never will be;
--   * a missing id g below a visible one was taken by a transaction that had its id, and
--     was running or already aborted, when the reader's snapshot was taken. The snapshot
--     lists running transactions only below its xmax, so the reader asks for every
--     transaction running right after the read (receipts.running_transactions: the
--     transaction-id locks of pg_locks). Once all of those have finished, g either became
--     visible or never will: the reader moves past it.
-- So a stream position means "every event up to here", and a client that resumes from it
-- gets each later event exactly once (the design's out-of-order-commit pitfall). This is
-- PgQ's snapshot rule applied per gap; unlike a per-tenant counter row locked until commit,
-- it lets one tenant's writers commit in parallel (group commit).

CREATE SEQUENCE receipts.event_ids AS bigint;
COMMENT ON SEQUENCE receipts.event_ids IS 'Event ids, shared by all tenants; stream positions are these ids.';
GRANT USAGE ON SEQUENCE receipts.event_ids TO receipts_service;

CREATE TABLE receipts.event_retention (
    tenant_id      receipts.identifier PRIMARY KEY REFERENCES receipts.tenants ON DELETE CASCADE,
    pruned_through bigint NOT NULL CHECK (pruned_through >= 0)
);
COMMENT ON TABLE receipts.event_retention IS
    'Per tenant, the newest event id that retention deleted: a stream can resume only from a later position.';
ALTER TABLE receipts.event_retention ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON receipts.event_retention
    USING (tenant_id = current_setting('receipts.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('receipts.tenant_id', true));
GRANT SELECT ON receipts.event_retention TO receipts_service;

-- Each trigger below writes its events with one INSERT ... SELECT: ids from the sequence
-- in event order, the transaction id beside each (the statement that fired the trigger
-- changed rows, so the transaction already has its id, taken before any event id), and
-- then one NOTIFY. The payload is empty: the listener reads the rows, and identical
-- notifications of one transaction are folded into one.

CREATE FUNCTION receipts.chat_audience(p_tenant text, p_chat text) RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (
        SELECT coalesce(array_agg(member.user_id ORDER BY member.user_id), '{}')
        FROM receipts.chat_members AS member
        WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.left_at IS NULL
    );
END;
$$;
COMMENT ON FUNCTION receipts.chat_audience(text, text) IS 'The current members of a chat: who sees its events.';

-- message.created: one event per chat and sender of an INSERT statement.
CREATE FUNCTION receipts.record_messages_created() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, message_ids, audience)
    SELECT created.tenant_id, nextval('receipts.event_ids'), pg_current_xact_id(), 'message.created',
           created.chat_id, created.sender_id, created.message_ids,
           receipts.chat_audience(created.tenant_id, created.chat_id)
    FROM (
        SELECT tenant_id, chat_id, sender_id, array_agg(message_id ORDER BY seq) AS message_ids
        FROM inserted GROUP BY tenant_id, chat_id, sender_id ORDER BY tenant_id, chat_id, sender_id
    ) AS created;
    IF FOUND THEN
        PERFORM pg_notify('receipts_events', '');
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER record_messages_created
    AFTER INSERT ON receipts.messages
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION receipts.record_messages_created();

-- receipt.read / receipt.delivered: the arrays only grow by appending, so what a statement
-- added is each row's new tail. One event per chat and user; a delivery that came with a
-- read (same user, same message) is part of the read, not an event of its own; hidden
-- reads (hidden_read_by) make no receipt event at all.
CREATE FUNCTION receipts.record_receipts() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, message_ids, audience)
    SELECT change.tenant_id, nextval('receipts.event_ids'), pg_current_xact_id(), change.type,
           change.chat_id, change.user_id, change.message_ids,
           receipts.chat_audience(change.tenant_id, change.chat_id)
    FROM (
        WITH added AS (
            SELECT after.tenant_id, after.chat_id, after.message_id, after.seq,
                   after.read_by[cardinality(before.read_by) + 1:] AS new_readers,
                   after.delivered_to[cardinality(before.delivered_to) + 1:] AS new_deliveries
            FROM updated_after AS after
            JOIN updated_before AS before USING (tenant_id, chat_id, message_id)
        ),
        receipts AS (
            SELECT tenant_id, chat_id, message_id, seq, reader AS user_id, 'receipt.read' AS type
            FROM added, unnest(new_readers) AS reader
            UNION ALL
            SELECT tenant_id, chat_id, message_id, seq, receiver, 'receipt.delivered'
            FROM added, unnest(new_deliveries) AS receiver
            WHERE NOT (receiver = ANY (new_readers))
        )
        SELECT tenant_id, chat_id, user_id, type, array_agg(message_id ORDER BY seq) AS message_ids
        FROM receipts GROUP BY tenant_id, chat_id, user_id, type
        ORDER BY tenant_id, chat_id, user_id, type
    ) AS change;
    IF FOUND THEN
        PERFORM pg_notify('receipts_events', '');
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER record_receipts
    AFTER UPDATE ON receipts.messages
    REFERENCING OLD TABLE AS updated_before NEW TABLE AS updated_after
    FOR EACH STATEMENT EXECUTE FUNCTION receipts.record_receipts();

-- unread.changed: when a member's own action changed their count or mark (a read, marking
-- unread, leaving), to that user's devices, with the new count.
CREATE FUNCTION receipts.record_unread_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, data, audience)
    SELECT after.tenant_id, nextval('receipts.event_ids'), pg_current_xact_id(), 'unread.changed',
           after.chat_id, after.user_id,
           jsonb_build_object('unreadCount', receipts.unread_count(after.tenant_id, after.chat_id, after.user_id),
                              'markedUnread', after.marked_unread),
           ARRAY[after.user_id::text]
    FROM updated_after AS after
    JOIN updated_before AS before USING (tenant_id, chat_id, user_id)
    WHERE after.read_seq <> before.read_seq
       OR after.marked_unread <> before.marked_unread
       OR after.last_read_at IS DISTINCT FROM before.last_read_at
       OR (after.left_at IS NOT NULL AND before.left_at IS NULL)
    ORDER BY after.tenant_id, after.chat_id, after.user_id;
    IF FOUND THEN
        PERFORM pg_notify('receipts_events', '');
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER record_unread_changes
    AFTER UPDATE ON receipts.chat_members
    REFERENCING OLD TABLE AS updated_before NEW TABLE AS updated_after
    FOR EACH STATEMENT EXECUTE FUNCTION receipts.record_unread_changes();

COMMENT ON FUNCTION receipts.record_messages_created() IS 'Trigger: message.created events for inserted messages.';
COMMENT ON FUNCTION receipts.record_receipts() IS 'Trigger: receipt.read / receipt.delivered events for what a statement appended.';
COMMENT ON FUNCTION receipts.record_unread_changes() IS 'Trigger: unread.changed events for members whose count or mark changed.';

-- Reading the log ---------------------------------------------------------------------------

-- The listener reads every tenant's events (it relays to all of them), so this runs as the
-- owner, beyond row-level security. Always one row: the snapshot the read used, then the
-- events (null columns when there are none).
CREATE FUNCTION receipts.events_since(p_after bigint, p_limit integer)
RETURNS TABLE (snapshot text, event_id bigint, transaction_id bigint, tenant_id text, type text, chat_id text,
               user_id text, message_ids text[], data jsonb, audience text[], occurred_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT pg_current_snapshot()::text, event.event_id, event.transaction_id::text::bigint, event.tenant_id::text,
           event.type, event.chat_id::text, event.user_id::text, event.message_ids, event.data, event.audience,
           event.occurred_at
    FROM (SELECT) AS one
    LEFT JOIN LATERAL (
        SELECT * FROM receipts.events AS event WHERE event.event_id > p_after ORDER BY event.event_id LIMIT p_limit
    ) AS event ON true
    ORDER BY event.event_id;
END;
$$;
COMMENT ON FUNCTION receipts.events_since(bigint, integer) IS
    'Every tenant''s visible events after a position, in id order, with the snapshot that decided what is visible.';
REVOKE ALL ON FUNCTION receipts.events_since(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.events_since(bigint, integer) TO receipts_service;

-- Every transaction that has an id and is running now, as xid8 (pg_locks shows 32-bit
-- ids: the epoch comes from the current snapshot; running ids are within 2^31 of it).
CREATE FUNCTION receipts.running_transactions()
RETURNS bigint[]
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    WITH current AS (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS next),
    running AS (
        SELECT ((current.next >> 32) << 32) + lock.transactionid::text::bigint AS candidate, current.next
        FROM pg_locks AS lock, current
        WHERE lock.locktype = 'transactionid' AND lock.mode = 'ExclusiveLock' AND lock.granted
    )
    SELECT coalesce(array_agg(DISTINCT CASE
               WHEN candidate > next + 2147483648 THEN candidate - 4294967296
               WHEN candidate < next - 2147483648 THEN candidate + 4294967296
               ELSE candidate END), '{}')
    FROM running;
$$;
COMMENT ON FUNCTION receipts.running_transactions() IS
    'Every running transaction that has an id (from pg_locks), as xid8: what a missing event id may still be waiting for.';

-- Where the hub starts: the newest visible event, and the snapshot that decided it (the
-- hub then asks receipts.running_transactions what may still commit a lower id).
CREATE FUNCTION receipts.newest_event()
RETURNS TABLE (snapshot text, newest_visible bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_current_snapshot()::text, coalesce((SELECT max(event.event_id) FROM receipts.events AS event), 0);
$$;
COMMENT ON FUNCTION receipts.newest_event() IS
    'The newest visible event id (0 when there is none), with the snapshot it was read in.';
REVOKE ALL ON FUNCTION receipts.newest_event() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.newest_event() TO receipts_service;

-- Where a stream of a tenant starts: the snapshot of the moment (events committed by then
-- are not sent to a new stream), and which positions it may resume from.
CREATE FUNCTION receipts.stream_position(p_tenant text)
RETURNS TABLE (snapshot text, last_allocated bigint, pruned_through bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_current_snapshot()::text,
           coalesce(pg_sequence_last_value('receipts.event_ids'), 0),
           coalesce((SELECT retention.pruned_through FROM receipts.event_retention AS retention
                     WHERE retention.tenant_id = p_tenant), 0);
$$;
COMMENT ON FUNCTION receipts.stream_position(text) IS
    'For a new stream: the current snapshot, the last event id handed out, and the newest id of the tenant that retention deleted.';
REVOKE ALL ON FUNCTION receipts.stream_position(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.stream_position(text) TO receipts_service;

CREATE FUNCTION receipts.events_after(p_tenant text, p_after bigint, p_through bigint, p_limit integer)
RETURNS TABLE (event_id bigint, transaction_id bigint, tenant_id text, type text, chat_id text, user_id text,
               message_ids text[], data jsonb, audience text[], occurred_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    RETURN QUERY
    SELECT event.event_id, event.transaction_id::text::bigint, event.tenant_id::text, event.type, event.chat_id::text,
           event.user_id::text, event.message_ids, event.data, event.audience, event.occurred_at
    FROM receipts.events AS event
    WHERE event.tenant_id = p_tenant AND event.event_id > p_after AND event.event_id <= p_through
    ORDER BY event.event_id
    LIMIT p_limit;
END;
$$;
COMMENT ON FUNCTION receipts.events_after(text, bigint, bigint, integer) IS
    'A tenant''s events in (p_after, p_through], oldest first: what a resuming stream replays.';

-- Retention, across tenants: runs as the function's owner, beyond row-level security.
CREATE FUNCTION receipts.prune_events(p_retention interval)
RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH pruned AS (
        DELETE FROM receipts.events WHERE occurred_at < now() - p_retention RETURNING tenant_id, event_id
    ),
    recorded AS (
        INSERT INTO receipts.event_retention AS retention (tenant_id, pruned_through)
        SELECT tenant_id, max(event_id) FROM pruned GROUP BY tenant_id
        ON CONFLICT (tenant_id) DO UPDATE
            SET pruned_through = greatest(retention.pruned_through, excluded.pruned_through)
        RETURNING 1
    )
    SELECT count(*) FROM pruned;
$$;
COMMENT ON FUNCTION receipts.prune_events(interval) IS
    'Deletes events older than the retention period (default 7 days in the service) and records, per tenant, the newest id it deleted; returns how many.';
REVOKE ALL ON FUNCTION receipts.prune_events(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.prune_events(interval) TO receipts_service;
