package keyspacetest

import (
	"os"
	"testing"
)

// PostgresDSNEnv names the variable holding the test database's DSN;
// .ci/postgres.sh starts a local PostgreSQL and exports it.
const PostgresDSNEnv = "AIONOTEL_POSTGRES_DSN"

// PostgresDSN returns the test database's DSN. Without one the test is
// skipped with a hint, unless CI is set (to anything but "" or "false"):
// there a missing database fails the test, since CI must not pass by
// skipping.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(PostgresDSNEnv)
	if dsn == "" {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" {
			t.Fatalf("CI=%s but %s is not set; run: source .ci/postgres.sh", ci, PostgresDSNEnv)
		}
		t.Skip("set " + PostgresDSNEnv + ", e.g. run: source .ci/postgres.sh")
	}
	return dsn
}
