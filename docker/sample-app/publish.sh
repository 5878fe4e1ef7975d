#!/usr/bin/env bash
# Publishes the sample app self-contained for linux-x64 into docker/sample-app/out
# (the runtime pack comes from NuGet), where docker/sample-app/Dockerfile takes it.
# Needs the .NET 10 SDK on the host (`dotnet`); the image itself holds no SDK.
#   docker/sample-app/publish.sh [OUT]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/out}
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_SKIP_FIRST_TIME_EXPERIENCE=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/SampleApp.csproj" "$here/Program.cs" "$work/"
# -p:PathMap: the PDB names the sources /_/Program.cs, not this machine's folder
dotnet publish "$work/SampleApp.csproj" -c Release -o "$out" -nologo -v q \
  --disable-build-servers -p:PathMap="$work=/_/"
