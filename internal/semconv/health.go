package semconv

// The GPU and IB health the agent's stepspan processor attaches to a rank's
// step span from the nodestate extension, read by the gateway's correlator
// (as signals of its rules) and by tail sampling.
const (
	AttrHealthSMActive     = "gpu.health.sm_active"
	AttrHealthTemperature  = "gpu.health.temperature"
	AttrHealthThrottle     = "gpu.health.throttle_reasons"
	AttrHealthNVLinkCRC    = "gpu.health.nvlink_crc_errors"
	AttrHealthECCSBE       = "gpu.health.ecc_sbe_errors"
	AttrHealthECCDBE       = "gpu.health.ecc_dbe_errors"
	AttrHealthXIDs         = "gpu.health.xids"
	AttrHealthWindowS      = "gpu.health.window_s"
	AttrHealthIBSymbol     = "ib.health.symbol_errors"
	AttrHealthIBLinkDowned = "ib.health.link_downed"
)
