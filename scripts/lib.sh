# shellcheck shell=bash
# Helpers shared by scripts/up and scripts/test: find Go, and make sure
# MariaDB/MySQL, Redis and RabbitMQ (with its management API) are running on
# this machine. A service that is installed but stopped is started; one that
# is missing is installed from Debian's packages when running as root;
# otherwise the script says exactly what is missing. Set ISLE_SKIP_SERVICES=1
# to manage the services yourself (then set MYSQL_DSN and friends).

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" = 0 ]; }

# port_open HOST PORT: is something listening?
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# wait_port HOST PORT SECONDS NAME
wait_port() {
  local i
  for ((i = 0; i < $3 * 4; i++)); do
    port_open "$1" "$2" && return 0
    sleep 0.25
  done
  die "$4 did not open $1:$2 within $3 s"
}

apt_install() {
  if ! is_root || ! command -v apt-get >/dev/null; then
    return 1
  fi
  say "installing $* from Debian packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1 ||
    { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends "$@" >/dev/null; }
}

ensure_go() {
  if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
    export PATH="/usr/local/go/bin:$PATH"
  fi
  command -v go >/dev/null || die "Go is not installed: install Go 1.26 or newer from https://go.dev/dl and put it on PATH"
  local v
  v=$(go env GOVERSION | sed 's/^go//')
  case "$v" in
    1.2[6-9]* | 1.[3-9]* | [2-9].*) ;;
    *) die "Go $v is too old: Isle needs Go 1.26 or newer (https://go.dev/dl)" ;;
  esac
}

ensure_mariadb() {
  if port_open 127.0.0.1 3306; then return 0; fi
  local server
  server=$(command -v mariadbd || command -v mysqld || ls /usr/sbin/mariadbd /usr/sbin/mysqld 2>/dev/null | head -n1 || true)
  if [ -z "$server" ]; then
    apt_install mariadb-server mariadb-client ||
      die "MariaDB/MySQL is not installed and this is not root: run 'sudo apt-get install mariadb-server', or point MYSQL_DSN at a server and set ISLE_SKIP_SERVICES=1"
    server=$(command -v mariadbd || echo /usr/sbin/mariadbd)
  fi
  say "starting MariaDB ($server)"
  if is_root; then
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
    start-stop-daemon --start --oknodo --background --exec "$server" ||
      die "could not start $server"
  else
    die "MariaDB is installed but stopped, and starting it needs root: run 'sudo systemctl start mariadb' (or 'sudo service mariadb start')"
  fi
  wait_port 127.0.0.1 3306 60 MariaDB
}

ensure_redis() {
  if port_open 127.0.0.1 6379; then return 0; fi
  if ! command -v redis-server >/dev/null; then
    apt_install redis-server ||
      die "Redis is not installed and this is not root: run 'sudo apt-get install redis-server', or set ISLE_SKIP_SERVICES=1 and REDIS_HOST/REDIS_PORT"
  fi
  say "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null ||
    die "could not start redis-server"
  wait_port 127.0.0.1 6379 20 Redis
}

ensure_rabbitmq() {
  if ! port_open 127.0.0.1 5672; then
    if ! command -v rabbitmq-server >/dev/null; then
      apt_install rabbitmq-server ||
        die "RabbitMQ is not installed and this is not root: run 'sudo apt-get install rabbitmq-server', or set ISLE_SKIP_SERVICES=1 and RABBITMQ_HOST/RABBITMQ_PORT"
    fi
    is_root || die "RabbitMQ is installed but stopped, and starting it needs root: run 'sudo systemctl start rabbitmq-server'"
    say "starting RabbitMQ (this takes a few seconds)"
    rabbitmq-server -detached >/dev/null 2>&1 || true
    wait_port 127.0.0.1 5672 120 RabbitMQ
  fi
  if ! port_open 127.0.0.1 15672; then
    say "enabling the RabbitMQ management API (islectl topology verify reads bindings through it)"
    if is_root; then
      rabbitmq-plugins enable rabbitmq_management >/dev/null ||
        die "could not enable rabbitmq_management: run 'rabbitmq-plugins enable rabbitmq_management'"
    else
      die "the RabbitMQ management API is off: run 'sudo rabbitmq-plugins enable rabbitmq_management'"
    fi
    wait_port 127.0.0.1 15672 60 "RabbitMQ management"
  fi
}

ensure_services() {
  if [ "${ISLE_SKIP_SERVICES:-}" = 1 ]; then return 0; fi
  ensure_mariadb
  ensure_redis
  ensure_rabbitmq
}

# ensure_chromium: the operator console's browser test (internal/service/console)
# drives Debian's chromium headless; it is installed as root when missing,
# and otherwise that test skips itself.
ensure_chromium() {
  command -v chromium >/dev/null && return 0
  apt_install chromium ||
    say "chromium is not installed (and this is not root with apt): the console's browser test will skip"
}

