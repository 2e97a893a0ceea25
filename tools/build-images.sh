#!/usr/bin/env bash
# build-images.sh builds every container image agentflow uses, locally: no
# registry is reachable here, so nothing is ever pulled (SPEC §2).
#
#   agentflow/base:latest            busybox-static rootfs (sh, sleep, tar, …)
#   agentflow/tool-<name>:<version>  the same rootfs + /bin/tool (static Go
#                                    from tools/<name>), ENTRYPOINT /bin/tool
#   agentflow/egress-proxy:latest    the per-sandbox egress proxy
#   agentflow/test-upstream:latest   test upstreams of live specs (feed, OpenAI
#                                    stub, webhook receiver, SMTP sink)
#
# Every image is a `docker import` of a deterministic tar (sorted, mtime 0,
# numeric owners) and carries an org.agentflow.inputs label: the sha256 of
# everything that went into it. An image whose label matches is not rebuilt,
# so a no-op run costs some hashing, one `go list` and two `docker inspect`s.
#
# Usage: tools/build-images.sh [--force] [tool-name ...]
#   --force   rebuild even when the inputs hash matches (the base too, unless
#             tool names are given)
#   names     build only these tools, and the egress proxy or the test
#             upstream only when named (egress-proxy, test-upstream); the
#             base is always checked. Without names: everything.
#
# Output: a table of tag -> image ID on stdout, and .data/images.json
#   [{"name":"rss-fetcher","version":"1.1","tag":"agentflow/tool-rss-fetcher:1.1","id":"sha256:…"}]
# (every tool; the base image is only in the table).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DATA=${AGENTFLOW_DATA_DIR:-$ROOT/.data}
CACHE=$DATA/cache
BASE_TAG=agentflow/base:latest
INPUTS_LABEL=org.agentflow.inputs
TOOL_UID=65532

FORCE=0
SELECTED=()
for arg in "$@"; do
  case $arg in
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "build-images: unknown flag $arg" >&2; exit 2 ;;
    *) SELECTED+=("$arg") ;;
  esac
done

