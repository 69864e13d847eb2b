#!/bin/sh
# One node of an enterprise subnet, as deploy/compose.yaml runs it (and tests/node/test_deploy_subnet.py, in network
# namespaces): make the home at first start, exchange node ids and invitations through a shared directory (what an
# admin would hand over by hand), then serve.
#
#   GAML_ROLE      admin | member | relay. The admin creates the subnet and invites the others.
#   GAML_NAME      this node's name (its files in the exchange directory are NAME.id, NAME.peer, NAME.invite)
#   GAML_EXCHANGE  the shared directory (a volume holding node ids and invitations; no key, no memory)
#   GAML_SUBNET    the subnet's name (default acme); GAML_TENANT its tenant (default: the subnet's name)
#   GAML_INVITE    (admin) the names of the members to invite; GAML_INVITE_RELAYS the relays'
#   GAML_PRINCIPAL who writes the tenant's memory on this node (default ops); the relay's daemon acts as "relay"
#   GAML_LISTEN    where libp2p listens (default /ip4/0.0.0.0/tcp/4001)
#   GAML_RELAY     (admin, member) the relay's address without /p2p/ (default /dns4/relay/tcp/4001);
#                  GAML_RELAY_NAME its name in the exchange directory (default relay)
#   GAML_EMBEDDER  minilm (default) or hash, for a new home
#   GAML_WAIT_S    how long to wait for another node's file (default 600)
# The keychain's key: GAML_KEYCHAIN_KEY_FILE (a secret) or GAML_KEYCHAIN_KEY; GAML_HOME: the home (a volume).
# Arguments after the script's name go to `gaml run` (e.g. --metrics 0.0.0.0:9464).
set -eu

: "${GAML_ROLE:?admin, member or relay}" "${GAML_NAME:?the name of this node}" "${GAML_EXCHANGE:?the shared directory}"
SUBNET=${GAML_SUBNET:-acme}
TENANT=${GAML_TENANT:-$SUBNET}
PRINCIPAL=${GAML_PRINCIPAL:-ops}
LISTEN=${GAML_LISTEN:-/ip4/0.0.0.0/tcp/4001}
RELAY=${GAML_RELAY:-/dns4/relay/tcp/4001}
RELAY_NAME=${GAML_RELAY_NAME:-relay}
EX=$GAML_EXCHANGE
WAIT_S=${GAML_WAIT_S:-600}

say() { printf '{"event": "subnet_node", "node": "%s", "step": "%s"}\n' "$GAML_NAME" "$1" >&2; }

wait_file() {  # the file, once another node has written it
  waited=0
  while [ ! -s "$1" ]; do
    if [ "$waited" -ge $((WAIT_S * 5)) ]; then
      say "gave up waiting for $1"
      exit 1
    fi
    sleep 0.2
    waited=$((waited + 1))
  done
}

publish() {  # write NAME.KIND in the exchange directory atomically
  printf '%s\n' "$2" >"$EX/.$GAML_NAME.$1.tmp"
  mv "$EX/.$GAML_NAME.$1.tmp" "$EX/$GAML_NAME.$1"
}

peers_field() {  # a field of `gaml peers --json` (the node is not running yet)
  gaml peers --json | python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

in_subnet() {
  gaml peers --json | python3 -c '
import json, sys
sys.exit(0 if any(b["name"] == sys.argv[1] for b in json.load(sys.stdin)["boundaries"]) else 1)' "$SUBNET"
}

if [ "$GAML_ROLE" = relay ]; then PRINCIPAL=relay; fi
if [ ! -e "${GAML_HOME:-$HOME/.gaml}/config.toml" ]; then
  gaml init --embedder "${GAML_EMBEDDER:-minilm}" --user "$PRINCIPAL" >/dev/null
  say "initialised"
fi
mkdir -p "$EX"
publish id "$(peers_field node_id)"
publish peer "$(peers_field peer_id)"

case "$GAML_ROLE" in
  admin)
    in_subnet || gaml subnet create "$SUBNET" --tenant "$TENANT" >/dev/null
    # Each node is invited once: after a restart, a member removed since (gaml subnet remove) stays removed.
    for n in ${GAML_INVITE:-}; do
      wait_file "$EX/$n.id"
      [ -s "$EX/$n.invite" ] || gaml subnet invite "$SUBNET" "$(cat "$EX/$n.id")" --out "$EX/$n.invite" >/dev/null
    done
    for n in ${GAML_INVITE_RELAYS:-}; do
      wait_file "$EX/$n.id"
      [ -s "$EX/$n.invite" ] || gaml subnet invite "$SUBNET" "$(cat "$EX/$n.id")" --relay --out "$EX/$n.invite" >/dev/null
    done
    say "invited"
    ;;
  member | relay)
    wait_file "$EX/$GAML_NAME.invite"
    in_subnet || gaml subnet join "$EX/$GAML_NAME.invite" >/dev/null
    say "joined"
    ;;
  *)
    say "unknown role $GAML_ROLE"
    exit 2
    ;;
esac

if [ "$GAML_ROLE" = relay ]; then
  exec gaml run --p2p "$LISTEN" "$@"
fi
gaml principal add "$PRINCIPAL" --tenant "$TENANT" >/dev/null
wait_file "$EX/$RELAY_NAME.peer"
exec gaml run --p2p "$LISTEN" --peer "$RELAY/p2p/$(cat "$EX/$RELAY_NAME.peer")" "$@"
