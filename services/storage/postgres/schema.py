"""The store's schema in PostgreSQL and every statement it runs: one SQL table per
storage table (k bytea primary key, v bytea), `_store` (identity, feed head), `_context`
(commit_seq and highest fencing token per context), `_feed`, and the triggers that keep
append-only tables append-only."""
from __future__ import annotations

from psycopg import sql

from morphz.shared.mind.tables import TABLES


def schema_statements(schema: str) -> list[sql.Composable]:
    s = sql.Identifier(schema)
    out: list[sql.Composable] = [
        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(s),
        sql.SQL("CREATE TABLE IF NOT EXISTS {}._store (one boolean PRIMARY KEY DEFAULT true "
                "CHECK (one), id text NOT NULL, head bigint NOT NULL)").format(s),
        sql.SQL("CREATE TABLE IF NOT EXISTS {}._context (ctx bytea PRIMARY KEY, "
                "commit_seq bigint NOT NULL, fence bigint NOT NULL)").format(s),
        sql.SQL("CREATE TABLE IF NOT EXISTS {}._feed (position bigint PRIMARY KEY, "
                "ctx bytea NOT NULL, commit_seq bigint NOT NULL, change bytea NOT NULL, "
                "CONSTRAINT _feed_ctx UNIQUE (ctx, commit_seq))").format(s),
        # Refuses rewrites of append-only rows from every client; a quarantine's DELETE
        # is let through when its transaction flags it (morphz.quarantine, local).
        sql.SQL("""CREATE OR REPLACE FUNCTION {}.refuse_rewrite() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND TG_TABLE_NAME <> 'quarantine'
     AND current_setting('morphz.quarantine', true) = 'on' THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'table % is append-only', TG_TABLE_NAME USING ERRCODE = 'MZ001';
END $$""").format(s),
    ]
    for table, append_only in TABLES.items():
        t = sql.Identifier(schema, table)
        out.append(sql.SQL("CREATE TABLE IF NOT EXISTS {} (k bytea PRIMARY KEY, "
                           "v bytea NOT NULL)").format(t))
        if append_only:
            out.append(sql.SQL("CREATE OR REPLACE TRIGGER append_only BEFORE UPDATE OR "
                               "DELETE ON {} FOR EACH ROW EXECUTE FUNCTION "
                               "{}.refuse_rewrite()").format(t, s))
            out.append(sql.SQL("CREATE OR REPLACE TRIGGER append_only_truncate BEFORE "
                               "TRUNCATE ON {} FOR EACH STATEMENT EXECUTE FUNCTION "
                               "{}.refuse_rewrite()").format(t, s))
    return out


def _text(statement: sql.Composable) -> str:
    """A composed statement as its text, once: psycopg would render a Composed (quote its
    identifiers) at every execution, some 100 us each."""
    return statement.as_string(None)


