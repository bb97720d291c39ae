-- 0013: plans that fit every call: generic plans for the keyed functions, and triggers whose
-- join of a statement's old and new rows cannot turn quadratic.
--
-- 1. A read-all after small writes took seconds. The receipt and unread triggers join the
--    statement's old rows to its new ones (transition tables). PL/pgSQL plans such a
--    statement once per session, sized by the rows of its first run, and keeps the plan
--    until an ANALYZE of the tables it reads: a session whose first run updated one message
--    got a nested loop, and kept it for a read-all. Measured in one session: a read of one
--    message, then a read of 5,000 in another chat, 3.6 s (25 million row comparisons in
--    record_receipts), and 10,000 took 11.4-11.9 s. (The bench had not shown it: it runs
--    VACUUM ANALYZE before each figure, which throws every cached plan away.) Both triggers
--    now join those rows by hashing, whatever the first run's size, and record_unread_changes
--    reads the chat's last_seq by key in a subquery, so no join of it scans chats.
--
-- 2. Some statements were planned again on every call. PostgreSQL replans a statement of a
--    function with its call's values while that plan looks cheaper than the generic one
--    (made without them), and for a lookup by key it often does: a message id array of one
--    element against the generic plan's guess of ten, a seq range it can size. So
--    mark_read planned its UPDATE by id on every call of the bench's idle figure (0.09 ms),
--    and that UPDATE and its first-unread query on every call of the bench's figure for the
--    function alone (0.12 and 0.11 ms of a 1.1 ms call; pg_stat_statements with
--    track_planning), the event hub's events_since its query on 73 % of calls (0.17 ms
--    each), and, with some statistics, unread_of its count on every call (twice per read).
--    Every statement of these functions is a lookup by key or a range of one chat's
--    messages by seq, for which the generic plan (an index scan) is the right one whatever
--    the values, so they now use it.
--    pgbench, one client, on a database whose statistics say readers never send, interleaved
--    rounds: one mark_read a call went from 1,116-1,252 calls a second to 1,476-1,620 (seven
--    rounds), batches of ten reads (mark_read_each) from 425-470 to 616-669 (five). The
--    bench's figures moved within their noise (BENCHMARKS.md, fourth round).
--
-- A later CREATE OR REPLACE of one of these functions drops the settings given here by
-- ALTER FUNCTION: restate them in its header (PlanReuseTests checks).

ALTER FUNCTION receipts.mark_read(text, text, text, text[], text) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION receipts.mark_delivered(text, text, text, text[], text) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION receipts.unread_of(receipts.chat_members, bigint) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION receipts.events_since(bigint, integer) SET plan_cache_mode = force_generic_plan;

-- record_receipts (0011) joins only the two transition tables: with nested loops off (merge
-- joins were already), that join hashes. Hash joins are turned on for it explicitly: a
-- function's settings hold for what it calls, triggers included, and mark_read_each turns
-- them off. (With every join method off, the planner takes a nested loop anyway at a cost of
-- ten billion, and that cost has PostgreSQL compile the statement with JIT on every run:
-- 0.4 s a batch.)
ALTER FUNCTION receipts.record_receipts() SET enable_nestloop = off;
ALTER FUNCTION receipts.record_receipts() SET enable_hashjoin = on;

-- record_unread_changes as in 0010, with the chat's last_seq from a subquery instead of a
-- join, so that the only join left is the one of the transition tables, which hashes.
CREATE OR REPLACE FUNCTION receipts.record_unread_changes() RETURNS trigger
LANGUAGE plpgsql SET enable_nestloop = off SET enable_mergejoin = off SET enable_hashjoin = on AS $$
BEGIN
    INSERT INTO receipts.events (tenant_id, event_id, transaction_id, type, chat_id, user_id, data, audience)
    SELECT after.tenant_id, nextval('receipts.event_ids'), pg_current_xact_id(), 'unread.changed',
           after.chat_id, after.user_id,
           jsonb_build_object(
               'unreadCount', receipts.unread_of(after, (SELECT chat.last_seq FROM receipts.chats AS chat
                                                        WHERE chat.tenant_id = after.tenant_id AND chat.chat_id = after.chat_id)),
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
        PERFORM receipts.wake_listeners();
    END IF;
    RETURN NULL;
END;
$$;
