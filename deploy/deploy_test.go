// Package deploy_test checks the deployment files in deploy/: each parses,
// and what one file says agrees with baton and with the others (the mounted
// config loads, probes hit real endpoints, ports and grace periods agree,
// nothing runs as root).
package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/batonhttp"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// testKey is a signing key for configs that take one from the environment.
const testKey = "0123456789abcdef0123456789abcdef"

// doc is a loosely typed YAML document, read with path lookups.
type doc = map[string]any

func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// yamlDocs reads every document of a YAML file.
func yamlDocs(t *testing.T, path string) []doc {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []doc
	for {
		var d doc
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, d)
	}
}

// loadConfig loads a mounted job list as a replica would, with the
// environment variables it names set.
func loadConfig(t *testing.T, what string, data []byte, env map[string]string) *config.Config {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	cfg, err := config.Load(data)
	if err != nil {
		t.Fatalf("%s does not load: %v", what, err)
	}
	return cfg
}

// probe asks baton's own HTTP handler for path and fails unless it is an
// endpoint baton serves.
func probe(t *testing.T, h http.Handler, path string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code == http.StatusNotFound || rec.Code == http.StatusMethodNotAllowed {
		t.Errorf("probe path %s: baton answers %d", path, rec.Code)
	}
}

func port(t *testing.T, listen string) int {
	t.Helper()
	i := strings.LastIndexByte(listen, ':')
	p, err := strconv.Atoi(listen[i+1:])
	if i < 0 || err != nil {
		t.Fatalf("no port in %q", listen)
	}
	return p
}

func TestKubernetes(t *testing.T) {
	kinds := map[string]doc{}
	for _, d := range yamlDocs(t, "kubernetes/baton.yaml") {
		kinds[str(d["kind"])] = d
	}
	for _, k := range []string{"ConfigMap", "Deployment", "Service", "PodDisruptionBudget"} {
		if kinds[k] == nil {
			t.Fatalf("kubernetes/baton.yaml has no %s", k)
		}
	}
	cm, dep, svc, pdb := kinds["ConfigMap"], kinds["Deployment"], kinds["Service"], kinds["PodDisruptionBudget"]
	cfg := loadConfig(t, "the ConfigMap's baton.yaml", []byte(str(get(cm, "data", "baton.yaml"))),
		map[string]string{"BATON_REDIS_URL": "redis://127.0.0.1:6379/0", "BATON_SIGNING_KEY": testKey})

	spec := get(dep, "spec", "template", "spec")
	if n := get(dep, "spec", "replicas"); n != 3 {
		t.Errorf("replicas = %v, want 3", n)
	}
	c := get(spec, "containers", 0)
	// the config is mounted where BATON_CONFIG points
	env := map[string]string{}
	for _, e := range get(c, "env").([]any) {
		env[str(get(e, "name"))] = str(get(e, "value"))
	}
	mounted := false
	for _, m := range get(c, "volumeMounts").([]any) {
		if strings.HasPrefix(env["BATON_CONFIG"], str(get(m, "mountPath"))+"/") {
			mounted = true
		}
	}
	if !mounted || !strings.HasSuffix(env["BATON_CONFIG"], "/baton.yaml") {
		t.Errorf("BATON_CONFIG %q is not the mounted ConfigMap's baton.yaml", env["BATON_CONFIG"])
	}
	// ports: http.listen = containerPort "http" = the probes' and the
	// Service's target
	if got, want := get(c, "ports", 0, "containerPort"), port(t, cfg.HTTP.Listen); got != want {
		t.Errorf("containerPort %v, but the config listens on %d", got, want)
	}
	if get(c, "ports", 0, "name") != "http" || str(get(svc, "spec", "ports", 0, "targetPort")) != "http" {
		t.Errorf("the Service must target the container's named port http")
	}
	h := batonhttp.NewHandler()
	defer h.Close()
	for _, p := range []string{"livenessProbe", "readinessProbe"} {
		if str(get(c, p, "httpGet", "port")) != "http" {
			t.Errorf("%s does not probe the http port", p)
		}
		probe(t, h, str(get(c, p, "httpGet", "path")))
	}
	if str(get(c, "livenessProbe", "httpGet", "path")) != "/healthz" || str(get(c, "readinessProbe", "httpGet", "path")) != "/readyz" {
		t.Errorf("liveness must probe /healthz and readiness /readyz")
	}
	// grace: running jobs finish before the kubelet's SIGKILL
	grace := time.Duration(get(spec, "terminationGracePeriodSeconds").(int)) * time.Second
	if grace <= cfg.Worker.ShutdownGrace+5*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v must exceed worker.shutdown_grace %v by a margin", grace, cfg.Worker.ShutdownGrace)
	}
	// nobody runs as root, nothing writes the image
	if get(spec, "securityContext", "runAsNonRoot") != true || get(spec, "securityContext", "runAsUser") == 0 {
		t.Errorf("the pod must run as non-root")
	}
	if get(c, "securityContext", "readOnlyRootFilesystem") != true || get(c, "securityContext", "allowPrivilegeEscalation") != false {
		t.Errorf("the container must have a read-only root filesystem and no privilege escalation")
	}
	// the budget and the Service select the Deployment's pods
	labels := get(dep, "spec", "template", "metadata", "labels").(map[string]any)
	for what, sel := range map[string]any{
		"Deployment selector": get(dep, "spec", "selector", "matchLabels"),
		"PDB selector":        get(pdb, "spec", "selector", "matchLabels"),
		"Service selector":    get(svc, "spec", "selector"),
	} {
		m, _ := sel.(map[string]any)
		if len(m) == 0 {
			t.Errorf("%s is empty", what)
		}
		for k, v := range m {
			if labels[k] != v {
				t.Errorf("%s %s=%v does not match the pod labels", what, k, v)
			}
		}
	}
	if n, ok := get(pdb, "spec", "minAvailable").(int); !ok || n < 1 || n >= 3 {
		t.Errorf("PDB minAvailable %v: want between 1 and replicas-1 so nodes can drain", get(pdb, "spec", "minAvailable"))
	}
}

