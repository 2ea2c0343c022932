#!/usr/bin/env bash
# Removes an emulated cluster made by up.sh: ends every process still running on its nodes
# and in its switch (SIGTERM, then SIGKILL after 5 s), deletes its namespaces (which takes
# their links with them) and its state folder. Safe to call twice or after a failed up.sh.
#
#   tools/cluster/down.sh NAME
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/cluster_lib.sh"
[ $# -eq 1 ] || cluster_die "usage: down.sh NAME"
name=$1
cluster_check_name "$name"

namespaces=$(ip netns list 2>/dev/null | awk -v p="^$name-(n[0-9]+|sw)\$" '$1 ~ p { print $1 }')
pids() { for ns in $namespaces; do ip netns pids "$ns" 2>/dev/null; done; }
left=$(pids)
if [ -n "$left" ]; then
  kill $left 2>/dev/null
  for _ in $(seq 1 50); do
    [ -z "$(pids)" ] && break
    sleep 0.1
  done
  left=$(pids)
  if [ -n "$left" ]; then
    cluster_log "$name: processes $left ignored SIGTERM for 5 s; sending SIGKILL"
    kill -9 $left 2>/dev/null
    sleep 0.2
  fi
fi
status=0
for ns in $namespaces; do
  ip netns del "$ns" || { cluster_log "could not delete namespace $ns"; status=1; }
done
rm -rf "$(cluster_state "$name")"
[ -n "$namespaces" ] && cluster_log "down: $name ($(echo $namespaces | wc -w) namespaces removed)"
exit $status
