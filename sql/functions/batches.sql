-- The start of every batched statement (receipts.send_each, receipts.delete_message_each,
-- receipts.mark_read_each), written once. A batch is one statement for many requests of a
-- tenant (a TenantBatcher's call); its items come as arrays of one length, one array position
-- an item.
--
-- Enters the tenant (receipts.enter_tenant) and checks that the item arrays (p_lengths: their
-- cardinalities, p_names: what they hold) are of one length: a caller's mistake, raised with
-- every length, named for p_function. One simple expression, no query: it runs before every
-- batch, a single request's too (a loop over the lengths cost a send 5 % more CPU). An
-- unknown length (a null array) raises nothing.
--
-- p_chats, for a batch whose requests are one per chat (sends, deletes: each takes its chat's
-- next seq, or changes its chat's counts): their chat rows are locked, in chat order, the same
-- in every call, so that two batches over the same chats wait for one another instead of
-- deadlocking. A chat named twice is a caller's mistake (the TenantBatcher keeps a chat's
-- second request for the next batch): raised. Chats of another tenant or of none are
-- skipped (row-level security; the batch answers chat_not_found). One function for both:
-- each call of a PL/pgSQL function costs a send some microseconds.
CREATE OR REPLACE FUNCTION receipts.begin_batch(
    p_function text, p_tenant text, p_names text[], p_lengths integer[], p_chats text[] DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    IF NOT (p_lengths[1] = ALL (p_lengths)) THEN
        RAISE EXCEPTION '%: %', p_function,
            (SELECT string_agg(format('%s %s', item.length, item.name), ', ' ORDER BY item.position)
             FROM unnest(p_lengths, p_names) WITH ORDINALITY AS item(length, name, position));
    END IF;
    IF p_chats IS NOT NULL THEN
        -- (A statement of its own: not for a request alone.)
        IF cardinality(p_chats) > 1 THEN
            IF (SELECT count(DISTINCT chat) FROM unnest(p_chats) AS chat) <> cardinality(p_chats) THEN
                RAISE EXCEPTION '%: a chat appears twice', p_function;
            END IF;
        END IF;
        PERFORM FROM receipts.chats AS chat
        WHERE chat.tenant_id = p_tenant AND chat.chat_id = ANY (p_chats)
        ORDER BY chat.chat_id
        FOR UPDATE;
    END IF;
END;
$$;
COMMENT ON FUNCTION receipts.begin_batch(text, text, text[], integer[], text[]) IS
    'The start of a batched statement: enters the tenant, raises when its item arrays (lengths p_lengths, names p_names) differ in length, and locks the chats p_chats (when given; once each) in chat order.';
