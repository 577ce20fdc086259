package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// The migrations, applied in order of the number their file name starts
// with. A migration is never changed once released: a change to the
// schema is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations are the embedded migrations, in version order.
var migrations = func() []migration {
	entries, err := migrationFiles.ReadDir("migrations")
	if err != nil {
		panic(err)
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			panic("store/postgres: migration " + e.Name() + " does not start with its version number")
		}
		b, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			panic(err)
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			panic(fmt.Sprintf("store/postgres: migration %s: want version %d", m.name, i+1))
		}
	}
	return out
}()

// SchemaVersion is the version of the schema this idemrun reads and
// writes: the number of its migrations.
var SchemaVersion = len(migrations)

// migrationsTable records the migrations applied to a schema. Its name
// is idemrun's own, so a schema shared with other tools does not mix
// their records with idemrun's.
const migrationsTable = "idemrun_migrations"

// Migrate creates idemrun's tables in the schema (Options.Schema), or
// brings them to this idemrun's version. It is idempotent, and safe when
// several processes run it at once: they take turns under an advisory
// lock, and each migration is one transaction with its record. A schema
// migrated by a newer idemrun is left alone (ErrNewerSchema). A
// connection that cannot be made is a *ConnectError.
func Migrate(ctx context.Context, url string, opts *Options) error {
	schema := opts.schema()
	if err := checkSchemaName(schema); err != nil {
		return err
	}
	r := newRedactor(url)
	where := fmt.Sprintf("%s (schema %s)", r.location(), schema)
	conn, err := connectOne(ctx, r, url, "migrate", where)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := migrate(ctx, conn, schema); err != nil {
		// Each migration commits with its record: Migrate is run again
		// after any failure, so a lost connection is ErrUnavailable.
		return r.wrap(classify(fmt.Errorf("store: migrate %s: %w", where, err), false))
	}
	return nil
}

func migrate(ctx context.Context, conn *pgx.Conn, schema string) error {
	return migrateTo(ctx, conn, schema, SchemaVersion)
}

// migrateTo applies the migrations up to version to, no further (tests
// make a schema of an earlier version with it).
func migrateTo(ctx context.Context, conn *pgx.Conn, schema string, to int) error {
	// Up to date (the common case: every runner migrates as it starts):
	// nothing to lock or create, which a role without the right to
	// create schemas could not do.
	if v, err := schemaVersion(ctx, conn, schema); err != nil || v == to {
		return err
	}
	key := lockKey("migrate", schema)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		return err
	}
	// The lock is the session's: closing the connection would release it
	// too, but the connection may outlive an error here.
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key)

	s := pgx.Identifier{schema}.Sanitize()
	table := pgx.Identifier{schema, migrationsTable}.Sanitize()
	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+s+`;
		CREATE TABLE IF NOT EXISTS `+table+` (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
		return err
	}
	var have int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+table).Scan(&have); err != nil {
		return err
	}
	if have > SchemaVersion {
		return fmt.Errorf("%w: it is at version %d, this idemrun knows up to %d; upgrade idemrun", ErrNewerSchema, have, SchemaVersion)
	}
	for _, m := range migrations[have:max(have, to)] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "{schema}", s)); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			if code := migrationCode[m.version]; code != nil {
				if err := code(ctx, tx, s); err != nil {
					return fmt.Errorf("migration %s: %w", m.name, err)
				}
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+table+` (version, name) VALUES ($1, $2)`, m.version, m.name)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// querier is what schemaVersion needs of a pool or a connection.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// schemaVersion returns the version the schema was migrated to, 0 when
// it has no migrations table (or does not exist). It creates nothing.
func schemaVersion(ctx context.Context, db querier, schema string) (int, error) {
	table := pgx.Identifier{schema, migrationsTable}.Sanitize()
	var exists bool
	if err := db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	var v int
	err := db.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+table).Scan(&v)
	return v, err
}

// versionError says what is wrong with a schema at version v, if anything.
func versionError(where string, v int) error {
	switch {
	case v == 0:
		return fmt.Errorf("%w: %s holds no idemrun tables; Migrate creates them", ErrNoSchema, where)
	case v < SchemaVersion:
		return fmt.Errorf("%w: %s is at version %d, this idemrun needs %d; Migrate upgrades it", ErrNoSchema, where, v, SchemaVersion)
	case v > SchemaVersion:
		return fmt.Errorf("%w: %s is at version %d, this idemrun knows up to %d; upgrade idemrun", ErrNewerSchema, where, v, SchemaVersion)
	}
	return nil
}

// lockKey is the advisory lock key of one kind of work on one schema.
// Advisory locks are the database's, so the schema is part of the key.
func lockKey(kind, schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("idemrun\x00" + kind + "\x00" + schema))
	return int64(h.Sum64())
}

// checkSchemaName refuses a schema name Postgres would not keep as given.
func checkSchemaName(s string) error {
	switch {
	case s == "":
		return errors.New("store: an empty schema name")
	case len(s) > 63:
		return fmt.Errorf("store: schema name %q is longer than Postgres's 63 bytes", s)
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		return fmt.Errorf("store: schema name %q is not valid UTF-8 text", s)
	}
	return nil
}
