-- Webhooks: their definitions (the API's four endpoints), the leases that make one
-- instance at a time deliver each of them, and the record of each attempt. The table is in
-- sql/migrations/0002_webhooks.sql; the delivery itself in the service
-- (Sources/ReceiptsServer/Webhooks).
--
-- What a webhook has delivered is its position alone: receipts.acknowledge_webhook_batch
-- moves it, in the transaction that records the acknowledged batch, and only for the
-- instance that holds the lease. An instance whose lease was taken over (it stalled for
-- longer than the lease) can therefore not move a position any more: its acknowledgement
-- finds another owner and it stops.

-- The events of a tenant after a position that a webhook with the filter p_events still has
-- to deliver, counted up to 100,000 (a receiver down for days must not make each look at
-- the webhook count millions of rows).
CREATE OR REPLACE FUNCTION receipts.webhook_pending_events(p_tenant text, p_after bigint, p_events text[])
RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM (
        SELECT 1 FROM receipts.events AS event
        WHERE event.tenant_id = p_tenant AND event.event_id > p_after AND event.type = ANY (p_events)
        LIMIT 100000
    ) AS pending;
$$;
COMMENT ON FUNCTION receipts.webhook_pending_events(text, bigint, text[]) IS
    'Events of the tenant after a webhook''s position that its filter takes (at most 100,000 counted): what it has still to deliver.';

-- Creates a webhook at p_position (the service's event hub position in event history
-- p_history: every event up to it committed before this call) with the current snapshot, so
-- that it delivers exactly the events committed after its creation; or replaces the url,
-- filter and secret of an existing one, keeping its position. At most p_maximum webhooks per
-- tenant. "history" (nothing written) when the database is no longer in p_history (a
-- failover the hub has not followed yet: the caller tries again).
CREATE OR REPLACE FUNCTION receipts.put_webhook(
    p_tenant text, p_webhook text, p_url text, p_events text[], p_secret text, p_position bigint, p_history text,
    p_maximum integer)
RETURNS TABLE (outcome text, created_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_created_at timestamptz;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    IF receipts.current_event_history() <> p_history THEN
        RETURN QUERY SELECT 'history'::text, NULL::timestamptz;
        RETURN;
    END IF;
    -- Serialises the tenant's PUTs, so that two concurrent creations cannot both pass the
    -- count below.
    PERFORM 1 FROM receipts.tenants AS tenant WHERE tenant.tenant_id = p_tenant FOR UPDATE;
    UPDATE receipts.webhooks AS webhook
    SET url = p_url, events = p_events, secret = p_secret
    WHERE webhook.tenant_id = p_tenant AND webhook.webhook_id = p_webhook
    RETURNING webhook.created_at INTO v_created_at;
    IF FOUND THEN
        RETURN QUERY SELECT 'replaced'::text, v_created_at;
        RETURN;
    END IF;
    IF (SELECT count(*) FROM receipts.webhooks AS webhook WHERE webhook.tenant_id = p_tenant) >= p_maximum THEN
        RETURN QUERY SELECT 'limit'::text, NULL::timestamptz;
        RETURN;
    END IF;
    INSERT INTO receipts.webhooks AS webhook
        (tenant_id, webhook_id, url, events, secret, delivered_through, position_history, committed_before)
    VALUES (p_tenant, p_webhook, p_url, p_events, p_secret, p_position, p_history, pg_current_snapshot())
    RETURNING webhook.created_at INTO v_created_at;
    RETURN QUERY SELECT 'created'::text, v_created_at;
END;
$$;
COMMENT ON FUNCTION receipts.put_webhook(text, text, text, text[], text, bigint, text, integer) IS
    'Creates a webhook (delivering the events committed from now on) or replaces its url, filter and secret, keeping its position; "limit" when the tenant has p_maximum already, "history" when the database is no longer in the event history of p_position.';

-- One webhook (p_webhook) or all of the tenant's (p_webhook NULL), with where delivery stands.
CREATE OR REPLACE FUNCTION receipts.webhooks_of(p_tenant text, p_webhook text)
RETURNS TABLE (webhook_id text, url text, events text[], created_at timestamptz, delivered_through bigint,
               position_history text, pending bigint, failures integer, last_error text, last_attempt_at timestamptz,
               next_attempt_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    RETURN QUERY
    SELECT webhook.webhook_id::text, webhook.url, webhook.events, webhook.created_at, webhook.delivered_through,
           webhook.position_history::text,
           receipts.webhook_pending_events(p_tenant, webhook.delivered_through, webhook.events), webhook.failures,
           webhook.last_error, webhook.last_attempt_at, webhook.next_attempt_at
    FROM receipts.webhooks AS webhook
    WHERE webhook.tenant_id = p_tenant AND (p_webhook IS NULL OR webhook.webhook_id = p_webhook)
    ORDER BY webhook.webhook_id;
END;
$$;
COMMENT ON FUNCTION receipts.webhooks_of(text, text) IS
    'A tenant''s webhooks (one, or all when p_webhook is null) with their delivery state; never the secret.';

CREATE OR REPLACE FUNCTION receipts.delete_webhook(p_tenant text, p_webhook text)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    DELETE FROM receipts.webhooks AS webhook WHERE webhook.tenant_id = p_tenant AND webhook.webhook_id = p_webhook;
    RETURN FOUND;
END;
$$;
COMMENT ON FUNCTION receipts.delete_webhook(text, text) IS 'Deletes a webhook; false when there was none. Its deliveries stop (the lease goes with the row).';

-- Leases, across tenants: runs as the owner, beyond row-level security, and returns ids only.
-- Renews every lease p_owner holds, takes free and expired ones (SKIP LOCKED: two instances
-- claiming at once take different webhooks, neither waits), up to p_maximum in all, and
-- returns the webhooks p_owner now holds. An instance calls it every few seconds: a lease it
-- stopped renewing (a crash, a freeze) is taken over by another once it has expired.
CREATE OR REPLACE FUNCTION receipts.claim_webhooks(p_owner text, p_lease interval, p_maximum integer)
RETURNS TABLE (tenant_id text, webhook_id text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    v_held integer;
BEGIN
    UPDATE receipts.webhooks AS webhook SET lease_expires_at = now() + p_lease WHERE webhook.lease_owner = p_owner;
    GET DIAGNOSTICS v_held = ROW_COUNT;
    IF v_held < p_maximum THEN
        UPDATE receipts.webhooks AS webhook
        SET lease_owner = p_owner, lease_expires_at = now() + p_lease
        FROM (
            SELECT free.tenant_id, free.webhook_id FROM receipts.webhooks AS free
            WHERE free.lease_expires_at IS NULL OR free.lease_expires_at <= now()
            ORDER BY free.lease_expires_at NULLS FIRST
            LIMIT p_maximum - v_held
            FOR UPDATE SKIP LOCKED
        ) AS claimed
        WHERE webhook.tenant_id = claimed.tenant_id AND webhook.webhook_id = claimed.webhook_id;
    END IF;
    RETURN QUERY
    SELECT webhook.tenant_id::text, webhook.webhook_id::text FROM receipts.webhooks AS webhook
    WHERE webhook.lease_owner = p_owner;
END;
$$;
COMMENT ON FUNCTION receipts.claim_webhooks(text, interval, integer) IS
    'Renews the webhook leases an instance holds, takes free and expired ones (up to p_maximum held), and returns what it holds.';
REVOKE ALL ON FUNCTION receipts.claim_webhooks(text, interval, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.claim_webhooks(text, interval, integer) TO receipts_service;

-- On a graceful stop: the leases go back at once, so another instance takes over at its next
-- claim instead of after the lease expired.
CREATE OR REPLACE FUNCTION receipts.release_webhooks(p_owner text)
RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_released integer;
BEGIN
    UPDATE receipts.webhooks AS webhook SET lease_owner = NULL, lease_expires_at = NULL WHERE webhook.lease_owner = p_owner;
    GET DIAGNOSTICS v_released = ROW_COUNT;
    RETURN v_released;
END;
$$;
COMMENT ON FUNCTION receipts.release_webhooks(text) IS 'Gives back every webhook lease an instance holds (graceful shutdown).';
REVOKE ALL ON FUNCTION receipts.release_webhooks(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION receipts.release_webhooks(text) TO receipts_service;

-- Before each attempt: reads what the attempt uses (a PUT applies from the next attempt),
-- checking that p_owner still holds the lease. The dispatcher renews its leases every few
-- seconds (receipts.claim_webhooks), so this writes only when the lease has less than half of
-- p_lease left (the dispatcher could not reach the database): an attempt then never starts on
-- a lease about to lapse, and the common case is a read, with no commit to flush.
-- No row when the webhook was deleted or another instance holds it.
CREATE OR REPLACE FUNCTION receipts.begin_webhook_attempt(p_tenant text, p_webhook text, p_owner text, p_lease interval)
RETURNS TABLE (url text, events text[], secret text, delivered_through bigint, position_history text, committed_before text,
               failures integer, next_attempt_at timestamptz, recorded boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    RETURN QUERY
    SELECT webhook.url, webhook.events, webhook.secret, webhook.delivered_through, webhook.position_history::text,
           webhook.committed_before::text, webhook.failures, webhook.next_attempt_at, true
    FROM receipts.webhooks AS webhook
    WHERE webhook.tenant_id = p_tenant AND webhook.webhook_id = p_webhook AND webhook.lease_owner = p_owner
      AND webhook.lease_expires_at > now() + p_lease / 2;
    IF FOUND THEN
        RETURN;
    END IF;
    RETURN QUERY
    UPDATE receipts.webhooks AS webhook SET lease_expires_at = now() + p_lease
    WHERE webhook.tenant_id = p_tenant AND webhook.webhook_id = p_webhook AND webhook.lease_owner = p_owner
    RETURNING webhook.url, webhook.events, webhook.secret, webhook.delivered_through, webhook.position_history::text,
              webhook.committed_before::text, webhook.failures, webhook.next_attempt_at, true;
END;
$$;
COMMENT ON FUNCTION receipts.begin_webhook_attempt(text, text, text, interval) IS
    'Reads a webhook''s url, filter, secret, position and retry state for the instance holding its lease (renewing a lease with less than half left); no row when it is gone or held by another.';

-- An acknowledged batch (p_delivered), or events the filter skips (not p_delivered): the
-- position moves to p_position of event history p_history, never back within a history,
-- and the failures of the batch are forgotten. When the database is no longer in p_history
-- (a failover since the events were read), nothing moves: the row comes back with recorded
-- false, and the delivery starts again from the position in the database.
-- Like receipts.begin_webhook_attempt it renews the lease and returns what the next attempt
-- uses: a delivery that sends its next batch right away (under load) needs no other round
-- trip, and reads the webhook as late as a separate call would. No row when p_owner lost the
-- lease or the webhook is gone: nothing moved.
-- Its commit is not waited for on disk (synchronous_commit off, this transaction only): one
-- acknowledgement per batch must not queue behind the write path's commits for a WAL flush,
-- and an acknowledgement lost in a crash of PostgreSQL costs only that batch sent again,
-- which at-least-once delivery allows (receivers drop repeats by event id).
CREATE OR REPLACE FUNCTION receipts.acknowledge_webhook_batch(
    p_tenant text, p_webhook text, p_owner text, p_position bigint, p_history text, p_delivered boolean, p_lease interval)
RETURNS TABLE (url text, events text[], secret text, delivered_through bigint, position_history text, committed_before text,
               failures integer, next_attempt_at timestamptz, recorded boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    IF receipts.current_event_history() <> p_history THEN
        RETURN QUERY
        SELECT webhook.url, webhook.events, webhook.secret, webhook.delivered_through, webhook.position_history::text,
               webhook.committed_before::text, webhook.failures, webhook.next_attempt_at, false
        FROM receipts.webhooks AS webhook
        WHERE webhook.tenant_id = p_tenant AND webhook.webhook_id = p_webhook AND webhook.lease_owner = p_owner;
        RETURN;
    END IF;
    PERFORM set_config('synchronous_commit', 'off', true);
    RETURN QUERY
    UPDATE receipts.webhooks AS webhook
    SET delivered_through = CASE WHEN webhook.position_history = p_history
                                 THEN greatest(webhook.delivered_through, p_position) ELSE p_position END,
        position_history = p_history,
        failures = CASE WHEN p_delivered THEN 0 ELSE webhook.failures END,
        last_error = CASE WHEN p_delivered THEN NULL ELSE webhook.last_error END,
        next_attempt_at = CASE WHEN p_delivered THEN NULL ELSE webhook.next_attempt_at END,
        last_attempt_at = CASE WHEN p_delivered THEN now() ELSE webhook.last_attempt_at END,
        lease_expires_at = now() + p_lease
    WHERE webhook.tenant_id = p_tenant AND webhook.webhook_id = p_webhook AND webhook.lease_owner = p_owner
    RETURNING webhook.url, webhook.events, webhook.secret, webhook.delivered_through, webhook.position_history::text,
              webhook.committed_before::text, webhook.failures, webhook.next_attempt_at, true;
END;
$$;
COMMENT ON FUNCTION receipts.acknowledge_webhook_batch(text, text, text, bigint, text, boolean, interval) IS
    'Moves a webhook''s position past an acknowledged (or filtered-out) batch and renews the lease, for the lease holder only; returns what the next attempt uses (recorded false, nothing moved, when the database has gone on to another event history), no row when it lost the lease or the webhook is gone.';

CREATE OR REPLACE FUNCTION receipts.record_webhook_failure(
    p_tenant text, p_webhook text, p_owner text, p_error text, p_retry_after interval)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_failures integer;
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    UPDATE receipts.webhooks AS webhook
    SET failures = webhook.failures + 1, last_error = left(p_error, 500), last_attempt_at = now(),
        next_attempt_at = now() + p_retry_after
    WHERE webhook.tenant_id = p_tenant AND webhook.webhook_id = p_webhook AND webhook.lease_owner = p_owner
    RETURNING webhook.failures INTO v_failures;
    RETURN v_failures;
END;
$$;
COMMENT ON FUNCTION receipts.record_webhook_failure(text, text, text, text, interval) IS
    'Records a failed attempt (error text, when the next one is due) for the lease holder; null when it lost the lease or the webhook is gone.';

CREATE OR REPLACE FUNCTION receipts.webhook_pending(p_tenant text, p_webhook text)
RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    RETURN (
        SELECT receipts.webhook_pending_events(p_tenant, webhook.delivered_through, webhook.events)
        FROM receipts.webhooks AS webhook WHERE webhook.tenant_id = p_tenant AND webhook.webhook_id = p_webhook
    );
END;
$$;
COMMENT ON FUNCTION receipts.webhook_pending(text, text) IS 'How many events a webhook has still to deliver (at most 100,000 counted), for its lag metric.';
