-- 0003: the event log. Statement-level triggers turn every receipt-changing statement into
-- events (one per chat and user per statement) and wake the service's listener.
--
-- Ordering: each tenant's events are numbered 1, 2, 3, ... by a counter row in
-- receipts.event_streams that the writing transaction updates and keeps locked until it
-- commits. So a tenant's events become visible in id order, gap-free: a reader that asks for
-- "ids after the last one I saw" can never skip an event that commits late. The price is
-- that a tenant's event-writing transactions commit one at a time from their trigger on
-- (other tenants are not affected).

CREATE TABLE receipts.event_streams (
    tenant_id     receipts.identifier PRIMARY KEY REFERENCES receipts.tenants ON DELETE CASCADE,
    last_event_id bigint NOT NULL CHECK (last_event_id >= 0)
);
COMMENT ON TABLE receipts.event_streams IS
    'Per tenant, the id of its newest event. The row stays locked by a writer until it commits, so ids are assigned in commit order.';
ALTER TABLE receipts.event_streams ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON receipts.event_streams
    USING (tenant_id = current_setting('receipts.tenant_id', true))
    WITH CHECK (tenant_id = current_setting('receipts.tenant_id', true));
GRANT SELECT, INSERT, UPDATE ON receipts.event_streams TO receipts_service;

-- Appends events of one tenant (rows of a temporary set) with the next ids and notifies.
CREATE FUNCTION receipts.append_events(
    p_tenant text, p_type text, p_chat text, p_user text, p_message_ids text[], p_data jsonb, p_audience text[])
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_event_id bigint;
BEGIN
    INSERT INTO receipts.event_streams AS stream (tenant_id, last_event_id) VALUES (p_tenant, 1)
    ON CONFLICT (tenant_id) DO UPDATE SET last_event_id = stream.last_event_id + 1
    RETURNING stream.last_event_id INTO v_event_id;
    INSERT INTO receipts.events (tenant_id, event_id, type, chat_id, user_id, message_ids, data, audience)
    VALUES (p_tenant, v_event_id, p_type, p_chat, p_user, p_message_ids, p_data, p_audience);
    -- The payload is only the tenant: the listener reads the rows. Identical payloads of one
    -- transaction are folded into one notification.
    PERFORM pg_notify('receipts_events', p_tenant);
    RETURN v_event_id;
END;
$$;
COMMENT ON FUNCTION receipts.append_events(text, text, text, text, text[], jsonb, text[]) IS
    'Appends one event with the tenant''s next id and notifies receipts_events.';

CREATE FUNCTION receipts.chat_audience(p_tenant text, p_chat text) RETURNS text[]
LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(member.user_id ORDER BY member.user_id), '{}')
    FROM receipts.chat_members AS member
    WHERE member.tenant_id = p_tenant AND member.chat_id = p_chat AND member.left_at IS NULL;
$$;
COMMENT ON FUNCTION receipts.chat_audience(text, text) IS 'The current members of a chat: who sees its events.';

-- message.created: one event per chat and sender of an INSERT statement.
CREATE FUNCTION receipts.record_messages_created() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM receipts.append_events(
        created.tenant_id, 'message.created', created.chat_id, created.sender_id, created.message_ids,
        '{}', receipts.chat_audience(created.tenant_id, created.chat_id))
    FROM (
        SELECT tenant_id, chat_id, sender_id, array_agg(message_id ORDER BY seq) AS message_ids
        FROM inserted GROUP BY tenant_id, chat_id, sender_id ORDER BY tenant_id, chat_id, sender_id
    ) AS created;
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
    PERFORM receipts.append_events(
        change.tenant_id, change.type, change.chat_id, change.user_id, change.message_ids,
        '{}', receipts.chat_audience(change.tenant_id, change.chat_id))
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
    PERFORM receipts.append_events(
        after.tenant_id, 'unread.changed', after.chat_id, after.user_id, '{}',
        jsonb_build_object('unreadCount', receipts.unread_count(after.tenant_id, after.chat_id, after.user_id),
                           'markedUnread', after.marked_unread),
        ARRAY[after.user_id::text])
    FROM updated_after AS after
    JOIN updated_before AS before USING (tenant_id, chat_id, user_id)
    WHERE after.read_seq <> before.read_seq
       OR after.marked_unread <> before.marked_unread
       OR after.last_read_at IS DISTINCT FROM before.last_read_at
       OR (after.left_at IS NOT NULL AND before.left_at IS NULL);
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

CREATE FUNCTION receipts.events_after(p_tenant text, p_after bigint, p_limit integer)
RETURNS TABLE (event_id bigint, type text, chat_id text, user_id text, message_ids text[],
               data jsonb, audience text[], occurred_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    RETURN QUERY
    SELECT event.event_id, event.type, event.chat_id::text, event.user_id::text, event.message_ids,
           event.data, event.audience, event.occurred_at
    FROM receipts.events AS event
    WHERE event.tenant_id = p_tenant AND event.event_id > p_after
    ORDER BY event.event_id
    LIMIT p_limit;
END;
$$;
COMMENT ON FUNCTION receipts.events_after(text, bigint, integer) IS
    'A tenant''s events after a position, oldest first (what a stream replays and relays).';

CREATE FUNCTION receipts.event_positions(p_tenant text)
RETURNS TABLE (last_event_id bigint, oldest_event_id bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    RETURN QUERY SELECT
        coalesce((SELECT stream.last_event_id FROM receipts.event_streams AS stream WHERE stream.tenant_id = p_tenant), 0),
        (SELECT min(event.event_id) FROM receipts.events AS event WHERE event.tenant_id = p_tenant);
END;
$$;
COMMENT ON FUNCTION receipts.event_positions(text) IS
    'The id of a tenant''s newest event and of its oldest retained one (null when none is retained).';

-- Retention, across tenants: runs as the function's owner, beyond row-level security.
CREATE FUNCTION receipts.prune_events(p_retention interval)
RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH pruned AS (
        DELETE FROM receipts.events WHERE occurred_at < now() - p_retention RETURNING 1
    )
    SELECT count(*) FROM pruned;
$$;
COMMENT ON FUNCTION receipts.prune_events(interval) IS
    'Deletes events older than the retention period (default 7 days in the service); returns how many.';
REVOKE ALL ON FUNCTION receipts.prune_events(interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.prune_events(interval) TO receipts_service;
