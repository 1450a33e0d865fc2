"""Live views over PostgreSQL: change data capture in, result tables out (docs/postgres.md)."""
