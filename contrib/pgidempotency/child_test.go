package pgidempotency

const childEnv = "PGIDEMPOTENCY_TEST_CHILD"

func serveChild() int { return 0 }
