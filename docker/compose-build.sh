#!/usr/bin/env bash
# Builds every image docker/compose.yaml names, on a Debian 12 host with no
# Docker engine and no registry (podman as root, as docker/build.sh):
#   localhost/pdbsym:latest             docker/build.sh
#   localhost/pdbsym-sample-app:latest  docker/sample-app/publish.sh (the .NET 10 SDK on
#                                       the host), then its Dockerfile
#   localhost/pdbsym-tools:latest       docker/Dockerfile.tools (nginx, python3)
# then run it with docker/compose-run.py up (and down), which reads the same file.
# env: CONTAINER_STATE as docker/build.sh's
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export CONTAINER_STATE=${CONTAINER_STATE:-${TMPDIR:-/tmp}/pdbsym-container-state}
"$here/build.sh" localhost/pdbsym:latest
"$here/sample-app/publish.sh"
py=python3
[[ -x /usr/bin/python3 ]] && py=/usr/bin/python3   # Debian's, with python3-yaml
if ! "$py" -c 'import yaml' 2>/dev/null; then
  echo "apt-get install python3-yaml (compose-run.py reads compose.yaml with it)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-yaml >/dev/null
fi
"$py" "$here/compose-run.py" build app pyroscope
echo "built; now: CONTAINER_STATE=$CONTAINER_STATE $here/compose-run.py up" >&2
