#!/bin/sh
# Starts nginx with docker/nginx.conf (mounted at /etc/nginx/nginx.conf.in):
# @RESOLVER@ becomes the container's own name server (Docker's 127.0.0.11 on
# a compose network; the host's on a host network), @PORT@ $SYMBOLS_PROXY_PORT
# (8080) and @UPSTREAM@ $SYMBOLS_UPSTREAM (Microsoft's public symbol server).
set -eu
ns=$(awk '$1 == "nameserver" { print $2; exit }' /etc/resolv.conf 2>/dev/null || true)
case "$ns" in *:*) ns="[$ns]" ;; esac
sed -e "s|@RESOLVER@|${ns:-127.0.0.11}|" \
    -e "s|@PORT@|${SYMBOLS_PROXY_PORT:-8080}|" \
    -e "s|@UPSTREAM@|${SYMBOLS_UPSTREAM:-https://msdl.microsoft.com/download/symbols}|" \
    /etc/nginx/nginx.conf.in > /tmp/nginx.conf
exec nginx -c /tmp/nginx.conf -g 'daemon off;'
