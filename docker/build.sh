#!/usr/bin/env bash
# Build the lifeline-mesh node image (and, with --postgres, the PostgreSQL image for
# docker/compose.hub.yml) without any registry reachable from inside a container:
#
#   docker/build.sh              lifeline-mesh:dev
#   docker/build.sh --postgres   lifeline-mesh:dev and lifeline-postgres:dev
#
# 1. The base image. BASE_IMAGE (default lifeline-base:bookworm) is used as it is when the
#    engine has it. The default one, when missing, is made here, offline from any image
#    registry: `debootstrap --variant=minbase bookworm` with python3 and python3-venv, then
#    `docker import` (as root, about a minute). Elsewhere, BASE_IMAGE=python:3.11-slim.
# 2. The wheelhouse: the project's runtime dependencies as wheels, built on this host with
#    Python 3.11 (the image's Python: same ABI), cached by the dependency list. Only the
#    project's own wheel is built each time.
# 3. The image: docker/Dockerfile on a small staged context (the Dockerfile, the entry point,
#    the wheels), installed with `pip install --no-index --find-links`.
# 4. --postgres: Debian's postgresql packages, downloaded on this host for the base image's
#    installed set (cached), installed by docker/Dockerfile.postgres with dpkg.
#
# Settings (environment):
#   BASE_IMAGE             the image to build on (default lifeline-base:bookworm)
#   IMAGE                  the node image's tag (default lifeline-mesh:dev)
#   POSTGRES_IMAGE         the PostgreSQL image's tag (default lifeline-postgres:dev)
#   PYTHON                 a Python 3.11 for the wheels (default python3.11, else python3)
#   LIFELINE_DOCKER_CACHE  the cache (default ${XDG_CACHE_HOME:-~/.cache}/lifeline-mesh/docker)
#   DEBIAN_MIRROR          the mirror debootstrap uses (default: debootstrap's own)
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
BASE_IMAGE="${BASE_IMAGE:-lifeline-base:bookworm}"
IMAGE="${IMAGE:-lifeline-mesh:dev}"
POSTGRES_IMAGE="${POSTGRES_IMAGE:-lifeline-postgres:dev}"
CACHE="${LIFELINE_DOCKER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lifeline-mesh/docker}"
LOCAL_BASE="lifeline-base:bookworm"
BASE_PACKAGES="python3,python3-venv"
export DOCKER_BUILDKIT=0 # the classic builder: Debian's engine ships without BuildKit's CLI

say() { printf 'build: %s\n' "$*" >&2; }
die() { say "$*"; exit 2; }

postgres=0
for arg in "$@"; do
    case "$arg" in
        --postgres) postgres=1 ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $arg (try --help)" ;;
    esac
done

command -v docker >/dev/null || die "no docker client on PATH: install Debian's docker.io"
docker info >/dev/null 2>&1 || die "no Docker engine answers (docker info): start dockerd as root"
if [ -z "${PYTHON:-}" ]; then
    PYTHON="$(command -v python3.11 || command -v python3)"
fi
pyver="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
[ "$pyver" = "3.11" ] || die "$PYTHON is Python $pyver; the image runs 3.11: set PYTHON to a 3.11"
mkdir -p "$CACHE"
# One build at a time per cache (two checkouts testing at once share it).
exec 9>"$CACHE/.lock"
flock 9

# The key of the base image's content: what debootstrap is asked for.
base_key="$(printf 'bookworm minbase %s\n' "$BASE_PACKAGES" | sha256sum | cut -c1-16)"

make_base() {
    [ "$(id -u)" = 0 ] || die "$LOCAL_BASE is missing; making it needs root (debootstrap)"
    command -v debootstrap >/dev/null || die "$LOCAL_BASE is missing; install debootstrap"
    local root="$CACHE/rootfs.tmp"
    rm -rf "$root"
    say "making $LOCAL_BASE: debootstrap bookworm (minbase, $BASE_PACKAGES), about a minute"
    # shellcheck disable=SC2086
    debootstrap --variant=minbase --include="$BASE_PACKAGES" bookworm "$root" \
        ${DEBIAN_MIRROR:-} >"$CACHE/debootstrap.log" 2>&1 \
        || die "debootstrap failed; see $CACHE/debootstrap.log"
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    # The installed set, for resolving the PostgreSQL packages against it (--postgres).
    cp "$root/var/lib/dpkg/status" "$CACHE/base-$base_key.dpkg-status"
    tar -C "$root" -c . | docker import \
        -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        -c 'ENV LANG=C.UTF-8' -c 'CMD ["/bin/bash"]' \
        -c "LABEL lifeline.base-key=$base_key" - "$LOCAL_BASE" >/dev/null
    rm -rf "$root"
    say "made $LOCAL_BASE"
}

if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    [ "$BASE_IMAGE" = "$LOCAL_BASE" ] \
        || die "no image $BASE_IMAGE here: pull it, or leave BASE_IMAGE unset to make $LOCAL_BASE"
    make_base
elif [ "$BASE_IMAGE" = "$LOCAL_BASE" ]; then
    have="$(docker image inspect -f '{{ index .Config.Labels "lifeline.base-key" }}' "$BASE_IMAGE")"
    status="$CACHE/base-$base_key.dpkg-status"
    if [ "$have" != "$base_key" ]; then
        say "$LOCAL_BASE is stale: making it again"
        make_base
    elif [ ! -f "$status" ]; then
        # A new cache beside an engine that has the base: its installed set is in the image.
        docker run --rm --network none "$BASE_IMAGE" cat /var/lib/dpkg/status >"$status.tmp" \
            && [ -s "$status.tmp" ] && mv "$status.tmp" "$status" \
            || { rm -f "$status.tmp"; say "could not read $LOCAL_BASE's package list"; make_base; }
    fi