func TestCompose(t *testing.T) {
	docs := yamlDocs(t, "compose.yaml")
	if len(docs) != 1 {
		t.Fatalf("compose.yaml: %d documents", len(docs))
	}
	services, _ := get(docs[0], "services").(map[string]any)
	if services["redis"] == nil {
		t.Fatal("compose.yaml has no redis service")
	}
	var replicas []string
	for name := range services {
		if strings.HasPrefix(name, "baton-") {
			replicas = append(replicas, name)
		}
	}
	if len(replicas) != 3 {
		t.Fatalf("compose.yaml runs %d baton replicas, want 3", len(replicas))
	}
	if !strings.Contains(strings.Join(anyStrings(get(services["redis"], "command")), " "), "noeviction") {
		t.Errorf("the compose Redis must run with maxmemory-policy noeviction")
	}
	hostPorts := map[string]bool{}
	for _, name := range replicas {
		s := services[name]
		env, _ := get(s, "environment").(map[string]any)
		// the example config, mounted where BATON_CONFIG points
		var src string
		for _, v := range anyStrings(get(s, "volumes")) {
			parts := strings.Split(v, ":")
			if len(parts) >= 2 && parts[1] == str(env["BATON_CONFIG"]) {
				src = parts[0]
			}
		}
		if src == "" {
			t.Fatalf("%s: BATON_CONFIG %v is not a mounted file", name, env["BATON_CONFIG"])
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		cfg := loadConfig(t, name+"'s "+src, data, map[string]string{"BATON_REDIS_URL": str(env["BATON_REDIS_URL"])})
		if cfg.Redis.URL != "redis://redis:6379/0" {
			t.Errorf("%s: Redis URL %q, want the compose redis service", name, cfg.Redis.URL)
		}
		listen := port(t, str(env["BATON_HTTP"]))
		ports := anyStrings(get(s, "ports"))
		if len(ports) != 1 || !strings.HasSuffix(ports[0], ":"+strconv.Itoa(listen)) || !strings.HasPrefix(ports[0], "127.0.0.1:") {
			t.Errorf("%s: ports %v: want one loopback host port mapped to %d", name, ports, listen)
		}
		hostPorts[ports[0]] = true
		if !strings.Contains(strings.Join(anyStrings(get(s, "healthcheck", "test")), " "), fmt.Sprintf("127.0.0.1:%d/healthz", listen)) {
			t.Errorf("%s: the healthcheck must ask /healthz on port %d", name, listen)
		}
		grace, err := time.ParseDuration(str(get(s, "stop_grace_period")))
		if err != nil || grace <= cfg.Worker.ShutdownGrace {
			t.Errorf("%s: stop_grace_period %v must exceed worker.shutdown_grace %v", name, get(s, "stop_grace_period"), cfg.Worker.ShutdownGrace)
		}
		if get(s, "read_only") != true {
			t.Errorf("%s: read_only root filesystem expected", name)
		}
	}
	if len(hostPorts) != 3 {
		t.Errorf("replicas share host ports: %v", hostPorts)
	}
}

func anyStrings(v any) []string {
	s, _ := v.([]any)
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = str(x)
	}
	return out
}

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var froms, users []string
	static := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch f := strings.Fields(line); {
		case len(f) == 0 || strings.HasPrefix(line, "#"):
		case strings.EqualFold(f[0], "FROM"):
			froms = append(froms, line)
			users = append(users, "") // USER is per stage
		case strings.EqualFold(f[0], "USER") && len(f) > 1:
			users[len(users)-1] = f[1]
		case strings.Contains(line, "CGO_ENABLED=0") && strings.Contains(line, "go build"):
			static = true
		}
	}
	if len(froms) < 2 {
		t.Fatalf("want a build stage and a runtime stage, found %d FROM lines", len(froms))
	}
	if !static {
		t.Error("the binary must be built static (CGO_ENABLED=0 go build)")
	}
	u := users[len(users)-1]
	if uid, _, _ := strings.Cut(u, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("the runtime stage runs as %q: want a non-root USER", u)
	}
	if !regexp.MustCompile(`(?m)^ENTRYPOINT \["/usr/local/bin/baton"\]`).Match(data) {
		t.Error("the entrypoint must be the baton binary")
	}
}

