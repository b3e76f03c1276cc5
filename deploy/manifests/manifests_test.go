// Package manifests checks the deployment files under deploy/ without a
// Kubernetes cluster or a systemd to run them: deploy/k8s is decoded
// strictly into the Kubernetes API types (an unknown or misspelt field
// fails) and checked for the properties a Baton cluster depends on, and
// deploy/systemd's environment file for names batond knows.
//
// It is its own Go module so that k8s.io/api and kustomize stay out of
// Baton's go.mod. `make test` runs it with BATOND=bin/batond; without
// BATOND it builds batond from the main module.
package manifests

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	kustomize "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

const k8sDir = "../k8s"

// cliVars are BATON_* variables of the baton CLI (not batond flags) that
// the StatefulSet sets for `kubectl exec ... baton`; batond knows them too
// and does not warn about them.
var cliVars = map[string]bool{"BATON_ENDPOINTS": true, "BATON_CACERT": true}

// manifests is deploy/k8s decoded.
type manifests struct {
	kust       kustomize.Kustomization
	namespaces []*corev1.Namespace
	services   []*corev1.Service
	sets       []*appsv1.StatefulSet
	pdbs       []*policyv1.PodDisruptionBudget
}

// decodeStrict decodes one YAML document into out, refusing unknown and
// duplicate fields, as `kubectl apply --validate=strict` does.
func decodeStrict(doc []byte, out any) error {
	return yaml.UnmarshalStrict(doc, out)
}

// loadManifests decodes kustomization.yaml and every resource it lists.
func loadManifests(t *testing.T, dir string) *manifests {
	t.Helper()
	m := &manifests{}
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := decodeStrict(b, &m.kust); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if m.kust.Kind != kustomize.KustomizationKind || m.kust.APIVersion != kustomize.KustomizationVersion {
		t.Fatalf("kustomization.yaml: kind %q apiVersion %q", m.kust.Kind, m.kust.APIVersion)
	}
	// Every manifest in the directory is a resource of the kustomization,
	// and every resource is a file there.
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" {
			want = append(want, base)
		}
	}
	got := slices.Clone(m.kust.Resources)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("kustomization.yaml resources %v, files in %s %v", got, dir, want)
	}
	for _, name := range m.kust.Resources {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitDocs(b) {
			if err := m.add(doc); err != nil {
				t.Fatalf("%s, document %d: %v", name, i+1, err)
			}
		}
	}
	return m
}

// splitDocs splits a YAML stream at its "---" lines, dropping empty
// documents (comments only).
func splitDocs(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		var content bool
		for _, line := range strings.Split(d, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				content = true
			}
		}
		if content {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func (m *manifests) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Namespace":
		o := &corev1.Namespace{}
		m.namespaces, obj = append(m.namespaces, o), o
	case "v1 Service":
		o := &corev1.Service{}
		m.services, obj = append(m.services, o), o
	case "apps/v1 StatefulSet":
		o := &appsv1.StatefulSet{}
		m.sets, obj = append(m.sets, o), o
	case "policy/v1 PodDisruptionBudget":
		o := &policyv1.PodDisruptionBudget{}
		m.pdbs, obj = append(m.pdbs, o), o
	default:
		return fmt.Errorf("apiVersion %q kind %q: not a type this test knows", tm.APIVersion, tm.Kind)
	}
	return decodeStrict(doc, obj)
}

func (m *manifests) service(name string) *corev1.Service {
	for _, s := range m.services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (m *manifests) secretGenerator(name string) *kustomize.SecretArgs {
	for i := range m.kust.SecretGenerator {
		if m.kust.SecretGenerator[i].Name == name {
			return &m.kust.SecretGenerator[i]
		}
	}
	return nil
}

// secretKeys are the keys (file names in the mounted volume) of a
// generated Secret: "key=path" or the path's base name.
func secretKeys(g *kustomize.SecretArgs) map[string]string {
	keys := map[string]string{}
	for _, f := range g.FileSources {
		if k, p, ok := strings.Cut(f, "="); ok {
			keys[k] = p
		} else {
			keys[path.Base(f)] = f
		}
	}
	return keys
}

var (
	batondOnce sync.Once
	batondPath string
	batondErr  error
)

// batond is the batond binary: $BATOND, or one built from the main module.
func batond(t *testing.T) string {
	t.Helper()
	batondOnce.Do(func() {
		if p := os.Getenv("BATOND"); p != "" {
			batondPath, batondErr = filepath.Abs(p)
			return
		}
		dir, err := os.MkdirTemp("", "batond-manifests")
		if err != nil {
			batondErr = err
			return
		}
		batondPath = filepath.Join(dir, "batond")
		cmd := exec.Command("go", "build", "-o", batondPath, "./cmd/batond")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			batondErr = fmt.Errorf("go build ./cmd/batond: %v\n%s", err, out)
		}
	})
	if batondErr != nil {
		t.Fatal(batondErr)
	}
	return batondPath
}

