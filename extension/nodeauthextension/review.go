package nodeauthextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension"

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension/internal/metadata"
)

// The user extra keys the API server gives a pod-bound ServiceAccount
// token (ServiceAccountTokenPodNodeInfo, on by default since Kubernetes
// 1.30, GA in 1.32).
const (
	extraNodeName = "authentication.kubernetes.io/node-name"
	extraPodName  = "authentication.kubernetes.io/pod-name"
)

// Bounds of the TokenReviews themselves.
const (
	// reviewTimeout bounds one TokenReview (the request's own deadline
	// may be shorter).
	reviewTimeout = 5 * time.Second
	// maxConcurrentReviews bounds the reviews in flight: a flood of
	// unknown tokens waits here instead of reaching the API server.
	maxConcurrentReviews = 16
)

// reviewer checks ServiceAccount tokens with TokenReviews.
type reviewer struct {
	client   kubernetes.Interface
	audience string
	username string // system:serviceaccount:<namespace>:<name>
	ttl      time.Duration
	cache    *reviewCache
	slots    chan struct{}
	now      func() time.Time
	// reviewed is told the result of each review sent (telemetry).
	reviewed func(result string)
}

func newReviewer(cfg KubernetesConfig, client kubernetes.Interface, now func() time.Time, reviewed func(string)) *reviewer {
	ns, name := cfg.serviceAccount()
	return &reviewer{
		client:   client,
		audience: cfg.Audience,
		username: "system:serviceaccount:" + ns + ":" + name,
		ttl:      cfg.CacheTTL,
		cache:    newReviewCache(cfg.CacheSize),
		slots:    make(chan struct{}, maxConcurrentReviews),
		now:      now,
		reviewed: reviewed,
	}
}

// newClientset is the API client of cfg: its kubeconfig, or the pod's
// ServiceAccount.
func newClientset(cfg KubernetesConfig) (kubernetes.Interface, error) {
	var (
		rc  *rest.Config
		err error
	)
	if cfg.Kubeconfig == "" {
		rc, err = rest.InClusterConfig()
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes: client config: %w", err)
	}
	rc.UserAgent = "otelcol-gpu-nodeauth"
	return kubernetes.NewForConfig(rc)
}

// verify says which node token speaks for. An error is a failed review
// (nothing was decided about the token): the request is to be retried.
func (r *reviewer) verify(ctx context.Context, token string) (verdict, error) {
	key := sha256.Sum256([]byte(token))
	now := r.now()
	if r.ttl > 0 {
		if v, ok := r.cache.get(key, now); ok {
			return v, nil
		}
	}
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return verdict{}, fmt.Errorf("waiting for a TokenReview slot: %w", ctx.Err())
	}
	defer func() { <-r.slots }()
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	tr, err := r.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{r.audience}},
	}, metav1.CreateOptions{})
	if err != nil {
		r.reviewed(metadata.ResultError)
		return verdict{}, fmt.Errorf("TokenReview: %w", err)
	}
	v := r.judge(tr.Status)
	if v.refusal == "" {
		r.reviewed(metadata.ResultAuthenticated)
	} else {
		r.reviewed(metadata.ResultRefused)
	}
	if r.ttl > 0 {
		expires := now.Add(r.ttl)
		if exp, ok := tokenExpiry(token); ok && exp.Before(expires) {
			expires = exp
		}
		r.cache.put(key, v, expires)
	}
	return v, nil
}

// judge reads a review's status: authenticated, for the audience, as the
// agents' ServiceAccount, bound to a pod on a node.
func (r *reviewer) judge(st authenticationv1.TokenReviewStatus) verdict {
	if !st.Authenticated {
		return verdict{refusal: metadata.ReasonNotAuthenticated, detail: st.Error}
	}
	if !slices.Contains(st.Audiences, r.audience) {
		return verdict{refusal: metadata.ReasonWrongAudience, detail: fmt.Sprintf("audiences %q, want %q", st.Audiences, r.audience)}
	}
	if st.User.Username != r.username {
		return verdict{refusal: metadata.ReasonWrongServiceAccount, detail: fmt.Sprintf("user %q, want %q", st.User.Username, r.username)}
	}
	nodes := st.User.Extra[extraNodeName]
	pods := st.User.Extra[extraPodName]
	if len(nodes) != 1 || nodes[0] == "" || len(pods) != 1 || pods[0] == "" {
		return verdict{refusal: metadata.ReasonNoNode, detail: fmt.Sprintf("user %q: the token is not bound to a pod on a node (extra %s %q, %s %q)", st.User.Username, extraPodName, pods, extraNodeName, nodes)}
	}
	if err := checkNodeName(nodes[0]); err != nil {
		return verdict{refusal: metadata.ReasonNoNode, detail: "node " + err.Error()}
	}
	return verdict{node: nodes[0], subject: st.User.Username + " pod=" + pods[0]}
}

// tokenExpiry reads the exp claim of a JWT, unverified: only to hold a
// review's answer no longer than the token lives (the review verified it).
func tokenExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp <= 0 {
		return time.Time{}, false
	}
	return time.Unix(claims.Exp, 0), true
}