func TestSystemdUnit(t *testing.T) {
	data, err := os.ReadFile("systemd/baton.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := map[string]string{}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("systemd/baton.service: bad line %q", line)
			}
			unit[section+"."+k] = v
		}
	}
	if !strings.HasSuffix(unit["Service.ExecStart"], "baton run") {
		t.Errorf("ExecStart %q: want baton run", unit["Service.ExecStart"])
	}
	if u := unit["Service.User"]; u == "" || u == "root" {
		t.Errorf("User %q: want a system user", u)
	}
	stop, err := time.ParseDuration(unit["Service.TimeoutStopSec"])
	if err != nil {
		t.Fatalf("TimeoutStopSec: %v", err)
	}
	// the default grace, as the example config has it
	data, err = os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, "config.example.yaml", data, nil)
	if stop <= cfg.Worker.ShutdownGrace {
		t.Errorf("TimeoutStopSec %v must exceed worker.shutdown_grace %v", stop, cfg.Worker.ShutdownGrace)
	}
	if unit["Service.KillSignal"] != "SIGTERM" || unit["Service.KillMode"] != "mixed" {
		t.Errorf("KillSignal=SIGTERM and KillMode=mixed: baton stops its jobs itself, SIGKILL only for what is left")
	}
	if unit["Service.NoNewPrivileges"] != "yes" {
		t.Error("NoNewPrivileges=yes expected")
	}
	// worker.exec_cgroup: auto makes each run's cgroup below the unit's
	if cfg.Worker.ExecCgroup == "auto" && (unit["Service.Delegate"] != "yes" || unit["Service.ProtectControlGroups"] == "yes") {
		t.Error("Delegate=yes and no ProtectControlGroups=yes: exec runs get cgroups of their own below the unit's")
	}
}