var (
	flagsOnce sync.Once
	flagVars  map[string]bool
	flagsErr  error
)

// batondFlagVars are the BATON_* variables of every flag `batond --help`
// lists (--data-dir: BATON_DATA_DIR).
func batondFlagVars(t *testing.T) map[string]bool {
	t.Helper()
	bin := batond(t)
	flagsOnce.Do(func() {
		out, _ := exec.Command(bin, "--help").CombinedOutput() // exit status 0 or 2 by flag's version
		flagVars = map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^\s+-{1,2}([a-z][a-z0-9-]*)\b`).FindAllStringSubmatch(string(out), -1) {
			flagVars["BATON_"+strings.ToUpper(strings.ReplaceAll(m[1], "-", "_"))] = true
		}
		if !flagVars["BATON_DATA_DIR"] || !flagVars["BATON_ADVERTISE_RAFT_ADDR"] || len(flagVars) < 20 {
			flagsErr = fmt.Errorf("found only %d flags in batond --help:\n%s", len(flagVars), out)
		}
	})
	if flagsErr != nil {
		t.Fatal(flagsErr)
	}
	return flagVars
}

// expandEnv is the container's environment in pod podName, with $(VAR)
// references to earlier variables expanded as the kubelet does and
// metadata.name/metadata.namespace field references resolved.
func expandEnv(t *testing.T, c *corev1.Container, podName, namespace string) map[string]string {
	t.Helper()
	env := map[string]string{}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("env %s set twice", e.Name)
		}
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = ref.ReplaceAllStringFunc(e.Value, func(s string) string {
				name := ref.FindStringSubmatch(s)[1]
				v, ok := env[name]
				if !ok {
					t.Errorf("env %s refers to $(%s), which is not set before it (the kubelet would leave it as written)", e.Name, name)
					return s
				}
				return v
			})
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = podName
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = namespace
		default:
			t.Errorf("env %s: a valueFrom this test does not resolve", e.Name)
		}
	}
	return env
}

// TestKubernetesManifests decodes deploy/k8s strictly and checks what a
// three-node Baton cluster on Kubernetes depends on.
func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t, k8sDir)
	if len(m.sets) != 1 || len(m.pdbs) != 1 {
		t.Fatalf("want one StatefulSet and one PodDisruptionBudget, have %d and %d", len(m.sets), len(m.pdbs))
	}
	ns := m.kust.Namespace
	if len(m.namespaces) != 1 || m.namespaces[0].Name != ns {
		t.Errorf("the kustomization's namespace %q is not the one Namespace manifest", ns)
	}
	sts := m.sets[0]
	spec := sts.Spec
	pod := spec.Template.Spec
	podLabels := labels.Set(spec.Template.Labels)

	// Identity: three replicas, started together, found by name through
	// a headless Service that publishes them before they are ready.
	if spec.Replicas == nil || *spec.Replicas != 3 {
		t.Errorf("replicas %v, want 3", spec.Replicas)
	}
	if spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q: with OrderedReady baton-1 waits for baton-0 to be ready, which needs a leader, which needs baton-1", spec.PodManagementPolicy)
	}
	sel, err := metav1.LabelSelectorAsSelector(spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(podLabels) {
		t.Errorf("StatefulSet selector %v does not match its pod labels %v (%v)", spec.Selector, podLabels, err)
	}
	headless := m.service(spec.ServiceName)
	if headless == nil {
		t.Fatalf("serviceName %q: no such Service in the manifests", spec.ServiceName)
	}
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s (the StatefulSet's serviceName) is not headless: clusterIP %q", headless.Name, headless.Spec.ClusterIP)
	}
	if !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: publishNotReadyAddresses false: the members cannot resolve each other until they are ready, and are never ready without each other", headless.Name)
	}
	if pod.EnableServiceLinks == nil || *pod.EnableServiceLinks {
		t.Errorf("enableServiceLinks not false: Services named baton* put BATON_* variables in the environment, which batond reads as flags")
	}

	// The one batond container and its ports.
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, have %d", len(pod.Containers))
	}
	c := &pod.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["https"] != 7001 || ports["raft"] != 8001 {
		t.Errorf("container ports %v, want https 7001 and raft 8001 (the image's)", ports)
	}
	portOf := func(p intstr.IntOrString) int32 {
		if p.Type == intstr.Int {
			return p.IntVal
		}
		return ports[p.StrVal]
	}
	for _, s := range m.services {
		ssel := labels.SelectorFromSet(s.Spec.Selector)
		if len(s.Spec.Selector) == 0 || !ssel.Matches(podLabels) {
			t.Errorf("Service %s selector %v does not match the pods %v", s.Name, s.Spec.Selector, podLabels)
		}
		for _, p := range s.Spec.Ports {
			if target := portOf(p.TargetPort); target == 0 || target != p.Port {
				t.Errorf("Service %s port %s: targetPort %v is not a container port (or differs from port %d)", s.Name, p.Name, p.TargetPort.String(), p.Port)
			}
		}
	}
	client := m.service("baton")
	if client == nil || client.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Errorf("no client Service baton with a cluster IP")
	}

	// Probes: readiness on /readyz, liveness on /healthz, both HTTPS on
	// the API port.
	for _, pr := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}, {"startupProbe", c.StartupProbe, "/healthz"}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe", pr.name)
			continue
		}
		g := pr.probe.HTTPGet
		if g.Path != pr.path || g.Scheme != corev1.URISchemeHTTPS || portOf(g.Port) != 7001 {
			t.Errorf("%s: %s %s on port %s, want %s HTTPS on 7001", pr.name, g.Scheme, g.Path, g.Port.String(), pr.path)
		}
	}

	// Security: non-root 65532 (the image's user), read-only root, no
	// privilege escalation or capabilities; resources set.
	psc, csc := pod.SecurityContext, c.SecurityContext
	if psc == nil || csc == nil {
		t.Fatal("want securityContext on the pod and the container")
	}
	if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 || psc.FSGroup == nil || *psc.FSGroup != 65532 {
		t.Errorf("pod securityContext: want runAsNonRoot, runAsUser 65532 and fsGroup 65532")
	}
	if csc.RunAsNonRoot == nil || !*csc.RunAsNonRoot || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
		csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") {
		t.Errorf("container securityContext: want runAsNonRoot, readOnlyRootFilesystem, no privilege escalation, capabilities dropped")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources: want cpu and memory requests and a memory limit, have %v", c.Resources)
	}

	// The image is the one `make image` builds, retagged by the kustomization.
	if name, _, _ := strings.Cut(c.Image, ":"); name != "baton" || len(m.kust.Images) != 1 || m.kust.Images[0].Name != "baton" {
		t.Errorf("image %q, kustomization images %v: want baton:<version>", c.Image, m.kust.Images)
	}

	// PodDisruptionBudget: one member at a time, the StatefulSet's pods.
	pdb := m.pdbs[0]
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.String() != "1" || pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget: maxUnavailable %v minAvailable %v, want maxUnavailable 1 only", pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
	}
	if psel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || psel.Empty() || !psel.Matches(podLabels) {
		t.Errorf("PodDisruptionBudget selector %v does not match the pods %v", pdb.Spec.Selector, podLabels)
	}

	// Volumes: where each path the environment names lives.
	mounts := map[string]corev1.VolumeMount{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.Name] = vm
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
		if _, ok := mounts[v.Name]; !ok {
			t.Errorf("volume %s is not mounted", v.Name)
		}
	}
	claims := map[string]bool{}
	for _, pvc := range spec.VolumeClaimTemplates {
		claims[pvc.Name] = true
		if pvc.Spec.Resources.Requests.Storage().IsZero() {
			t.Errorf("volumeClaimTemplate %s asks for no storage", pvc.Name)
		}
	}
	for name := range mounts {
		if _, ok := volumes[name]; !ok && !claims[name] {
			t.Errorf("volumeMount %s: no such volume or volumeClaimTemplate", name)
		}
	}
	// mountOf is the mount holding file p, and its volume's source.
	mountOf := func(p string) (corev1.VolumeMount, bool) {
		for _, vm := range c.VolumeMounts {
			if rel, err := filepath.Rel(vm.MountPath, p); err == nil && !strings.HasPrefix(rel, "..") {
				return vm, true
			}
		}
		return corev1.VolumeMount{}, false
	}

	// The environment, pod by pod.
	flags := batondFlagVars(t)
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "BATON_") && !flags[e.Name] && !cliVars[e.Name] {
			t.Errorf("env %s is no batond flag (batond --help) and not a CLI variable", e.Name)
		}
	}
	required := []string{"BATON_ID", "BATON_DATA_DIR", "BATON_PEERS", "BATON_HTTP_ADDR", "BATON_RAFT_ADDR",
		"BATON_ADVERTISE_HTTP_ADDR", "BATON_ADVERTISE_RAFT_ADDR", "BATON_ADMIN_TOKEN_FILE",
		"BATON_TLS_CERT_FILE", "BATON_TLS_KEY_FILE", "BATON_PEER_CERT_FILE", "BATON_PEER_KEY_FILE", "BATON_PEER_CA_FILE"}
	replicas := int(*spec.Replicas)
	wantPeers := map[string]string{}
	for i := range replicas {
		pod := fmt.Sprintf("%s-%d", sts.Name, i)
		wantPeers[pod] = fmt.Sprintf("%s.%s:%d", pod, headless.Name, ports["raft"])
	}
	secretFiles := map[string][]string{} // Secret name -> keys the pods read
	advertised := map[string][]string{}  // node id -> host names peers use
	for i := range replicas {
		podName := fmt.Sprintf("%s-%d", sts.Name, i)
		env := expandEnv(t, c, podName, ns)
		for _, k := range required {
			if env[k] == "" {
				t.Errorf("%s: %s not set", podName, k)
			}
		}
		if env["BATON_ID"] != podName {
			t.Errorf("%s: BATON_ID %q, want the pod's name", podName, env["BATON_ID"])
		}
		peers := map[string]string{}
		for _, p := range strings.Split(env["BATON_PEERS"], ",") {
			id, addr, _ := strings.Cut(p, "=")
			peers[id] = addr
		}
		if fmt.Sprint(peers) != fmt.Sprint(wantPeers) {
			t.Errorf("%s: BATON_PEERS %v, want %v (every pod by its headless-Service name)", podName, peers, wantPeers)
		}
		if env["BATON_ADVERTISE_RAFT_ADDR"] != wantPeers[podName] {
			t.Errorf("%s: BATON_ADVERTISE_RAFT_ADDR %q, but its peers dial %q", podName, env["BATON_ADVERTISE_RAFT_ADDR"], wantPeers[podName])
		}
		for _, a := range []struct{ listen, advertise, port string }{
			{"BATON_HTTP_ADDR", "BATON_ADVERTISE_HTTP_ADDR", "https"},
			{"BATON_RAFT_ADDR", "BATON_ADVERTISE_RAFT_ADDR", "raft"},
		} {
			for _, k := range []string{a.listen, a.advertise} {
				_, port, err := net.SplitHostPort(env[k])
				if n, _ := strconv.Atoi(port); err != nil || int32(n) != ports[a.port] {
					t.Errorf("%s: %s %q is not on container port %s (%d)", podName, k, env[k], a.port, ports[a.port])
				}
			}
			host, _, _ := net.SplitHostPort(env[a.advertise])
			advertised[podName] = append(advertised[podName], host)
		}
		if vm, ok := mountOf(env["BATON_DATA_DIR"]); !ok || !claims[vm.Name] {
			t.Errorf("%s: BATON_DATA_DIR %s is not on a volumeClaimTemplate", podName, env["BATON_DATA_DIR"])
		}
		for k, v := range env {
			if !strings.HasSuffix(k, "_FILE") && k != "BATON_CACERT" {
				continue
			}
			vm, ok := mountOf(v)
			vol := volumes[vm.Name]
			if !ok || vol.Secret == nil || !vm.ReadOnly {
				t.Errorf("%s: %s %s is not on a read-only Secret volume", podName, k, v)
				continue
			}
			rel, _ := filepath.Rel(vm.MountPath, v)
			secretFiles[vol.Secret.SecretName] = append(secretFiles[vol.Secret.SecretName], rel)
			if vol.Secret.DefaultMode == nil || *vol.Secret.DefaultMode&0o007 != 0 {
				t.Errorf("Secret volume %s: defaultMode %v lets other users read it", vm.Name, vol.Secret.DefaultMode)
			}
		}
	}

	// Every Secret the pods read is generated by the kustomization, with
	// every key they read.
	for name, files := range secretFiles {
		g := m.secretGenerator(name)
		if g == nil {
			t.Errorf("Secret %s is mounted but the kustomization makes no such Secret", name)
			continue
		}
		keys := secretKeys(g)
		for _, f := range files {
			if _, ok := keys[f]; !ok {
				t.Errorf("Secret %s: the pods read key %s, which it does not have (keys %v)", name, f, keys)
			}
		}
	}
	if m.kust.GeneratorOptions == nil || !m.kust.GeneratorOptions.DisableNameSuffixHash {
		t.Errorf("generatorOptions.disableNameSuffixHash not set: the Secrets' names would change with their content")
	}

	t.Run("certificates", func(t *testing.T) {
		checkCertificates(t, m, advertised, []string{client.Name, client.Name + "." + ns + ".svc", client.Name + "." + ns + ".svc.cluster.local"})
	})
}

// checkCertificates runs the `batond certs` command deploy/README.md
// gives for Kubernetes and checks that it makes every file the TLS Secret
// takes, and that each node's certificate is valid, under the CA, for the
// names its peers reach it by and for the client Service's names.
func checkCertificates(t *testing.T, m *manifests, advertised map[string][]string, clientNames []string) {
	args := readmeCertsCommand(t)
	tmp := t.TempDir()
	out := filepath.Join(tmp, "tls")
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--out":
			args[i+1] = out
		case "--ca-key-out":
			args[i+1] = filepath.Join(tmp, "ca")
		}
	}
	cmd := exec.Command(batond(t), args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("batond %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	g := m.secretGenerator("baton-tls")
	if g == nil {
		t.Fatal("no Secret baton-tls in the kustomization")
	}
	made, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var madeNames []string
	for _, f := range made {
		madeNames = append(madeNames, f.Name())
	}
	var keyNames []string
	for k, p := range secretKeys(g) {
		keyNames = append(keyNames, k)
		if filepath.Dir(p) != "tls" {
			t.Errorf("Secret baton-tls takes %s from %s, not from tls/ where the README's command writes", k, p)
		}
	}
	slices.Sort(madeNames)
	slices.Sort(keyNames)
	if !slices.Equal(madeNames, keyNames) {
		t.Errorf("the README's batond certs writes %v; Secret baton-tls takes %v", madeNames, keyNames)
	}

	pool := x509.NewCertPool()
	pool.AddCert(readCert(t, filepath.Join(out, "ca.pem")))
	for id, hosts := range advertised {
		cert := readCert(t, filepath.Join(out, id+".pem"))
		for _, h := range append(slices.Clone(hosts), clientNames...) {
			for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
				if _, err := cert.Verify(x509.VerifyOptions{DNSName: h, Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
					t.Errorf("%s.pem for %s (usage %v): %v", id, h, usage, err)
				}
			}
		}
	}
}

func readCert(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM", file)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readmeCertsCommand is the arguments of the command deploy/README.md
// gives to make the Kubernetes certificates: the line starting
// "bin/batond certs --out deploy/k8s/tls" (with its continuation lines).
func readmeCertsCommand(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	var in bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if !in && !strings.HasPrefix(l, "bin/batond certs --out deploy/k8s/tls") {
			continue
		}
		in = true
		if s, ok := strings.CutSuffix(l, `\`); ok {
			line += s + " "
			continue
		}
		line += l
		break
	}
	if line == "" {
		t.Fatal(`deploy/README.md has no line starting "bin/batond certs --out deploy/k8s/tls"`)
	}
	words := shellWords(t, line)
	return words[1:] // without bin/batond
}

// shellWords splits a command line at blanks, honouring single quotes
// (all the README's command uses).
func shellWords(t *testing.T, s string) []string {
	var words []string
	var cur strings.Builder
	var quoted, word bool
	for _, r := range s {
		switch {
		case r == '\'':
			quoted, word = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if word {
				words = append(words, cur.String())
				cur.Reset()
				word = false
			}
		case strings.ContainsRune(`"$\;&|<>`+"`", r) && !quoted:
			t.Fatalf("the README's certs command uses %q, which this test does not interpret: %s", r, s)
		default:
			cur.WriteRune(r)
			word = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quote: %s", s)
	}
	if word {
		words = append(words, cur.String())
	}
	return words
}

// TestSystemdUnit checks deploy/systemd: the example environment file
// sets only batond flags, among them the ones a node needs, and its file
// paths are where the unit's LoadCredential and StateDirectory put them;
// and `systemd-analyze verify` accepts the unit when it is installed.
func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile("../systemd/batond.service")
	if err != nil {
		t.Fatal(err)
	}
	envFile, err := os.ReadFile("../systemd/batond.env")
	if err != nil {
		t.Fatal(err)
	}
	directives := map[string][]string{}
	for _, l := range strings.Split(string(unit), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && !strings.HasPrefix(l, "#") {
			directives[k] = append(directives[k], v)
		}
	}
	for k, want := range map[string]string{
		"EnvironmentFile": "/etc/baton/batond.env", "Restart": "on-failure", "NoNewPrivileges": "yes",
		"ProtectSystem": "strict", "DynamicUser": "yes", "StateDirectory": "baton",
	} {
		if !slices.Contains(directives[k], want) {
			t.Errorf("batond.service: want %s=%s, have %v", k, want, directives[k])
		}
	}
	if len(directives["LimitNOFILE"]) == 0 {
		t.Errorf("batond.service: no LimitNOFILE")
	}
	creds := map[string]bool{}
	for _, c := range directives["LoadCredential"] {
		id, _, _ := strings.Cut(c, ":")
		creds["/run/credentials/batond.service/"+id] = true
	}

	flags := batondFlagVars(t)
	env := map[string]string{}
	for i, l := range strings.Split(string(envFile), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Errorf("batond.env:%d: not NAME=value: %s", i+1, l)
			continue
		}
		if !flags[k] {
			t.Errorf("batond.env:%d: %s is no batond flag (batond --help)", i+1, k)
		}
		env[k] = v
	}
	for _, k := range []string{"BATON_ID", "BATON_DATA_DIR", "BATON_PEERS", "BATON_ADVERTISE_HTTP_ADDR", "BATON_ADVERTISE_RAFT_ADDR", "BATON_ADMIN_TOKEN_FILE"} {
		if env[k] == "" {
			t.Errorf("batond.env: %s not set", k)
		}
	}
	if env["BATON_DATA_DIR"] != "/var/lib/baton" {
		t.Errorf("batond.env: BATON_DATA_DIR %q, not the StateDirectory /var/lib/baton", env["BATON_DATA_DIR"])
	}
	for k, v := range env {
		if strings.HasSuffix(k, "_FILE") && !creds[v] {
			t.Errorf("batond.env: %s %s is not a credential the unit loads (LoadCredential)", k, v)
		}
	}

	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: the unit was not verified by systemd")
		return
	}
	// verify wants ExecStart's binary to exist: point it at this batond.
	dir := t.TempDir()
	unitCopy := strings.Replace(string(unit), "ExecStart=/usr/local/bin/batond", "ExecStart="+batond(t), 1)
	if err := os.WriteFile(filepath.Join(dir, "batond.service"), []byte(unitCopy), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", filepath.Join(dir, "batond.service")).CombinedOutput()
	// verify exits 0 on unknown keys and the like; any word from it is a finding.
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify batond.service: %v\n%s", err, out)
	}
}
