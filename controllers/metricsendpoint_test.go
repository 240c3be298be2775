package controllers_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	installpkg "github.com/winready/winready/test/install"
)

// scraperToken is a token of a new ServiceAccount of namespace monitoring,
// bound to ClusterRole role unless role is empty.
func scraperToken(name, role string) string {
	ensureNamespace("monitoring")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "monitoring", Name: name}}
	Expect(k8s.Create(ctx, sa)).To(Succeed())
	DeferCleanup(func() { Expect(k8s.Delete(ctx, sa)).To(Succeed()) })
	if role != "" {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}}
		Expect(k8s.Create(ctx, crb)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, crb)).To(Succeed()) })
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	Expect(k8s.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	return tr.Status.Token
}

// scrape is one GET of url with token (none when empty): the status code
// (0 when the request failed), the protocol and the body.
func scrape(c *http.Client, url, token string) (int, string, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Proto, string(body)
}

var _ = Describe("The metrics endpoint", func() {
	var op *operator

	AfterEach(func() {
		if op != nil {
			op.stop()
		}
	})

	It("serves HTTPS only to a scraper the API server lets get /metrics", func() {
		// Tokens first: the endpoint remembers a refusal for 30 seconds.
		prometheus := scraperToken("prometheus", "winready-metrics-reader")
		nobody := scraperToken("nobody", "")
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		addr := l.Addr().String()
		Expect(l.Close()).To(Succeed())
		// The manager asks the API server about each scraper under its own
		// identity, with the rights config/default gives it.
		asSA := rest.CopyConfig(cfg)
		asManagerConfig(asSA)
		op = startOperatorWith(operatorOptions{restCfg: asSA, metricsAddr: addr, metricsSecure: true})
		// The certificate is self-signed, as the ServiceMonitor expects.
		https := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed test server
		url := "https://" + addr + "/metrics"

		Eventually(func() int {
			code, _, _ := scrape(https, url, "")
			return code
		}).Should(Equal(http.StatusUnauthorized), "a scrape without a token")
		// controller-runtime answers 500 when the TokenReview carries an
		// error, as it does for a token the API server cannot read.
		code, _, body := scrape(https, url, "not-a-token")
		Expect(code).To(BeElementOf(http.StatusUnauthorized, http.StatusInternalServerError), "a token the API server does not know")
		Expect(body).NotTo(ContainSubstring("winready_"))
		code, _, body = scrape(https, url, nobody)
		Expect(code).To(Equal(http.StatusForbidden), "a ServiceAccount without winready-metrics-reader")
		Expect(body).NotTo(ContainSubstring("winready_"))
		code, _, body = scrape(http.DefaultClient, "http://"+addr+"/metrics", prometheus)
		Expect(code).To(Equal(http.StatusBadRequest), "plain HTTP")
		Expect(body).NotTo(ContainSubstring("winready_"))

		code, proto, body := scrape(https, url, prometheus)
		Expect(code).To(Equal(http.StatusOK), "a ServiceAccount bound to winready-metrics-reader")
		Expect(body).To(ContainSubstring("winready_build_info{"))
		Expect(proto).To(Equal("HTTP/1.1"), "no HTTP/2, even to a client that offers it")
	})

	It("is scraped by config/prometheus as config/default serves it", func() {
		objs := install()
		dep := managerDeployment(objs)
		c := dep.Spec.Template.Spec.Containers[0]
		Expect(c.Args).To(ContainElement("--metrics-bind-address=:8443"))
		Expect(c.Args).NotTo(ContainElement(HavePrefix("--metrics-secure")), "HTTPS, the default")
		Expect(c.Ports).To(ContainElement(And(HaveField("Name", "metrics"), HaveField("ContainerPort", BeEquivalentTo(8443)))))
		svc := &corev1.Service{}
		for _, o := range objs {
			if o.GetKind() == "Service" && o.GetName() == "winready-metrics" {
				Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, svc)).To(Succeed())
			}
		}
		Expect(svc.Spec.Ports).To(HaveLen(1))
		Expect(svc.Spec.Ports[0].TargetPort.StrVal).To(Equal("metrics"))
		Expect(labelsMatch(svc.Spec.Selector, dep)).To(BeTrue())

		mon, err := installpkg.Build(filepath.Join("..", "config", "prometheus"))
		Expect(err).NotTo(HaveOccurred())
		var endpoints []any
		for _, o := range mon {
			if o.GetKind() == "ServiceMonitor" {
				endpoints, _, err = unstructured.NestedSlice(o.Object, "spec", "endpoints")
				Expect(err).NotTo(HaveOccurred())
			}
		}
		Expect(endpoints).To(HaveLen(1))
		ep := endpoints[0].(map[string]any)
		Expect(ep).To(HaveKeyWithValue("port", svc.Spec.Ports[0].Name))
		Expect(ep).To(HaveKeyWithValue("scheme", "https"))
		Expect(ep).NotTo(HaveKey("bearerTokenFile"))
		Expect(ep).To(HaveKeyWithValue("authorization", map[string]any{"type": "Bearer",
			"credentials": map[string]any{"name": "winready-metrics-scraper-token", "key": "token"}}),
			"Prometheus sends the winready-metrics-scraper token, which the endpoint reviews")
		Expect(ep).To(HaveKey("tlsConfig"))

		By("giving Prometheus a ClusterRole to bind, with get on /metrics and nothing else")
		role := &rbacv1.ClusterRole{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "winready-metrics-reader"}, role)).To(Succeed())
		Expect(role.Rules).To(Equal([]rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}))
	})
})

// labelsMatch is whether selector selects the pods of dep.
func labelsMatch(selector map[string]string, dep *appsv1.Deployment) bool {
	return len(selector) > 0 && labels.SelectorFromSet(selector).Matches(labels.Set(dep.Spec.Template.Labels))
}
