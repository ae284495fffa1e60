package pgidempotency

import "strings"

// statements are the store's SQL for one table. Every deadline is the
// database's clock_timestamp() plus an interval in microseconds ($n *
// interval '1 microsecond'): the process's clock never enters a record.
//
// A record is live while expires_at is in the future: a reservation until
// its lock ends plus AbandonedTTL, a completed record until its response
// TTL ends. An expired record is as good as absent: Reserve replaces it,
// Complete and Release find it stale, Sweep deletes it.
type statements struct {
	table    string
	schema   string
	reserve  string
	complete string
	release  string
	owns     string
	sweep    string
}

func newStatements(table string) statements {
	r := strings.NewReplacer("{t}", table, "{seq}", table+"_tokens", "{idx}", strings.ReplaceAll(table, ".", "_")+"_expires_at")
	return statements{
		table:    table,
		schema:   r.Replace(schemaSQL),
		reserve:  r.Replace(reserveSQL),
		complete: r.Replace(completeSQL),
		release:  r.Replace(releaseSQL),
		owns:     r.Replace(ownsSQL),
		sweep:    r.Replace(sweepSQL),
	}
}

// schemaSQL creates the records' table. A record is found by the SHA-256
// of its key (see recordKey), in bytea: a key may hold any bytes (a
// scoped key holds a NUL, which text cannot) and be of any length (a
// B-tree index entry holds at most 2,704 bytes). header is the response's header in
// this package's binary form (see encodeHeader): header values are bytes,
// not necessarily UTF-8.
const schemaSQL = `
CREATE SEQUENCE IF NOT EXISTS {seq};
CREATE TABLE IF NOT EXISTS {t} (
	key_sha256   bytea PRIMARY KEY,
	fingerprint  text NOT NULL,
	token        bigint NOT NULL,
	took_over    boolean NOT NULL DEFAULT false,
	completed    boolean NOT NULL DEFAULT false,
	locked_until timestamptz NOT NULL,
	expires_at   timestamptz NOT NULL,
	status       integer,
	header       bytea,
	body         bytea
);
CREATE INDEX IF NOT EXISTS {idx} ON {t} (expires_at);
`

// reserveSQL takes the key whose SHA-256 is $1 for the fingerprint ($2) with a lock of
// $3 µs, kept $4 µs more once abandoned, when it is free, its record
// expired, or its reservation's lock expired under the same fingerprint
// (a takeover); it returns the new token with reserved = true. Otherwise
// it returns the record that holds the key. A record the INSERT found but
// the statement's snapshot does not show (changed after the snapshot)
// gives no row: the caller runs the statement again.
//
// The record may be locked by a transaction still running: a CompleteTx
// not yet committed, perhaps of an instance paused or cut off. The
// statement waits for that lock at most $5 ms (lock_timeout, set for its
// own transaction alone, before the INSERT runs), and then fails with
// 55P03: the key is in progress.
const reserveSQL = `
WITH cfg AS MATERIALIZED (SELECT set_config('lock_timeout', $5::bigint::text, true)),
tok AS MATERIALIZED (SELECT nextval('{seq}') AS v FROM cfg),
ins AS (
	INSERT INTO {t} AS r (key_sha256, fingerprint, token, locked_until, expires_at)
	SELECT $1, $2, tok.v,
		clock_timestamp() + $3::bigint * interval '1 microsecond',
		clock_timestamp() + ($3::bigint + $4::bigint) * interval '1 microsecond'
	FROM tok
	ON CONFLICT (key_sha256) DO UPDATE SET
		fingerprint = excluded.fingerprint, token = excluded.token,
		took_over = r.expires_at > clock_timestamp(), completed = false,
		locked_until = excluded.locked_until, expires_at = excluded.expires_at,
		status = NULL, header = NULL, body = NULL
	WHERE r.expires_at <= clock_timestamp()
		OR (NOT r.completed AND r.fingerprint = excluded.fingerprint AND r.locked_until <= clock_timestamp())
	RETURNING r.token, r.took_over
)
SELECT true, token, took_over, NULL::text, false, NULL::integer, NULL::bytea, NULL::bytea FROM ins
UNION ALL
SELECT false, r.token, false, r.fingerprint, r.completed, r.status, r.header, r.body
FROM {t} r
WHERE r.key_sha256 = $1 AND r.expires_at > clock_timestamp() AND NOT EXISTS (SELECT 1 FROM ins)
`

// completeSQL records the response of the reservation $1/$2 for $6 µs.
const completeSQL = `
UPDATE {t} SET completed = true, status = $3, header = $4, body = $5,
	expires_at = clock_timestamp() + $6::bigint * interval '1 microsecond'
WHERE key_sha256 = $1 AND token = $2 AND NOT completed AND expires_at > clock_timestamp()
`

// releaseSQL deletes the reservation $1/$2.
const releaseSQL = `
DELETE FROM {t} WHERE key_sha256 = $1 AND token = $2 AND NOT completed
`

// ownsSQL reports whether the token $2 still holds the key $1's record.
const ownsSQL = `
SELECT EXISTS (SELECT 1 FROM {t} WHERE key_sha256 = $1 AND token = $2 AND NOT completed)
`

// sweepSQL deletes up to $1 expired records. Rows locked by a running
// transaction (a CompleteTx not yet committed) are skipped; a row renewed
// by a concurrent Reserve is re-checked after its lock (the outer WHERE)
// and kept.
const sweepSQL = `
DELETE FROM {t} WHERE key_sha256 IN (
	SELECT key_sha256 FROM {t} WHERE expires_at <= clock_timestamp()
	ORDER BY expires_at LIMIT $1::bigint FOR UPDATE SKIP LOCKED
) AND expires_at <= clock_timestamp()
`
