package nodeauthextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension"

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/kubernetes"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

var (
	_ extension.Extension  = (*nodeAuth)(nil)
	_ extensionauth.Server = (*nodeAuth)(nil)
)

// reasons are the refusal reasons, in a fixed order for the counter's
// options and the once-per-reason log.
var reasons = []string{
	metadata.ReasonMissingToken, metadata.ReasonUnknownToken, metadata.ReasonNotAuthenticated,
	metadata.ReasonWrongAudience, metadata.ReasonWrongServiceAccount, metadata.ReasonNoNode, metadata.ReasonReviewError,
}

// nodeAuth is the extension: one of tokens (tokens_file) or review
// (kubernetes) is set after Start.
type nodeAuth struct {
	cfg    *Config
	logger *zap.Logger
	tb     *metadata.TelemetryBuilder

	tokens *tokensFile
	review *reviewer

	// newClient builds the API client of the Kubernetes mode (a test may
	// replace it); now is the clock of the review cache.
	newClient func(KubernetesConfig) (kubernetes.Interface, error)
	now       func() time.Time

	byReason map[string]metric.AddOption
	warned   map[string]*atomic.Bool
}

func newNodeAuth(cfg *Config, set extension.Settings) (*nodeAuth, error) {
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("nodeauthextension: telemetry: %w", err)
	}
	a := &nodeAuth{
		cfg: cfg, logger: set.Logger, tb: tb,
		newClient: newClientset, now: time.Now,
		byReason: map[string]metric.AddOption{}, warned: map[string]*atomic.Bool{},
	}
	for _, r := range reasons {
		a.byReason[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrReason, r)))
		a.warned[r] = &atomic.Bool{}
	}
	return a, nil
}

// Start loads the tokens file (refusing to start on a bad one) or builds
// the API client.
func (a *nodeAuth) Start(_ context.Context, host component.Host) error {
	if a.cfg.Kubernetes.enabled() {
		client, err := a.newClient(a.cfg.Kubernetes)
		if err != nil {
			return fmt.Errorf("nodeauthextension: %w", err)
		}
		a.review = newReviewer(a.cfg.Kubernetes, client, a.now, func(result string) {
			a.tb.NodeauthReviews.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrResult, result))))
		})
		a.logger.Info("nodeauthextension: agents authenticate with their pods' ServiceAccount tokens (TokenReview)",
			zap.String("service_account", a.cfg.Kubernetes.ServiceAccount), zap.String("audience", a.cfg.Kubernetes.Audience),
			zap.Duration("cache_ttl", a.cfg.Kubernetes.CacheTTL))
		return nil
	}
	a.tokens = &tokensFile{path: a.cfg.TokensFile, reloaded: func(set *tokenSet, err error) { a.reloaded(host, set, err) }}
	set, err := a.tokens.start()
	if err != nil {
		a.tokens = nil
		return fmt.Errorf("nodeauthextension: %w", err)
	}
	a.logger.Info("nodeauthextension: agents authenticate with the tokens file",
		zap.String("tokens_file", a.cfg.TokensFile), zap.Int("tokens", len(set.byDigest)), zap.Int("nodes", set.nodes))
	return nil
}

// reloaded reports a reload of the tokens file: a bad file keeps the
// previous tokens, which the log says loudly (a revocation in it is not
// in force).
func (a *nodeAuth) reloaded(host component.Host, set *tokenSet, err error) {
	if err != nil {
		a.tb.NodeauthTokensFileReloads.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrResult, metadata.ResultInvalid))))
		a.logger.Error("nodeauthextension: the tokens file changed but cannot be used; the previous tokens stay in force (a line removed from it still authenticates)", zap.Error(err))
		componentstatus.ReportStatus(host, componentstatus.NewRecoverableErrorEvent(err))
		return
	}
	a.tb.NodeauthTokensFileReloads.Add(context.Background(), 1, metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrResult, metadata.ResultLoaded))))
	a.logger.Info("nodeauthextension: tokens file reloaded",
		zap.String("tokens_file", a.cfg.TokensFile), zap.Int("tokens", len(set.byDigest)), zap.Int("nodes", set.nodes))
	componentstatus.ReportStatus(host, componentstatus.NewEvent(componentstatus.StatusOK))
}

// Shutdown stops watching the tokens file.
func (a *nodeAuth) Shutdown(context.Context) error {
	if a.tokens != nil {
		return a.tokens.shutdown()
	}
	return nil
}

// Authenticate admits a request with one bearer token that names a node
// and puts that node on the context (client.Info's Auth). A refusal is
// Unauthenticated; a TokenReview that could not be made is Unavailable,
// which the agent's exporter retries.
func (a *nodeAuth) Authenticate(ctx context.Context, headers map[string][]string) (context.Context, error) {
	token, ok := bearerToken(headers)
	if !ok {
		return ctx, a.refuse(ctx, metadata.ReasonMissingToken, "no single \"authorization: Bearer <token>\" header")
	}
	var v verdict
	switch {
	case a.tokens != nil:
		e, found := a.tokens.current.Load().lookup(token)
		if !found {
			return ctx, a.refuse(ctx, metadata.ReasonUnknownToken, "the token is on no line of the tokens file")
		}
		v = verdict{node: e.node, subject: "tokens_file line " + strconv.Itoa(e.line)}
	case a.review != nil:
		var err error
		v, err = a.review.verify(ctx, token)
		if err != nil {
			a.count(ctx, metadata.ReasonReviewError, err.Error())
			return ctx, status.Error(codes.Unavailable, "nodeauth: the token could not be reviewed: "+err.Error())
		}
		if v.refusal != "" {
			return ctx, a.refuse(ctx, v.refusal, v.detail)
		}
	default:
		return ctx, status.Error(codes.Unavailable, "nodeauth: not started")
	}
	cl := client.FromContext(ctx)
	cl.Auth = authData{node: v.node, subject: v.subject}
	return client.NewContext(ctx, cl), nil
}

// refuse counts and logs (once per reason) a refusal and returns its error.
func (a *nodeAuth) refuse(ctx context.Context, reason, detail string) error {
	a.count(ctx, reason, detail)
	return status.Error(codes.Unauthenticated, "nodeauth: "+reason+": "+detail)
}

func (a *nodeAuth) count(ctx context.Context, reason, detail string) {
	a.tb.NodeauthRefused.Add(ctx, 1, a.byReason[reason])
	if !a.warned[reason].Swap(true) {
		var addr string
		if cl := client.FromContext(ctx); cl.Addr != nil {
			addr = cl.Addr.String()
		}
		a.logger.Warn("nodeauthextension: a request was refused (logged once per reason, counted in otelcol_nodeauth_refused)",
			zap.String("reason", reason), zap.String("detail", detail), zap.String("peer", addr))
	}
}

// bearerToken is the token of the one authorization header (gRPC metadata
// is lower case, HTTP canonical), scheme Bearer in any case.
func bearerToken(headers map[string][]string) (string, bool) {
	values := headers["authorization"]
	if canonical := headers[http.CanonicalHeaderKey("authorization")]; len(canonical) > 0 {
		values = append(append([]string(nil), values...), canonical...)
	}
	if len(values) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}

// authData is the node bound to a request (client.AuthData).
type authData struct {
	node, subject string
}

var authNames = []string{semconv.AuthAttrNode, semconv.AuthAttrSubject}

func (d authData) GetAttribute(name string) any {
	switch name {
	case semconv.AuthAttrNode:
		return d.node
	case semconv.AuthAttrSubject:
		return d.subject
	}
	return nil
}

func (authData) GetAttributeNames() []string { return append([]string(nil), authNames...) }
