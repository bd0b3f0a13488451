#!/bin/sh
# Entry point of the PostgreSQL image (docker/Dockerfile.postgres), run as user postgres.
#
#   serve    make the cluster on first start (initdb on $PGDATA, the volume): the superuser
#            postgres (socket, peer only), the login role POSTGRES_USER owning the database
#            POSTGRES_DB, its password from POSTGRES_PASSWORD (or the file
#            POSTGRES_PASSWORD_FILE); password logins (scram-sha-256) over the network; then
#            run postgres in the foreground.
#   health   exit 0 when the server takes connections (the image's HEALTHCHECK).
#   anything else is run as a command (psql, pg_dump, ...).
set -eu

say() { printf 'postgres-entrypoint: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

USER_NAME="${POSTGRES_USER:-lifeline}"
DB_NAME="${POSTGRES_DB:-lifeline}"

password() {
    if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
        cat "$POSTGRES_PASSWORD_FILE"
    elif [ -n "${POSTGRES_PASSWORD:-}" ]; then
        printf '%s' "$POSTGRES_PASSWORD"
    else
        die "set POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE (the password of $USER_NAME)"
    fi
}

init_cluster() {
    pw="$(password | sed "s/'/''/g")"
    say "making the cluster in $PGDATA (role $USER_NAME, database $DB_NAME)"
    # The superuser `postgres` logs in over the socket only, as the OS user postgres (peer).
    initdb -D "$PGDATA" --username=postgres --auth-local=peer --auth-host=scram-sha-256 \
        --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    {
        echo "listen_addresses = '*'"
        echo "unix_socket_directories = '/run/postgresql'"
    } >>"$PGDATA/postgresql.conf"
    {
        echo "host all all 0.0.0.0/0 scram-sha-256"
        echo "host all all ::/0 scram-sha-256"
    } >>"$PGDATA/pg_hba.conf"
    # The role and its database, made in single-user mode: no server listens yet.
    printf '%s\n' \
        "CREATE ROLE \"$USER_NAME\" LOGIN PASSWORD '$pw';" \
        "CREATE DATABASE \"$DB_NAME\" OWNER \"$USER_NAME\";" \
        | postgres --single -D "$PGDATA" postgres >/dev/null
}

case "${1:-serve}" in
    serve)
        [ -s "$PGDATA/PG_VERSION" ] || init_cluster
        exec postgres -D "$PGDATA"
        ;;
    health)
        exec pg_isready -q -h /run/postgresql -U postgres -d postgres
        ;;
    *) exec "$@" ;;
esac
