package config_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// contractNames are the exchanges and queues of the topology of prefix,
// by kind: "exchange", or a queue's role.
func contractNames(t *testing.T, prefix string) map[string][]string {
	t.Helper()
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	out := map[string][]string{"exchange": tp.Exchanges()}
	for _, q := range tp.Queues() {
		out[string(q.Role)] = append(out[string(q.Role)], q.Name)
	}
	return out
}

// matched are the names of every kind that expr matches.
func matched(t *testing.T, expr string, names map[string][]string) []string {
	t.Helper()
	re, err := regexp.Compile(expr)
	require.NoError(t, err, expr)
	var out []string
	for _, kind := range names {
		for _, n := range kind {
			if re.MatchString(n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

func union(lists ...[]string) []string {
	out := slices.Concat(lists...)
	slices.Sort(out)
	return out
}

// Each binary's user may do what the binary does on the broker and no
// more, over the contract's names: only the api and islectl declare; the
// worker reads the main queues and DLQs (not the retry queues) and writes
// the exchanges (retry and DLQ copies); the relay only writes the
// exchanges; the reconciler only the replication exchange. Whatever the
// prefix.
func TestBrokerUsersHaveTheLeastPermissions(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"eisland", "t-1_x"} {
		users, err := config.BrokerUsers(prefix)
		require.NoError(t, err)
		n := contractNames(t, prefix)
		every := union(n["exchange"], n["main"], n["retry"], n["dlq"])
		byBinary := map[string]config.BrokerUser{}
		for _, u := range users {
			byBinary[u.Binary] = u
			require.Equal(t, "isle-"+u.Binary, u.Name)
		}
		require.Len(t, byBinary, 5)
		for _, bin := range []string{"api", "islectl"} {
			u := byBinary[bin]
			require.Equal(t, every, matched(t, u.Configure, n), bin)
			require.Equal(t, every, matched(t, u.Write, n), bin)
			require.Equal(t, union(n["exchange"], n["retry"]), matched(t, u.Read, n), "%s binds from exchanges and declares retry queues", bin)
			require.Equal(t, "management", u.Tags, bin)
		}
		w := byBinary["worker"]
		require.Empty(t, matched(t, w.Configure, n))
		require.Equal(t, union(n["exchange"]), matched(t, w.Write, n))
		require.Equal(t, union(n["main"], n["dlq"]), matched(t, w.Read, n))
		require.Empty(t, w.Tags)
		r := byBinary["relay"]
		require.Empty(t, matched(t, r.Configure, n))
		require.Equal(t, union(n["exchange"]), matched(t, r.Write, n))
		require.Empty(t, matched(t, r.Read, n))
		require.Empty(t, r.Tags)
		c := byBinary["reconcile"]
		require.Empty(t, matched(t, c.Configure, n))
		require.Equal(t, []string{prefix + ".object.replication.exchange"}, matched(t, c.Write, n))
		require.Empty(t, matched(t, c.Read, n))
		require.Equal(t, "management", c.Tags, "balance-sync reads queue depths through the management API")
	}
}

// definitions is a RabbitMQ definitions file, as far as Isle's users go.
type definitions struct {
	VHosts []struct {
		Name string `json:"name"`
	} `json:"vhosts"`
	Users       []defUser       `json:"users"`
	Permissions []defPermission `json:"permissions"`
}

type defUser struct {
	Name     string   `json:"name"`
	Password string   `json:"password"`
	Tags     []string `json:"tags"`
}

type defPermission struct {
	User      string `json:"user"`
	VHost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// checkDefinitions holds a definitions file to the users of BrokerUsers on
// the vhost "/", and returns each user's password.
func checkDefinitions(t *testing.T, file string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var d definitions
	require.NoError(t, json.Unmarshal(raw, &d))
	require.Len(t, d.VHosts, 1)
	require.Equal(t, "/", d.VHosts[0].Name)
	users, err := config.BrokerUsers(topology.DefaultPrefix)
	require.NoError(t, err)
	passwords := map[string]string{}
	for _, u := range d.Users {
		require.NotEqual(t, "guest", u.Name, file)
		require.NotEmpty(t, u.Password, u.Name)
		passwords[u.Name] = u.Password
	}
	for _, u := range users {
		i := slices.IndexFunc(d.Users, func(du defUser) bool { return du.Name == u.Name })
		require.GreaterOrEqual(t, i, 0, "%s has no user %s", file, u.Name)
		require.Equal(t, strings.Join(d.Users[i].Tags, ","), u.Tags, u.Name)
		var found int
		for _, p := range d.Permissions {
			if p.User != u.Name {
				continue
			}
			found++
			require.Equal(t, "/", p.VHost, u.Name)
			require.Equal(t, []string{u.Configure, u.Write, u.Read}, []string{p.Configure, p.Write, p.Read}, "%s: %s", file, u.Name)
		}
		require.Equal(t, 1, found, "%s: permissions of %s", file, u.Name)
	}
	return passwords
}

// Each Isle service of the compose file connects to RabbitMQ as the user
// of its binary, never guest; the broker's definitions make those users
// with the permissions BrokerUsers says (and an administrator for the
// management UI), and no guest.
func TestComposeHasOneRabbitMQUserPerBinary(t *testing.T) {
	t.Parallel()
	doc := readCompose(t)
	require.NotContains(t, doc.Shared.Environment, "RABBITMQ_USERNAME", "each service says whose it is")
	require.NotContains(t, doc.Shared.Environment, "RABBITMQ_PASSWORD")
	passwords := checkDefinitions(t, root+"deploy/rabbitmq/definitions.json")
	for name, s := range doc.Services {
		if s.Build == nil {
			continue
		}
		bin := s.binary()
		if name == "migrate" {
			bin = "islectl" // islectl migrate && islectl topology apply
		}
		require.NotEmpty(t, bin, name)
		user := s.Environment["RABBITMQ_USERNAME"]
		require.Equal(t, "isle-"+bin, user, "%s connects as %s's user", name, bin)
		require.Equal(t, passwords[user], s.Environment["RABBITMQ_PASSWORD"], name)
	}
	rabbit := doc.Services["rabbitmq"]
	require.Contains(t, rabbit.Volumes, "./deploy/rabbitmq/definitions.json:/etc/rabbitmq/isle-definitions.json:ro")
	require.Contains(t, rabbit.Volumes, "./deploy/rabbitmq/isle.conf:/etc/rabbitmq/conf.d/20-isle.conf:ro")
	conf, err := os.ReadFile(root + "deploy/rabbitmq/isle.conf")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^load_definitions = /etc/rabbitmq/isle-definitions\.json$`, string(conf))
}

// doc/deploy.md shows the commands that make each user, as BrokerUsers
// says, for the default prefix and vhost.
func TestDeployDocShowsTheRabbitMQUsers(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(root + "doc/deploy.md")
	require.NoError(t, err)
	users, err := config.BrokerUsers(topology.DefaultPrefix)
	require.NoError(t, err)
	for _, u := range users {
		for _, line := range u.Rabbitmqctl("/") {
			require.Contains(t, string(raw), "\n"+line+"\n", "doc/deploy.md does not show %q", line)
		}
	}
}

// The local Kubernetes overlay's RabbitMQ makes the same users (and
// isle-keda, which only reads queue lengths: no permission), and the
// Secrets the pods and KEDA take them from hold their names and passwords.
func TestLocalKubernetesOverlayHasTheRabbitMQUsers(t *testing.T) {
	t.Parallel()
	dir := root + "deploy/k8s/overlays/local/"
	passwords := checkDefinitions(t, dir+"rabbitmq/definitions.json")
	raw, err := os.ReadFile(dir + "rabbitmq/definitions.json")
	require.NoError(t, err)
	var d definitions
	require.NoError(t, json.Unmarshal(raw, &d))
	require.Contains(t, d.Permissions, defPermission{User: "isle-keda", VHost: "/", Configure: "^$", Write: "^$", Read: "^$"})

	env, err := os.ReadFile(dir + "rabbitmq-users.env")
	require.NoError(t, err)
	secret := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(env)), "\n") {
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, line)
		secret[k] = v
	}
	users, err := config.BrokerUsers(topology.DefaultPrefix)
	require.NoError(t, err)
	require.Len(t, secret, 2*len(users))
	for _, u := range users {
		require.Equal(t, u.Name, secret[u.Binary+"-username"])
		require.Equal(t, passwords[u.Name], secret[u.Binary+"-password"], u.Name)
	}
	kust, err := os.ReadFile(dir + "kustomization.yaml")
	require.NoError(t, err)
	require.Contains(t, string(kust), "host=amqp://isle-keda:"+passwords["isle-keda"]+"@")
	conf, err := os.ReadFile(dir + "rabbitmq/isle.conf")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^load_definitions = /etc/rabbitmq/isle-definitions\.json$`, string(conf))
	deps, err := os.ReadFile(dir + "deps.yaml")
	require.NoError(t, err)
	require.Contains(t, string(deps), "{name: isle, mountPath: /etc/rabbitmq/isle-definitions.json, subPath: definitions.json}")
}
