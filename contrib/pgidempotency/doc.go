// Package pgidempotency is an idempotency store on PostgreSQL, for
// services whose own data lives there: with [idempotency.TxHandler], a
// handler's rows and its recorded response commit in one transaction, so
// that a crash, a lost COMMIT acknowledgement or a takeover leaves both
// or neither, and a keyed retry is either replayed or run again — never
// both, never neither.
//
//	pool, _ := pgxpool.New(ctx, dsn)
//	store, _ := pgidempotency.New(pool, pgidempotency.Options{})
//	_ = store.Migrate(ctx) // or run pgidempotency.Schema("") in a migration
//	mux.Handle("POST /orders", idempotency.TxHandler(createOrder, store, idempotency.Options{RequireKey: true}))
//
// createOrder writes through the transaction in its context:
//
//	tx, _ := idempotency.TxFrom[pgx.Tx](r.Context())
//	_, err := tx.Exec(r.Context(), "INSERT INTO orders …")
//
// Writes through the pool instead are not protected: they stay when the
// transaction rolls back, and happen again when a retry runs the handler
// again.
//
// Call [Store.Sweep] periodically to delete expired records. See
// docs/idempotency.md, "Exactly once with Postgres".
package pgidempotency
