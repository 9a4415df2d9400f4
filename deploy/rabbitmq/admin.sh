#!/bin/sh
# Makes the administrator of the management UI, isle-admin, with the
# password of RABBITMQ_ADMIN_PASSWORD, or gives it that password again, so
# that a changed .env applies at the next start. docker-compose.yml runs it
# in a one-shot container beside the node: the CLI reaches the node
# (RABBITMQ_NODE) over Erlang distribution with the node's cookie
# (RABBITMQ_COOKIE_FILE, from the node's data volume). definitions.json
# beside it makes only the binaries' users, so no administrator's password
# is in the repository (doc/deploy.md, "RabbitMQ users").
set -eu
: "${RABBITMQ_ADMIN_PASSWORD:?set it in .env, which deploy/compose-env writes}"
node="${RABBITMQ_NODE:-rabbit@rabbitmq}"
user="${RABBITMQ_ADMIN_USER:-isle-admin}"
cookie="$(cat "${RABBITMQ_COOKIE_FILE:-/var/lib/rabbitmq/.erlang.cookie}")"

ctl() { rabbitmqctl -q -n "$node" --erlang-cookie "$cookie" "$@"; }

if ctl list_users | cut -f1 | grep -qxF "$user"; then
  ctl change_password "$user" "$RABBITMQ_ADMIN_PASSWORD"
else
  ctl add_user "$user" "$RABBITMQ_ADMIN_PASSWORD"
fi
ctl set_user_tags "$user" administrator
ctl set_permissions -p / "$user" '.*' '.*' '.*'
echo "$user is an administrator of $node"