# ensure_trace_viewer builds the trace viewer scripts/up -tracing runs,
# otel-desktop-viewer (pinned by tools/viewer, a module of its own so that
# its dependencies stay out of Isle's), into bin/ when it is not there.
# It embeds DuckDB, which needs cgo: gcc and g++ are installed from Debian
# when missing. It returns 1, having said why, when it cannot be built.
ensure_trace_viewer() {
  [ -x bin/otel-desktop-viewer ] && return 0
  if ! command -v gcc >/dev/null || ! command -v g++ >/dev/null; then
    apt_install gcc g++ || {
      say "the trace viewer needs a C and a C++ compiler (sudo apt-get install gcc g++): not built"
      return 1
    }
  fi
  say "building the trace viewer into bin/ (once, about two minutes)"
  (cd tools/viewer && CGO_ENABLED=1 go build -o ../../bin/otel-desktop-viewer github.com/CtrlSpice/otel-desktop-viewer) || {
    say "the trace viewer did not build (see above)"
    return 1
  }
}

# mysql_server_dsn prints a DSN (without a database) that Isle can use on the
# local server. root over TCP with an empty password is tried first; where
# Debian's MariaDB refuses it (ERROR 1698, unix_socket authentication), an
# `isle` user is created through the socket and used instead.
mysql_server_dsn() {
  if [ -n "${ISLE_MYSQL_SERVER_DSN:-}" ]; then
    echo "$ISLE_MYSQL_SERVER_DSN"
    return 0
  fi
  command -v mysql >/dev/null || apt_install mariadb-client ||
    die "the mysql client is missing: run 'sudo apt-get install mariadb-client'"
  if mysql -uroot -h127.0.0.1 -P3306 -e 'SELECT 1' >/dev/null 2>&1; then
    echo "root@tcp(127.0.0.1:3306)/"
    return 0
  fi
  if mysql -uisle -pisle -h127.0.0.1 -P3306 -e 'SELECT 1' >/dev/null 2>&1; then
    echo "isle:isle@tcp(127.0.0.1:3306)/"
    return 0
  fi
  local as_root=(mysql -uroot)
  if ! is_root; then as_root=(sudo -n mysql -uroot); fi
  local sql="CREATE USER IF NOT EXISTS 'isle'@'localhost' IDENTIFIED BY 'isle';
CREATE USER IF NOT EXISTS 'isle'@'127.0.0.1' IDENTIFIED BY 'isle';
GRANT ALL PRIVILEGES ON \`isle\`.* TO 'isle'@'localhost', 'isle'@'127.0.0.1';
GRANT ALL PRIVILEGES ON \`isle\\_%\`.* TO 'isle'@'localhost', 'isle'@'127.0.0.1';"
  if "${as_root[@]}" -e "$sql" >/dev/null 2>&1; then
    say "root may not log in over TCP here (socket authentication): created MySQL user 'isle' for Isle"
    echo "isle:isle@tcp(127.0.0.1:3306)/"
    return 0
  fi
  die "cannot log in to MariaDB as root over TCP, nor create a user through the socket. As the database admin, run:
$sql"
}

# ensure_jwt_secret FILE: make sure FILE holds a random HS256 key for the
# API's tokens, made on the first run (readable by this user only) and
# reused after, so tokens minted by `bin/islectl token` stay valid across
# restarts. The binaries read it from API_JWT_SECRET_FILE's default,
# var/jwt-secret, when API_JWT_SECRET is unset.
ensure_jwt_secret() {
  [ -s "$1" ] && return 0
  say "generating the API's token key into $1 (random, git-ignored, reused by later runs)"
  mkdir -p "$(dirname "$1")"
  (
    umask 077
    od -An -tx1 -N32 /dev/urandom | tr -dc 0-9a-f >"$1.tmp" && mv "$1.tmp" "$1"
  ) || die "could not write $1"
  [ "$(wc -c <"$1")" -ge 32 ] || die "could not read random bytes into $1"
}

# loopback_addr HOST:PORT: true when the address listens on this machine
# only (127.x.x.x, localhost or [::1]); an empty host or 0.0.0.0 is every
# interface.
loopback_addr() {
  case "${1%:*}" in
    127.* | localhost | "[::1]") return 0 ;;
    *) return 1 ;;
  esac
}

# use_local_paykeys DIR ISLECTL: with no PAYMENT_ALIPAY_* or PAYMENT_WECHAT_*
# variable set, configures the API with LOCAL TEST payment gateway keys:
# made in DIR on the first run (ISLECTL pay keys), reused after; sources
# DIR/payment.env and exports ISLE_DEV=1, without which the API refuses
# test keys (doc/payments.md). Test keys only: anyone holding them can fake
# a payment. With a gateway's variable set, the gateways' own keys are
# configured: it does nothing, ISLE_DEV included, and returns 1.
use_local_paykeys() {
  if compgen -e PAYMENT_ALIPAY_ >/dev/null || compgen -e PAYMENT_WECHAT_ >/dev/null; then
    return 1
  fi
  if [ ! -s "$1/payment.env" ]; then
    say "generating local TEST payment gateway keys into $1 (never for production)"
    "$2" pay keys -dir "$1" >/dev/null || die "could not write test payment gateway keys into $1"
  fi
  # shellcheck source=/dev/null
  . "$1/payment.env"
  ISLE_DEV=1
  export ISLE_DEV
}