// dashboard is the part of Grafana's dashboard model the check reads.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct{ H, W, X, Y int }
	Panels     []panel `json:"panels"` // a collapsed row's
	Targets    []struct {
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// served runs a replica with a job of each kind (queued, local on the
// cluster leader, singleton) until each has run or led, and returns the
// label names of every metric its /metrics serves (a histogram's _bucket,
// _sum and _count included).
func served(t *testing.T) map[string]map[string]bool {
	t.Helper()
	srv := redistest.New(t)
	cfg := loadConfig(t, "the dashboard's test config", fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: grafana
worker: {shutdown_grace: 2s}
jobs:
  - name: beat
    schedule: "@every 1s"
    handler: {name: beat}
  - name: tidy
    schedule: "@every 1s"
    mode: local
    leader: true
    handler: {name: beat}
  - name: pump
    mode: singleton
    handler: {name: pump}
`, srv.Addr()), nil)
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("beat", func(context.Context, jobs.Run) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := reg.HandleFunc("pump", func(ctx context.Context, _ jobs.Run) error { <-ctx.Done(); return nil }); err != nil {
		t.Fatal(err)
	}
	r, err := baton.New(cfg, baton.WithHandlers(reg), baton.WithReplicaID("g-1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	h := batonhttp.NewHandler(r)
	t.Cleanup(func() {
		h.Close()
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	metrics := func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://localhost/metrics", nil))
		return rec.Body.String()
	}
	var body string
	poll.Require(t, 30*time.Second, "a run of beat and of tidy, pump led, g-1 the cluster leader", func() bool {
		body = metrics()
		for _, s := range []string{
			`baton_worker_start_lag_seconds_count{job="beat",replica="g-1"}`,
			`baton_scheduler_dispatch_lag_seconds_count{job="beat",replica="g-1"}`,
			`baton_worker_runs_total{job="tidy",replica="g-1",status="ok"}`,
			`baton_singleton_leader{job="pump",replica="g-1"} 1`,
			`baton_cluster_leader{replica="g-1"} 1`,
		} {
			if !strings.Contains(body, s) {
				return false
			}
		}
		return true
	})
	out := map[string]map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(baton_[a-z0-9_]+)(?:\{([^}]*)\})? `).FindAllStringSubmatch(body, -1) {
		if out[m[1]] == nil {
			out[m[1]] = map[string]bool{}
		}
		for _, l := range regexp.MustCompile(`([a-z_]+)="`).FindAllStringSubmatch(m[2], -1) {
			out[m[1]][l[1]] = true
		}
	}
	return out
}

var (
	metricName = regexp.MustCompile(`\bbaton_[a-z0-9_]+`)
	// a selector's label matchers: metric{label=~"...", ...}
	selector = regexp.MustCompile(`\b(baton_[a-z0-9_]+)\{([^}]*)\}`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	// $name, ${name}, ${name:format}, [[name]]
	variable = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::[a-z]+)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)\]\]`)
)

// grafanaBuiltins are the variables Grafana defines itself.
var grafanaBuiltins = map[string]bool{"__rate_interval": true, "__interval": true, "__interval_ms": true, "__range": true,
	"__range_s": true, "__range_ms": true, "__from": true, "__to": true, "__dashboard": true}

// checkQuery reports a query's metrics that baton does not serve and
// label matchers on labels their metric does not carry.
func checkQuery(t *testing.T, where, expr string, metrics map[string]map[string]bool) {
	t.Helper()
	names := metricName.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s: %q queries no baton metric", where, expr)
	}
	for _, name := range names {
		if metrics[name] == nil {
			t.Errorf("%s: queries %s, which /metrics does not serve", where, name)
		}
	}
	for _, s := range selector.FindAllStringSubmatch(expr, -1) {
		for _, l := range matcher.FindAllStringSubmatch(s[2], -1) {
			if labels := metrics[s[1]]; labels != nil && !labels[l[1]] {
				t.Errorf("%s: matches label %s of %s, which has no such label", where, l[1], s[1])
			}
		}
	}
	depth := map[rune]int{}
	for _, c := range expr {
		switch c {
		case '(', '{', '[':
			depth[c]++
		case ')':
			depth['(']--
		case '}':
			depth['{']--
		case ']':
			depth['[']--
		}
	}
	for c, d := range depth {
		if d != 0 {
			t.Errorf("%s: unbalanced %c in %q", where, c, expr)
		}
	}
}

// The Grafana dashboard parses as Grafana's dashboard model, queries only
// metrics (and labels) a running replica serves, on the data source its
// ${datasource} variable picks, uses only variables it defines, and lays
// its panels out without overlap. The alert rules name only served metrics
// too.
func TestGrafanaDashboardQueriesServedMetrics(t *testing.T) {
	data, err := os.ReadFile("grafana/baton.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var d dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("grafana/baton.json: %v", err)
	}
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 39 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want a uid, a title and a current schema (>= 39)", d.UID, d.Title, d.SchemaVersion)
	}
	metrics := served(t)

	defined := map[string]bool{}
	for _, v := range d.Templating.List {
		defined[v.Name] = true
		switch v.Type {
		case "datasource":
			if v.Name != "datasource" || string(v.Query) != `"prometheus"` {
				t.Errorf("data source variable %s picks %s, want datasource picking prometheus", v.Name, v.Query)
			}
		case "query":
			var q struct{ Query string }
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Fatalf("variable %s: query %s: %v", v.Name, v.Query, err)
			}
			if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
				t.Errorf("variable %s does not query the ${datasource} variable", v.Name)
			}
			checkQuery(t, "variable "+v.Name, q.Query, metrics)
		}
	}
	for _, want := range []string{"datasource", "job", "replica"} {
		if !defined[want] {
			t.Errorf("no template variable %s", want)
		}
	}
	for _, m := range variable.FindAllStringSubmatch(string(data), -1) {
		name := m[1] + m[2] + m[3]
		if !defined[name] && !grafanaBuiltins[name] {
			t.Errorf("grafana/baton.json uses variable $%s, which it does not define", name)
		}
	}

	var all []panel
	for _, p := range d.Panels {
		all = append(all, p)
		all = append(all, p.Panels...)
	}
	ids := map[int]bool{}
	cells := map[[2]int]string{}
	for _, p := range all {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if ids[p.ID] {
			t.Errorf("%s: id used twice", where)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("%s: gridPos %+v outside the 24 columns", where, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := cells[[2]int{x, y}]; ok {
					t.Fatalf("%s overlaps %s", where, other)
				}
				cells[[2]int{x, y}] = where
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("%s: want queries on the ${datasource} variable", where)
		}
		for _, q := range p.Targets {
			if q.Datasource == nil || q.Datasource.UID != "${datasource}" {
				t.Errorf("%s: a query not on the ${datasource} variable", where)
			}
			checkQuery(t, where, q.Expr, metrics)
		}
	}
	// what the dashboard must show
	var exprs strings.Builder
	for _, p := range all {
		for _, q := range p.Targets {
			exprs.WriteString(q.Expr + "\n")
		}
	}
	for _, m := range []string{"baton_worker_runs_total", "baton_scheduler_dispatch_lag_seconds_bucket", "baton_worker_start_lag_seconds_bucket",
		"baton_worker_skipped_total", "baton_scheduler_missed_total", "baton_worker_dropped_total", "baton_worker_tasks_refused_total",
		"baton_lock_wait_seconds_total", "baton_lock_leases_lost_total", "baton_singleton_leader", "baton_lock_master_quarantine_remaining_seconds",
		"baton_scheduler_held_ticks", "baton_scheduler_clock_skew_seconds", "baton_replica_info"} {
		if !strings.Contains(exprs.String(), m) {
			t.Errorf("no panel queries %s", m)
		}
	}

	for _, d := range yamlDocs(t, "prometheus/baton-alerts.yaml") {
		for _, r := range get(d, "groups", 0, "rules").([]any) {
			checkQuery(t, "alert "+str(get(r, "alert")), str(get(r, "expr")), metrics)
		}
	}
}
