-- What a page of messages reads besides the messages themselves.

CREATE OR REPLACE FUNCTION receipts.receipt_chunks_of(p_tenant text, p_chat text, p_from_seq bigint, p_through_seq bigint)
RETURNS TABLE (seq bigint, delivered_to text[], delivered_at timestamptz[], read_by text[], read_at timestamptz[], hidden_read_by text[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    PERFORM receipts.enter_tenant(p_tenant);
    RETURN QUERY
    SELECT receipt.seq, receipt.delivered_to, receipt.delivered_at, receipt.read_by, receipt.read_at, receipt.hidden_read_by
    FROM receipts.receipt_chunks AS receipt
    WHERE receipt.tenant_id = p_tenant AND receipt.chat_id = p_chat AND receipt.seq >= p_from_seq AND receipt.seq <= p_through_seq
    ORDER BY receipt.seq, receipt.chunk;
END;
$$;
COMMENT ON FUNCTION receipts.receipt_chunks_of(text, text, bigint, bigint) IS
    'The receipt chunks of a chat''s messages with p_from_seq <= seq <= p_through_seq, by seq and chunk: a message''s receipts are its chunks'' arrays one after another.';