class Statements:
    """Every statement the store runs, composed once for its schema."""

    def __init__(self, schema: str) -> None:
        s = sql.Identifier(schema)

        def each(template: str) -> dict[str, str]:
            return {table: _text(sql.SQL(template).format(t=sql.Identifier(schema, table),
                                                          s=s))
                    for table in TABLES}

        self.get = each("SELECT v FROM {t} WHERE k = %s")
        self.get_many = each("SELECT k, v FROM {t} WHERE k = ANY(%s)")
        self.upsert = each("INSERT INTO {t} (k, v) SELECT * FROM unnest(%s::bytea[], "
                           "%s::bytea[]) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v")
        self.insert = each("INSERT INTO {t} (k, v) SELECT * FROM unnest(%s::bytea[], "
                           "%s::bytea[])")
        self.existing = each("SELECT k FROM {t} WHERE k = ANY(%s)")
        self.delete = each("DELETE FROM {t} WHERE k = ANY(%s)")
        # Moves rows aside: quarantine key = its prefix (context, commit_seq, table) and
        # the row's key past the context's prefix.
        self.move_aside = each(
            "WITH moved AS (DELETE FROM {t} WHERE k = ANY(%s) RETURNING k, v) "
            "INSERT INTO {s}.quarantine (k, v) SELECT %s || substring(k from %s), v "
            "FROM moved")
        # An erasure's rewrite: the rows deleted (the append-only trigger lets a DELETE
        # through under the quarantine's flag), then inserted with their new values.
        self.erase_delete = each("DELETE FROM {t} WHERE k = ANY(%s) RETURNING k, v")
        # A context's rows, deleted (Store.delete_context): keys in [prefix, prefix 0xff).
        self.delete_under = each("DELETE FROM {t} WHERE k >= %s AND k < %s")
        self.scans: dict[tuple, str] = {}
        self._schema = schema
        one = lambda template: _text(sql.SQL(template).format(s))  # noqa: E731
        self.lock_head = one("SELECT head, id FROM {}._store FOR UPDATE")
        self.read_head = one("SELECT head, id FROM {}._store")
        self.init_store = one("INSERT INTO {}._store (id, head) VALUES (%s, 0) "
                              "ON CONFLICT DO NOTHING")
        self.set_head = one("UPDATE {}._store SET head = %s")
        self.set_id = one("UPDATE {}._store SET id = %s")
        self.notify = "SELECT pg_notify(%s, %s)"
        self.statement_timeout = "SELECT set_config('statement_timeout', %s, true)"
        self.contexts_of = one("SELECT ctx, commit_seq, fence FROM {}._context "
                               "WHERE ctx = ANY(%s)")
        self.commit_seq = one("SELECT commit_seq FROM {}._context WHERE ctx = %s")
        # A deleted context keeps its row (its highest fencing token) at commit_seq 0.
        self.all_contexts = one("SELECT ctx FROM {}._context WHERE commit_seq > 0 "
                                "ORDER BY ctx")
        self.forget_context = one("UPDATE {}._context SET commit_seq = 0 WHERE ctx = %s "
                                  "AND commit_seq > 0")
        # A deleted context's commits stay in the feed as fillers (Store.delete_context:
        # positions stay consecutive), naming no context (unique by -position).
        self.fill_feed_of = one("UPDATE {}._feed SET ctx = '', commit_seq = -position, "
                                "change = %s WHERE ctx = %s")
        self.count_contexts = one("SELECT count(*) FROM {}._context")
        self.put_contexts = one(
            "INSERT INTO {}._context (ctx, commit_seq, fence) SELECT * FROM "
            "unnest(%s::bytea[], %s::bigint[], %s::bigint[]) ON CONFLICT (ctx) DO UPDATE "
            "SET commit_seq = EXCLUDED.commit_seq, fence = EXCLUDED.fence")
        self.put_feed = one(
            "INSERT INTO {}._feed (position, ctx, commit_seq, change) SELECT * FROM "
            "unnest(%s::bigint[], %s::bytea[], %s::bigint[], %s::bytea[])")
        self.feed_after = one("SELECT position, change FROM {}._feed WHERE position > %s "
                              "ORDER BY position LIMIT %s")
        self.feed_of = one("SELECT position, change FROM {}._feed WHERE ctx = %s AND "
                           "commit_seq > %s ORDER BY commit_seq LIMIT %s")
        self.all_rows = each("SELECT k, v FROM {t} ORDER BY k")
        self.all_feed = one("SELECT position, ctx, commit_seq, change FROM {}._feed "
                            "ORDER BY position")
        self.all_context_rows = one("SELECT ctx, commit_seq, fence FROM {}._context "
                                    "ORDER BY ctx")

    def scan(self, table: str, *, values: bool, keys_: bool, after: bool, upper: bool,
             reverse: bool) -> str:
        """A page of a scan: rows of `table` in [low, high) past the last one read."""
        shape = (table, values, keys_, after, upper, reverse)
        found = self.scans.get(shape)
        if found is None:
            cols = ", ".join(c for c, on in (("k", keys_ or True), ("v", values)) if on)
            cond = ["k >= %s"]
            if upper:
                cond.append("k < %s")
            if after:
                cond.append("k < %s" if reverse else "k > %s")
            found = self.scans[shape] = _text(sql.SQL(
                "SELECT " + cols + " FROM {t} WHERE " + " AND ".join(cond) +
                " ORDER BY k" + (" DESC" if reverse else "") + " LIMIT %s").format(
                t=sql.Identifier(self._schema, table)))
        return found
