#!/bin/sh
# Entry point of the lifeline-mesh image (docker/Dockerfile). POSIX sh.
#
#   bootstrap NAME  one-shot, on the first node's volume: create the line, the node identity
#                   and mesh NAME (this node holds its CA), share the line, and write one
#                   invite per node in LIFELINE_MESH_INVITE_FOR to $LIFELINE_MESH_TOKENS/<node>.
#                   With LIFELINE_MESH_STORE set, the node is a hub whose identity, CA key and
#                   membership are in that database (`hub init --store URL --new-mesh NAME`):
#                   the volume is the first hub process's root. Run again on an initialised
#                   volume, it changes nothing.
#   node            join the mesh first if LIFELINE_MESH_NODE has no certificate yet (token
#                   read from $LIFELINE_MESH_TOKENS/$LIFELINE_MESH_NODE), create and share the
#                   line, then serve with the static peers of LIFELINE_MESH_PEERS. With
#                   LIFELINE_MESH_STORE set it is a process of the hub node in that database
#                   instead: `hub init --store URL` once (no invite: its TLS certificate is
#                   issued from the CA key in the database), then `serve --store URL`, with a
#                   join port whenever the database holds the mesh's CA key.
#   health          exit 0 when this container's node is serving and, with a metrics port,
#                   its /readyz answers 200: store open, listening, certificates loaded (the
#                   image's HEALTHCHECK).
#   anything else   passed to lifeline-mesh, e.g. `members`, `verify --json`, `lines`.
#
# Settings (environment; defaults in the Dockerfile, per node in docker/compose.yaml):
#   LIFELINE_MESH_NODE          this node's name, e.g. node-b (names its invite file)
#   LIFELINE_MESH_LINE          the line to share (default ledger)
#   LIFELINE_MESH_LISTEN        sync port (default 0.0.0.0:7420)
#   LIFELINE_MESH_JOIN_LISTEN   join port, served by the CA holder only (default 0.0.0.0:7421)
#   LIFELINE_MESH_JOIN_ADDRESS  the join port as other nodes reach it, e.g. node-a:7421
#   LIFELINE_MESH_PEERS         static peers, space separated HOST:PORT
#   LIFELINE_MESH_STORE         a hub's database, postgresql://USER:PASSWORD@HOST:PORT/DB
#                               (`hub init --store`, `serve --store`; unset: a node of its
#                               own, its lines in /data)
#   LIFELINE_MESH_INVITE_FOR    node names to invite (bootstrap), space separated
#   LIFELINE_MESH_INVITE_TTL    how long those invites work (default 1h)
#   LIFELINE_MESH_TOKENS        directory of invite files (default /tokens)
#   LIFELINE_MESH_METRICS_LISTEN  Prometheus /metrics, /healthz, /readyz (image default
#                               127.0.0.1:9420, for the health check; 0.0.0.0:9420 to scrape
#                               from outside; empty: none)
set -eu

LINE="${LIFELINE_MESH_LINE:-ledger}"
TOKENS="${LIFELINE_MESH_TOKENS:-/tokens}"
LISTEN="${LIFELINE_MESH_LISTEN:-0.0.0.0:7420}"
JOIN_LISTEN="${LIFELINE_MESH_JOIN_LISTEN:-0.0.0.0:7421}"
MESH=".lifeline/mesh"
STORE="${LIFELINE_MESH_STORE:-}"
METRICS_LISTEN="${LIFELINE_MESH_METRICS_LISTEN:-}"

say() { printf 'entrypoint: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

ensure_line() {
    # The line must exist and be shared before serve offers it to peers.
    if [ ! -f ".lifeline/$LINE.db" ]; then
        lifeline --line "$LINE" init
    fi
    lifeline-mesh share "$LINE"
}

bootstrap() {
    [ $# -eq 1 ] || die "usage: bootstrap MESH_NAME"
    [ -n "${LIFELINE_MESH_JOIN_ADDRESS:-}" ] || die "set LIFELINE_MESH_JOIN_ADDRESS (e.g. node-a:7421)"
    if [ -n "$STORE" ]; then
        if [ -f "$MESH/hub.json" ]; then
            say "this volume is already a process of the hub node; not creating another mesh"
        else
            # The hub node (its key, the mesh CA key, the members) is made in the database.
            lifeline-mesh hub init --store "$STORE" --new-mesh "$1"
        fi
    elif [ -f "$MESH/ca.key" ]; then
        say "this volume already holds a mesh CA; not creating another mesh"
    else
        lifeline-mesh init --new-mesh "$1"
    fi
    ensure_line
    mkdir -p "$TOKENS"
    for name in ${LIFELINE_MESH_INVITE_FOR:-}; do
        if [ -s "$TOKENS/$name" ]; then
            say "invite for $name already written; keeping it"
            continue
        fi
        # Write then rename, so a reader never sees half a token.
        lifeline-mesh invite --address "$LIFELINE_MESH_JOIN_ADDRESS" \
            --ttl "${LIFELINE_MESH_INVITE_TTL:-1h}" >"$TOKENS/.$name.tmp"
        mv "$TOKENS/.$name.tmp" "$TOKENS/$name"
        say "wrote the invite for $name to $TOKENS/$name"
    done
}

join_once() {
    [ -f "$MESH/tls.pem" ] && return 0
    if [ -n "$STORE" ]; then
        # Another process of the hub node in the database: no invite, the same node id, a
        # TLS certificate of its own issued from the CA key there (kept when run again).
        lifeline-mesh hub init --store "$STORE"
        [ -f "$MESH/tls.pem" ] || die "the hub node in LIFELINE_MESH_STORE is in no mesh yet; run the bootstrap service first"
        return 0
    fi
    name="${LIFELINE_MESH_NODE:?set LIFELINE_MESH_NODE to this node's name}"
    [ -s "$TOKENS/$name" ] || die "no certificate yet and no invite at $TOKENS/$name; run the bootstrap service first"
    # The token goes through the environment, not the command line (ps would show it).
    LIFELINE_MESH_TOKEN="$(cat "$TOKENS/$name")" lifeline-mesh join
}

node() {
    join_once
    ensure_line
    set --
    for peer in ${LIFELINE_MESH_PEERS:-}; do
        set -- "$@" --peer "$peer"
    done
    if [ -n "$STORE" ]; then
        # Every process of the hub node redeems invites when the CA key is in the database
        # (serve opens no join port without it).
        set -- "$@" --join-listen "$JOIN_LISTEN" --store "$STORE"
    elif [ -f "$MESH/ca.key" ]; then
        set -- "$@" --join-listen "$JOIN_LISTEN"
    fi
    if [ -n "$METRICS_LISTEN" ]; then
        set -- "$@" --metrics-listen "$METRICS_LISTEN"
    fi
    exec lifeline-mesh serve --listen "$LISTEN" --no-discovery "$@"
}

health() {
    lifeline-mesh status --json | grep -q '"serving": true' || return 1
    [ -n "$METRICS_LISTEN" ] || return 0
    # /readyz on the metrics port, over loopback (the port listens there or on every address)
    python -m lifeline_mesh.node.probe "http://127.0.0.1:${METRICS_LISTEN##*:}/readyz"
}

case "${1:-node}" in
    bootstrap) shift; bootstrap "$@" ;;
    node) node ;;
    health) health ;;
    *) exec lifeline-mesh "$@" ;;
esac
