// Command kubernetes runs client-go's rest client over httpretry against a
// local fake of the Kubernetes API server.
//
// client-go's rest client retries by itself and rest.Config has no switch
// to stop it: every request may be sent up to 11 times (10 retries) when
// a response is a 429 or 5xx carrying an integer Retry-After, waiting that
// many seconds, and a GET also after a connection reset or an EOF (waiting
// 1s). Only a request built by hand on a RESTClient can say MaxRetries(0);
// the typed clients cannot.
//
// So the retry layer it wraps must not invite a retry: StripRetryAfter
// removes Retry-After from the responses httpretry returns. httpretry has
// honoured the header already, on its own attempts; the rest client then
// sees a final 429 or 5xx without it and returns the error after one call.
// Install both with rest.Config.WrapTransport, which client-go applies to
// the transport it builds (TLS, auth and user agent stay underneath).
//
// The typed clients (kubernetes.Clientset and its groups) send every call
// through the same rest.Request, so what holds here holds for them. This
// example builds a RESTClient directly, without the typed API packages,
// which take minutes to compile.
//
//	go run ./kubernetes
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	"github.com/httpretry/httpretry"
	"github.com/httpretry/httpretry/examples/sdks/internal/fake"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kubernetes:", err)
		os.Exit(1)
	}
}

// StripRetryAfter is the retry layer under a client that retries on
// Retry-After by itself and cannot be told not to. It removes Retry-After
// (and Retry-After-Ms) from every response that Transport returns, after
// Transport has honoured them on its own attempts.
//
// A StripRetryAfter is safe for concurrent use if its Transport is.
type StripRetryAfter struct {
	Transport http.RoundTripper
}

// RoundTrip sends req through s.Transport and removes the retry hints
// from the response it returns.
func (s StripRetryAfter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.Transport.RoundTrip(req)
	if resp != nil {
		resp.Header.Del("Retry-After")
		resp.Header.Del("Retry-After-Ms")
	}
	return resp, err
}

// newConfig returns the client configuration for the API server at host,
// with httpretry as the only layer that retries on Retry-After. tr is
// called once, with the transport client-go built, and returns the
// httpretry.Transport over it.
func newConfig(host string, tr func(base http.RoundTripper) *httpretry.Transport) *rest.Config {
	return &rest.Config{
		Host:    host,
		Timeout: 30 * time.Second, // http.Client.Timeout: bounds every call, retries included
		WrapTransport: func(base http.RoundTripper) http.RoundTripper {
			return StripRetryAfter{Transport: tr(base)}
		},
	}
}

// defaultTransport is the httpretry.Transport over client-go's transport.
func defaultTransport(base http.RoundTripper) *httpretry.Transport {
	return &httpretry.Transport{Base: base}
}

// newCoreClient returns a rest client for the core API group (/api/v1) of
// the server cfg names. Its scheme knows only the meta types (Status), which
// is all the rest client needs to turn error responses into API errors.
func newCoreClient(cfg *rest.Config) (*rest.RESTClient, error) {
	scheme := runtime.NewScheme()
	gv := schema.GroupVersion{Version: "v1"}
	metav1.AddToGroupVersion(scheme, gv)
	c := *cfg
	c.APIPath = "/api"
	c.GroupVersion = &gv
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	return rest.RESTClientFor(&c)
}

// Pod holds the fields of a pod this example reads.
type Pod struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Status struct {
		Phase string `json:"phase"`
	} `json:"status"`
}

// getPod reads a pod as a typed client's Pods(ns).Get does: one
// rest.Request with the rest client's default retries.
func getPod(ctx context.Context, c *rest.RESTClient, ns, name string) (*Pod, error) {
	raw, err := c.Get().Namespace(ns).Resource("pods").Name(name).Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var p Pod
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("decoding pod: %w", err)
	}
	return &p, nil
}

func run(w io.Writer) error {
	srv := fake.NewServer(throttledTwice)
	defer srv.Close()
	var tr *httpretry.Transport
	cfg := newConfig(srv.URL, func(base http.RoundTripper) *httpretry.Transport {
		tr = defaultTransport(base)
		return tr
	})
	core, err := newCoreClient(cfg)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()

	pod, err := getPod(context.Background(), core, "default", "web-0")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "pod %s/%s is %s, after %d requests\n",
		pod.Metadata.Namespace, pod.Metadata.Name, pod.Status.Phase, srv.Hits())
	return nil
}

// throttledTwice answers the first two requests 429 with Retry-After: 0,
// as API priority and fairness does, and later ones with the pod.
func throttledTwice(w http.ResponseWriter, r *http.Request, hit int) {
	if hit <= 2 {
		writeStatus(w, http.StatusTooManyRequests, "TooManyRequests", "0")
		return
	}
	writePod(w)
}

// writeStatus writes a Kubernetes Status error; retryAfter, when not
// empty, is sent as Retry-After.
func writeStatus(w http.ResponseWriter, code int, reason, retryAfter string) {
	w.Header().Set("Content-Type", "application/json")
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",`+
		`"message":"fake %s","reason":%q,"code":%d}`, reason, reason, code)
}

func writePod(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-0","namespace":"default"},`+
		`"spec":{"containers":[{"name":"web","image":"nginx"}]},"status":{"phase":"Running"}}`)
}
