package ibreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver"

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/metadata"
)

const defaultCollectionInterval = 10 * time.Second

var errConfigNotIB = errors.New("ibreceiver: config is not a *ibreceiver.Config")

// NewFactory creates the factory of the ib receiver.
func NewFactory() receiver.Factory {
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithMetrics(createMetrics, metadata.MetricsStability),
	)
}

func createDefaultConfig() component.Config {
	cc := scraperhelper.NewDefaultControllerConfig()
	cc.CollectionInterval = defaultCollectionInterval
	return &Config{
		ControllerConfig: cc,
		SysfsRoot:        "/sys",
		Naming:           NamingOTel,
		HWCounters:       slices.Clone(DefaultHWCounters),
		ReadTimeout:      DefaultReadTimeout,
	}
}

func createMetrics(
	_ context.Context,
	set receiver.Settings,
	baseCfg component.Config,
	next consumer.Metrics,
) (receiver.Metrics, error) {
	cfg, ok := baseCfg.(*Config)
	if !ok {
		return nil, errConfigNotIB
	}
	s, err := newScraper(cfg, set)
	if err != nil {
		return nil, err
	}
	sc, err := scraper.NewMetrics(withoutDisabled(disabledMetrics(cfg), s.scrape), scraper.WithStart(s.start), scraper.WithShutdown(s.shutdown))
	if err != nil {
		return nil, err
	}
	return scraperhelper.NewMetricsController(
		&cfg.ControllerConfig, set, next,
		scraperhelper.AddMetricsScraper(metadata.Type, sc),
	)
}