fi

# The wheelhouse of the runtime dependencies, keyed by their list, the Python and platform.
deps="$("$PYTHON" -c 'import tomllib, sys
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' \
    "$REPO/pyproject.toml")"
wheel_key="$({ printf '%s\n' "$deps"; "$PYTHON" -c 'import sys, sysconfig
print(sys.implementation.cache_tag, sysconfig.get_platform())'; } | sha256sum | cut -c1-16)"
wheels="$CACHE/wheels-$wheel_key"
if [ ! -d "$wheels" ]; then
    say "building the wheelhouse (runtime dependencies) with $PYTHON"
    rm -rf "$wheels.tmp"
    printf '%s\n' "$deps" >"$CACHE/requirements-$wheel_key.txt"
    "$PYTHON" -m pip wheel -q --disable-pip-version-check --wheel-dir "$wheels.tmp" \
        -r "$CACHE/requirements-$wheel_key.txt" 2>&1 | grep -v '^WARNING: Location' >&2 || true
    ls "$wheels.tmp"/*.whl >/dev/null 2>&1 || die "pip wheel made no wheels"
    mv "$wheels.tmp" "$wheels"
fi

# The staged build context: only what the image needs.
context="$(mktemp -d "$CACHE/context.XXXXXX")"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/wheels/deps" "$context/wheels/project"
cp -l "$wheels"/*.whl "$context/wheels/deps/" 2>/dev/null || cp "$wheels"/*.whl "$context/wheels/deps/"
cp -p "$CACHE/requirements-$wheel_key.txt" "$context/wheels/deps/requirements.txt"
# The project's wheel, cached by the content of what goes into it (the newest one only).
src_key="$(cd "$REPO" && find pyproject.toml README.md lifeline lifeline_mesh -type f \
    ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | LC_ALL=C sort -z \
    | xargs -0 sha256sum | sha256sum | cut -c1-16)"
project="$CACHE/project-$src_key"
if [ ! -d "$project" ]; then
    say "building the project's wheel"
    find "$CACHE" -maxdepth 1 -name 'project-*' -type d -exec rm -rf {} +
    "$PYTHON" -m pip wheel -q --disable-pip-version-check --no-deps --wheel-dir "$project.tmp" \
        "$REPO" 2>&1 | grep -v '^WARNING: Location' >&2 || true
    ls "$project.tmp"/lifeline_mesh-*.whl >/dev/null 2>&1 || die "the project's wheel was not built"
    mv "$project.tmp" "$project"
fi
cp -p "$project"/*.whl "$context/wheels/project/"
cp "$REPO/docker/Dockerfile" "$REPO/docker/entrypoint.sh" "$context/"

say "building $IMAGE on $BASE_IMAGE"
build() { # build TAG LOG ARGS…: the builder's output goes to LOG, its tail on failure
    local tag="$1" log="$2" old
    shift 2
    old="$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)"
    docker build --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "$tag" "$@" >"$log" 2>&1 \
        || { tail -n 25 "$log" >&2; die "building $tag failed; the whole output is in $log"; }
    # The previous build of this tag, now untagged, goes (kept while a container uses it).
    if [ -n "$old" ] && [ "$old" != "$(docker image inspect -f '{{.Id}}' "$tag")" ]; then
        docker image rm "$old" >/dev/null 2>&1 || true
    fi
}
build "$IMAGE" "$CACHE/build-node.log" "$context"
say "built $IMAGE"

if [ "$postgres" = 1 ]; then
    pg="$context/postgres"
    mkdir -p "$pg/debs"
    if [ "$BASE_IMAGE" = "$LOCAL_BASE" ]; then
        # Debian's postgresql and what it needs beyond the base's installed set, downloaded
        # here (the image cannot reach the archive), cached by that set.
        debs="$CACHE/postgres-debs-$base_key"
        if [ ! -d "$debs" ]; then
            say "downloading Debian's postgresql packages for $LOCAL_BASE"
            rm -rf "$debs.tmp"
            mkdir -p "$debs.tmp/partial"
            download() {
                apt-get -q -y --no-install-recommends \
                    -o Debug::NoLocking=1 -o APT::Sandbox::User=root \
                    -o Dir::State::status="$CACHE/base-$base_key.dpkg-status" \
                    -o Dir::Cache::archives="$debs.tmp" \
                    install --download-only postgresql >>"$CACHE/postgres-debs.log" 2>&1
            }
            : >"$CACHE/postgres-debs.log"
            # Once more after refreshing the package lists (absent or stale ones fail).
            download || { apt-get update -q >>"$CACHE/postgres-debs.log" 2>&1 && download; } \
                || die "apt-get could not download postgresql; see $CACHE/postgres-debs.log"
            rmdir "$debs.tmp/partial" 2>/dev/null || true
            ls "$debs.tmp"/postgresql-1*.deb >/dev/null 2>&1 \
                || die "no postgresql server package was downloaded; see $CACHE/postgres-debs.log"
            mv "$debs.tmp" "$debs"
        fi
        cp -l "$debs"/*.deb "$pg/debs/" 2>/dev/null || cp "$debs"/*.deb "$pg/debs/"
    fi
    cp "$REPO/docker/Dockerfile.postgres" "$REPO/docker/postgres-entrypoint.sh" "$pg/"
    say "building $POSTGRES_IMAGE on $BASE_IMAGE"
    build "$POSTGRES_IMAGE" "$CACHE/build-postgres.log" -f "$pg/Dockerfile.postgres" "$pg"
    say "built $POSTGRES_IMAGE"
fi
