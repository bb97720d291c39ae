-- 0009: pages of messages keep room for a read of all of them at once.
--
-- 0004 filled new pages of messages to half, so that a receipt's new row version stays on
-- its page (a HOT update: no new index entries). That holds while a page's rows are read
-- one transaction at a time, since the old versions are pruned in between. A read-all, or a
-- batch of 100, rewrites every row of its pages in one transaction: the old versions stay
-- until it commits, and each new version is larger (a reader and a time more). At half
-- fill the last quarter of a page's rows found no room: 2,831 of a read-all's 10,000
-- updates were not HOT, each adding an entry to all three indexes of messages. At 40 %,
-- all 10,000 are HOT, and the read-all took 76-79 ms in PostgreSQL instead of 97-116 (four
-- interleaved pairs). The price is disk: a message takes about 2.5 times its size instead
-- of twice. Pages written before this migration keep their fill until rewritten
-- (VACUUM FULL receipts.messages); the README gives the trade back for space.

ALTER TABLE receipts.messages SET (fillfactor = 40);