log() { printf 'build-images: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v docker >/dev/null || die "docker CLI not found"
command -v go >/dev/null || die "go not found"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "Docker daemon not reachable (DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock})"
mkdir -p "$CACHE"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/agentflow-images.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

sha() { sha256sum | cut -d' ' -f1; }

# inspect_all TAG... fills LABEL[tag] and ID[tag] with one daemon round trip
# (a per-image call costs ~0.3 s on a busy machine). Absent images stay unset.
declare -A LABEL ID
inspect_all() {
  local line tags label id tag
  while IFS='|' read -r tags label id; do
    for tag in $tags; do
      LABEL[$tag]=$label
      ID[$tag]=$id
    done
  done < <(docker image inspect -f "{{range .RepoTags}}{{.}} {{end}}|{{index .Config.Labels \"$INPUTS_LABEL\"}}|{{.Id}}" "$@" 2>/dev/null || true)
}

# busybox_deb prints the path of the cached busybox-static .deb
# (scripts/busybox-deb.sh, shared with deploy/build-images.sh).
busybox_deb() { "$ROOT/scripts/busybox-deb.sh" "$CACHE"; }

TARFLAGS=(--sort=name --mtime=@0 --numeric-owner --format=gnu)

# base_tar DEB OUT makes the rootfs tar: /bin/busybox + one symlink per
# applet, passwd and group with the sandbox user, empty /workspace and /tmp.
# Everything is root-owned except /workspace, which belongs to the tool user
# so that a volume seeded from the image (rather than a tmpfs) is writable.
base_tar() {
  local deb=$1 out=$2 rootfs=$WORK/base-rootfs applet
  rm -rf "$rootfs" "$WORK/deb"
  mkdir -p "$WORK/deb" "$rootfs"/{bin,sbin,usr/bin,usr/sbin,etc,workspace,tmp}
  dpkg -x "$deb" "$WORK/deb"
  install -m 0755 "$WORK/deb/bin/busybox" "$rootfs/bin/busybox"
  while read -r applet; do
    [[ $applet == bin/busybox ]] && continue
    mkdir -p "$rootfs/$(dirname "$applet")"
    ln -sf /bin/busybox "$rootfs/$applet"
  done < <("$rootfs/bin/busybox" --list-full | sort)
  printf 'root:x:0:0:root:/root:/bin/sh\ntool:x:%d:%d:agentflow tool:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' \
    "$TOOL_UID" "$TOOL_UID" >"$rootfs/etc/passwd"
  printf 'root:x:0:\ntool:x:%d:\nnogroup:x:65534:\n' "$TOOL_UID" >"$rootfs/etc/group"
  chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"
  chmod 0755 "$rootfs" "$rootfs"/{bin,sbin,usr,usr/bin,usr/sbin,etc,workspace}
  chmod 1777 "$rootfs/tmp"
  tar "${TARFLAGS[@]}" --owner=0 --group=0 --exclude=./workspace -C "$rootfs" -cf "$out.tmp" .
  tar "${TARFLAGS[@]}" --owner="$TOOL_UID" --group="$TOOL_UID" --no-recursion -C "$rootfs" -rf "$out.tmp" ./workspace
  mv "$out.tmp" "$out"
}

# Image config shared by the base and every tool image. The sandbox sets
# user and working directory itself; these make a plain `docker run` sane.
COMMON_CHANGES=(
  --change 'ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin'
  --change 'WORKDIR /workspace'
  --change "USER $TOOL_UID:$TOOL_UID"
)

# ---- base ------------------------------------------------------------------
DEB=$(busybox_deb)
BASE_HASH=$( { sha256sum <"$DEB"; declare -f base_tar; printf '%s\n' "${COMMON_CHANGES[@]}"; } | sha)
BASE_TAR=$CACHE/base-rootfs-${BASE_HASH:0:16}.tar
if [[ ! -f $BASE_TAR ]]; then
  rm -f "$CACHE"/base-rootfs-*.tar
  base_tar "$DEB" "$BASE_TAR"
fi

# ---- tools: discovery and input hashes ---------------------------------------
MODULE=$(cd "$ROOT" && go list -m)
ALL_TOOLS=()
for dir in "$ROOT"/tools/*/; do
  [[ -f $dir/VERSION && -f $dir/main.go ]] && ALL_TOOLS+=("$(basename "$dir")")
done
# The egress proxy and the test upstream are images of their own, built
# when no name is given or when named.
WANT_PROXY=1 WANT_UPSTREAM=1 TOOLS_SELECTED=()
if ((${#SELECTED[@]})); then
  WANT_PROXY=0 WANT_UPSTREAM=0
  for name in "${SELECTED[@]}"; do
    case $name in
      egress-proxy) WANT_PROXY=1 ;;
      test-upstream) WANT_UPSTREAM=1 ;;
      *) TOOLS_SELECTED+=("$name") ;;
    esac
  done
fi
TOOL_NAMES=()
for name in "${ALL_TOOLS[@]}"; do
  if ((${#SELECTED[@]})) && [[ ! " ${TOOLS_SELECTED[*]} " == *" $name "* ]]; then continue; fi
  TOOL_NAMES+=("$name")
done
((${#SELECTED[@]} == 0 || ${#TOOL_NAMES[@]} == ${#TOOLS_SELECTED[@]})) || die "unknown tool in: ${TOOLS_SELECTED[*]} (have: ${ALL_TOOLS[*]})"

# One `go list` gives every tool's transitive imports; a tool's inputs are the
# non-test files of its own directory and of every package of this module it
# imports (go:embed fixtures included), go.sum when it imports another
# module, the Go version, the image recipe and the base rootfs.
declare -A DEPS VERSION HASH
while read -r pkg deps; do
  DEPS[$pkg]=$deps
done < <(cd "$ROOT" && go list -f '{{.ImportPath}}{{range .Deps}} {{.}}{{end}}' "${ALL_TOOLS[@]/#/./tools/}")
GOVERSION=$(go env GOVERSION)

# tool_dirs NAME: the tool's directory and those of the module packages it
# imports (relative to ROOT); sets EXTERNAL[NAME]=1 if it imports another module.
declare -A DIRS EXTERNAL
tool_dirs() {
  local name=$1 pkg list="tools/$1"
  EXTERNAL[$name]=0
  for pkg in ${DEPS[$MODULE/tools/$name]}; do
    if [[ $pkg == "$MODULE"/* ]]; then
      list+=" ${pkg#"$MODULE"/}"
    elif [[ ${pkg%%/*} == *.* ]]; then
      EXTERNAL[$name]=1
    fi
  done
  DIRS[$name]=$list
}

tool_hash() {
  local name=$1 line d
  {
    printf '%s\n' "$GOVERSION" "$BASE_HASH" "${VERSION[$name]}"
    declare -f tool_image
    if ((EXTERNAL[$name])); then cat "$ROOT/go.sum"; fi
    # Whole directories (embedded fixtures live in subdirectories); a
    # subpackage that is not imported only costs a spurious rebuild.
    for line in "${FILE_SUMS[@]}"; do
      for d in ${DIRS[$name]}; do
        if [[ ${line#* } == "$d"/* ]]; then
          printf '%s\n' "$line"
          break
        fi
      done
    done
  } | sha
}

for name in "${ALL_TOOLS[@]}"; do
  VERSION[$name]=$(tr -d '[:space:]' <"$ROOT/tools/$name/VERSION")
  [[ ${VERSION[$name]} =~ ^[0-9]+(\.[0-9]+){1,2}$ ]] || die "tools/$name/VERSION: '${VERSION[$name]}' is not a version"
done
declare -A UNION
for name in "${TOOL_NAMES[@]}"; do
  tool_dirs "$name"
  for d in ${DIRS[$name]}; do UNION[$d]=1; done
done
# Every input file hashed in one pass (process start-up dominates a no-op
# run on a busy machine); lines are "<sha256> <path relative to ROOT>".
FILE_SUMS=()
if ((${#UNION[@]})); then
  mapfile -t FILE_SUMS < <(cd "$ROOT" && find "${!UNION[@]}" -type f ! -name '*_test.go' ! -path '*/testdata/*' -print0 |
    sort -zu | xargs -0 sha256sum | sed 's/  / /')
fi
for name in "${TOOL_NAMES[@]}"; do
  HASH[$name]=$(tool_hash "$name")
done

tag_of() { printf 'agentflow/tool-%s:%s' "$1" "${VERSION[$1]}"; }
ALL_TAGS=("$BASE_TAG")
for name in "${ALL_TOOLS[@]}"; do ALL_TAGS+=("$(tag_of "$name")"); done
inspect_all "${ALL_TAGS[@]}"

# ---- build what is stale ------------------------------------------------------
if [[ ($FORCE == 0 || ${#SELECTED[@]} -gt 0) && ${LABEL[$BASE_TAG]:-} == "$BASE_HASH" ]]; then
  log "$BASE_TAG up to date"
else
  log "importing $BASE_TAG ($(basename "$DEB"))"
  docker import "${COMMON_CHANGES[@]}" \
    --change 'CMD ["/bin/sh"]' \
    --change "LABEL org.agentflow.base=1 $INPUTS_LABEL=$BASE_HASH" \
    --message "agentflow base from $(basename "$DEB")" \
    "$BASE_TAR" "$BASE_TAG" >/dev/null
fi

# tool_image NAME BIN: the base rootfs plus /bin/tool, imported with
# ENTRYPOINT /bin/tool and an empty CMD.
tool_image() {
  local name=$1 bin=$2 tarball=$WORK/$1.tar stage=$WORK/stage-$1
  mkdir -p "$stage/bin"
  install -m 0755 "$bin" "$stage/bin/tool"
  cp "$BASE_TAR" "$tarball"
  tar "${TARFLAGS[@]}" --owner=0 --group=0 -C "$stage" -rf "$tarball" ./bin/tool
  docker import "${COMMON_CHANGES[@]}" \
    --change 'ENTRYPOINT ["/bin/tool"]' \
    --change 'CMD []' \
    --change "LABEL org.agentflow.tool.name=$name org.agentflow.tool.version=${VERSION[$name]} $INPUTS_LABEL=${HASH[$name]}" \
    --message "agentflow tool $name ${VERSION[$name]}" \
    "$tarball" "$(tag_of "$name")" >/dev/null
}

STALE=()
for name in "${TOOL_NAMES[@]}"; do
  if [[ $FORCE == 1 || ${LABEL[$(tag_of "$name")]:-} != "${HASH[$name]}" ]]; then
    STALE+=("$name")
  fi
done
if ((${#STALE[@]})); then
  log "compiling ${STALE[*]}"
  mkdir -p "$WORK/bin"
  (cd "$ROOT" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags='-s -w' -o "$WORK/bin/" "${STALE[@]/#/./tools/}")
  for name in "${STALE[@]}"; do
    log "importing $(tag_of "$name")"
    tool_image "$name" "$WORK/bin/$name"
  done
  inspect_all "${ALL_TAGS[@]}"
else
  log "tool images up to date"
fi

# ---- the egress proxy ------------------------------------------------------------
# agentflow/egress-proxy:latest: /bin/agentflow-egress-proxy (static Go, from
# cmd/agentflow-egress-proxy) on an otherwise empty rootfs (no shell, no
# roots: the worker hands it the roots it trusts), a non-root numeric user.
# The egress boundary of every NetworkEgress sandbox (docs/security/egress.md).
PROXY_TAG=agentflow/egress-proxy:latest
PROXY_UID=65530
proxy_image() {
  local bin=$1 stage=$WORK/proxy-rootfs tarball=$WORK/proxy.tar
  mkdir -p "$stage/bin" "$stage/tmp"
  install -m 0755 "$bin" "$stage/bin/agentflow-egress-proxy"
  chmod 1777 "$stage/tmp"
  tar "${TARFLAGS[@]}" --owner=0 --group=0 -C "$stage" -cf "$tarball" .
  docker import \
    --change "USER $PROXY_UID:$PROXY_UID" \
    --change 'ENTRYPOINT ["/bin/agentflow-egress-proxy"]' \
    --change 'CMD []' \
    --change "LABEL org.agentflow.egress-proxy=1 $INPUTS_LABEL=$PROXY_HASH" \
    --message "agentflow egress proxy" \
    "$tarball" "$PROXY_TAG" >/dev/null
}
if ((WANT_PROXY)); then
  PROXY_HASH=$( {
    printf '%s\n' "$GOVERSION" "$PROXY_UID"
    declare -f proxy_image
    cat "$ROOT/go.sum"
    (cd "$ROOT" && go list -deps -f '{{if not .Standard}}{{if eq .Module.Path "'"$MODULE"'"}}{{.Dir}}{{end}}{{end}}' ./cmd/agentflow-egress-proxy |
      xargs -I{} find {} -maxdepth 1 -name '*.go' ! -name '*_test.go' | sort | xargs sha256sum | sed "s#  $ROOT/# #")
  } | sha)
  inspect_all "$PROXY_TAG"
  if [[ $FORCE == 0 && ${LABEL[$PROXY_TAG]:-} == "$PROXY_HASH" ]]; then
    log "$PROXY_TAG up to date"
  else
    log "building $PROXY_TAG"
    mkdir -p "$WORK/bin"
    (cd "$ROOT" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags='-s -w' -o "$WORK/bin/agentflow-egress-proxy" ./cmd/agentflow-egress-proxy)
    proxy_image "$WORK/bin/agentflow-egress-proxy"
    inspect_all "$PROXY_TAG"
  fi
fi

# ---- the test upstream -----------------------------------------------------------
# agentflow/test-upstream:latest: /bin/agentflow-upstream (static Go, from
# internal/testupstream/cmd/agentflow-upstream) on an otherwise empty rootfs
# and a non-root numeric user. Test infrastructure, never a tool: the feed,
# OpenAI-compatible stub, webhook receiver and SMTP sink that live specs
# reach in tests, recording what they receive (package
# internal/testupstream starts it; its TLS key pair arrives in the
# environment).
UPSTREAM_TAG=agentflow/test-upstream:latest
UPSTREAM_UID=65531
upstream_image() {
  local bin=$1 stage=$WORK/upstream-rootfs tarball=$WORK/upstream.tar
  mkdir -p "$stage/bin" "$stage/tmp"
  install -m 0755 "$bin" "$stage/bin/agentflow-upstream"
  chmod 1777 "$stage/tmp"
  tar "${TARFLAGS[@]}" --owner=0 --group=0 -C "$stage" -cf "$tarball" .
  docker import \
    --change "USER $UPSTREAM_UID:$UPSTREAM_UID" \
    --change 'ENTRYPOINT ["/bin/agentflow-upstream"]' \
    --change 'CMD []' \
    --change "LABEL org.agentflow.test-upstream=1 $INPUTS_LABEL=$UPSTREAM_HASH" \
    --message "agentflow test upstream" \
    "$tarball" "$UPSTREAM_TAG" >/dev/null
}
if ((WANT_UPSTREAM)); then
  # Inputs: every non-test file of the module's packages it links (the feed
  # fixture is embedded), go.sum, the Go version and the recipe.
  UPSTREAM_HASH=$( {
    printf '%s\n' "$GOVERSION" "$UPSTREAM_UID"
    declare -f upstream_image
    cat "$ROOT/go.sum"
    (cd "$ROOT" && go list -deps -f '{{if not .Standard}}{{if eq .Module.Path "'"$MODULE"'"}}{{.Dir}}{{end}}{{end}}' ./internal/testupstream/cmd/agentflow-upstream |
      xargs -I{} find {} -maxdepth 1 -type f ! -name '*_test.go' | sort | xargs sha256sum | sed "s#  $ROOT/# #")
  } | sha)
  inspect_all "$UPSTREAM_TAG"
  if [[ $FORCE == 0 && ${LABEL[$UPSTREAM_TAG]:-} == "$UPSTREAM_HASH" ]]; then
    log "$UPSTREAM_TAG up to date"
  else
    log "building $UPSTREAM_TAG"
    mkdir -p "$WORK/bin"
    (cd "$ROOT" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags='-s -w' -o "$WORK/bin/agentflow-upstream" ./internal/testupstream/cmd/agentflow-upstream)
    upstream_image "$WORK/bin/agentflow-upstream"
    inspect_all "$UPSTREAM_TAG"
  fi
fi

# ---- report --------------------------------------------------------------------
printf '%-40s %s\n' "$BASE_TAG" "${ID[$BASE_TAG]}"
if ((WANT_PROXY)); then printf '%-40s %s\n' "$PROXY_TAG" "${ID[$PROXY_TAG]}"; fi
if ((WANT_UPSTREAM)); then printf '%-40s %s\n' "$UPSTREAM_TAG" "${ID[$UPSTREAM_TAG]}"; fi
for name in "${TOOL_NAMES[@]}"; do
  printf '%-40s %s\n' "$(tag_of "$name")" "${ID[$(tag_of "$name")]}"
done

# images.json lists every tool that has an image, even when only some were built.
{
  printf '['
  sep=''
  for name in "${ALL_TOOLS[@]}"; do
    tag=$(tag_of "$name")
    [[ -n ${ID[$tag]:-} ]] || continue
    printf '%s\n  {"name":"%s","version":"%s","tag":"%s","id":"%s"}' "$sep" "$name" "${VERSION[$name]}" "$tag" "${ID[$tag]}"
    sep=','
  done
  printf '\n]\n'
} >"$WORK/images.json"
mv "$WORK/images.json" "$DATA/images.json"
log "wrote ${DATA#"$ROOT"/}/images.json"
